"""sm_90a compiles of the warp-specialised GDN forward with the full inverse on the producer
(kernels/fwd_ws_wy.py, the tooling's knobs decay="wy-ws" and, without W', "wyc-ws"; plain,
training and output-free builds): where ptxas put the work of each role (the chain's wgmma and nothing else of
the solve on the consumer side, the Gram and both block solves on the producer side),
spills at the kernel's register split, no performance note, the shared-memory plan
under the limit, and the knob's reach.

The matrix's core (compile_tiers; ~3 s on one core, ~15 s before its two builds moved to
the full matrix, the full matrix ~80 s): both kernels are experiments (the product's GDN
forward is the four-role one, fwd_ws4.FourRoles, a subclass of this file's
FullInverseChain, built and inspected in frost_compile_ws4_test's core), so the core
keeps the plans and the knob. Every build (wy-ws's plain build with l2norm, wyc-ws's
training build, the others), the wgmma Gram in the producer and the ptxas notes at and
below the kernels' splits wait for FROST_FULL_MATRIX=1.
"""
import dataclasses
import functools
import os
import re
import sys
import tempfile

import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import frost_cubin_report as report  # noqa: E402
import frost_fwd_experiments as fx  # noqa: E402
from compile_tiers import tiered  # noqa: E402

pytestmark = pytest.mark.skipif(report.tool("CUOBJDUMP", "cuobjdump") is None
                                or report.tool("NVDISASM", "nvdisasm") is None,
                                reason="cuobjdump / nvdisasm not found")


def _config(l2, mode="plain", ws_regs=(), decay="wy-ws", gram="mma"):
    cfg = report.config_for("gdn", "product", 128, 128, l2)
    if mode == "training":
        cfg = dataclasses.replace(cfg, has_initial_state=True, write_checkpoints=True, write_values=True)
    elif mode == "output-free":
        cfg = dataclasses.replace(cfg, write_checkpoints=True, write_values=True, write_output=False)
    return fx.tooling_config(cfg, "wgmma", decay=decay, ws_regs=ws_regs, gram=gram)


@functools.cache
def _build(l2, mode="plain", ws_regs=(), decay="wy-ws", gram="mma"):
    with tempfile.TemporaryDirectory() as tmp:
        cubin = report.compile_cubin(_config(l2, mode, ws_regs, decay, gram), tmp)
        sass = report.sass_instructions(cubin)
        return report.resource_usage(cubin), tuple(re.sub(r"^@!?U?P[0-9T]+\s+", "", i) for i in sass)


def _count(instrs, prefix):
    return sum(i.startswith(prefix) for i in instrs)


@pytest.mark.parametrize("l2,mode,decay", tiered(
    [(True, "plain", "wy-ws"), (False, "plain", "wy-ws"), (True, "training", "wy-ws"), (True, "output-free", "wy-ws"),
     (True, "plain", "wyc-ws"), (True, "training", "wyc-ws")], [], ids=lambda c: "-".join(map(str, c)),
    unpack=True))
def test_roles_as_compiled(l2, mode, decay):
    from cudnn.linear_attention.frost.kernels import fwd_ws as ws
    from cudnn.linear_attention.frost.kernels import fwd_ws_wy as wy

    cfg = _config(l2, mode, decay=decay)
    assert cfg.decay == decay and f"decay-{decay}" in cfg.kernel_label
    usage, sass = _build(l2, mode, decay=decay)
    wp = decay == "wy-ws"
    wo = mode != "output-free"
    assert usage["REG"] <= 65536 // ws.BLOCK_THREADS, usage
    dealloc, alloc = report.setmaxnreg_sites(sass)
    assert len(dealloc) == 1 and len(alloc) == 1 and dealloc[0] < alloc[0], (dealloc, alloc)
    consumer_regs, producer_regs = wy.REGISTER_SPLIT if decay == "wy-ws" else wy.IN_CHAIN_REGISTER_SPLIT
    assert f"{producer_regs:#x}" in sass[dealloc[0]] and f"{consumer_regs:#x}" in sass[alloc[0]]
    producer, consumer = sass[dealloc[0]:alloc[0]], sass[alloc[0]:]
    # the consumers: U^T (C / 16 + K / 16 = 12 k-steps; wyc-ws: X = S^T K^T, 8, then R^T A^T,
    # 4), S^T Q^T (8), P U (4), the state update (4); output-free U and the update. No
    # mma.sync: the solve left the chain.
    assert _count(consumer, "HGMMA") == (28 if wo else 16)
    assert _count(consumer, "HMMA") == 0 and _count(producer, "HGMMA") == 0
    # the producer: the Gram (32 / 16 output-free), the W' solve (4 blocks, 10 16 x 16 x 16
    # products = 20; none in wyc-ws), the four inverse column blocks' solves (10 + 6 + 3 + 1
    # products = 40)
    assert _count(producer, "HMMA") == (32 if wo else 16) + (20 if wp else 0) + 40
    assert _count(producer, "LDGSTS") > 0 and _count(consumer, "LDGSTS") == 0
    # spills at the kernels' splits (the consumers none; the producer 5 / 5 at 64 registers,
    # 6 / 14 at 48; output-free more)
    assert _count(consumer, "STL") == 0 and _count(consumer, "LDL") == 0
    if wo:
        assert _count(producer, "STL") <= 8 and _count(producer, "LDL") <= (8 if wp else 16)
    # the transposed block loads (the W' solve's K^T) and stores (W' and A)
    assert _count(producer, "LDSM.16.MT88.4") == (4 if wp else 0)
    assert _count(producer, "STSM.16.MT88.4") == (4 if wp else 0) + 10
    # the hand-over of fwd_ws.py: one FULL arrive / wait, one EMPTY wait / arrive
    full_arrive = [i for i in producer if i.startswith("BAR.ARV") and f"{ws.BLOCK_THREADS:#x}" in i]
    empty_wait = [i for i in producer if i.startswith("BAR.SYNC") and f"{ws.BLOCK_THREADS:#x}" in i]
    full_wait = [i for i in consumer if i.startswith("BAR.SYNC") and f"{ws.BLOCK_THREADS:#x}" in i]
    empty_arrive = [i for i in consumer if i.startswith("BAR.ARV") and f"{ws.BLOCK_THREADS:#x}" in i]
    assert len(full_arrive) == len(empty_wait) == len(full_wait) == len(empty_arrive) == 1


@pytest.mark.parametrize("decay", tiered(["wy-ws", "wyc-ws"], []))
def test_wgmma_gram_in_the_producer(decay):
    """The wgmma Gram knob (fwd_wgmma_gram.GramWgmma, m64n64) in either full-inverse producer at
    its split (GRAM_WGMMA_REGISTER_SPLIT, 192 / 64): the setmaxnreg pair survives, the
    producer's mma.sync Gram (32 HMMA) becomes two 8-step wgmma chains (M on its first
    warpgroup, P on its second) beside the solves' mma.sync, the consumers are the mma
    Gram build's and do not spill."""
    from cudnn.linear_attention.frost.kernels import fwd_ws_wy as wy

    _, sass = _build(True, decay=decay, gram="wgmma64")
    dealloc, alloc = report.setmaxnreg_sites(sass)
    assert len(dealloc) == 1 and len(alloc) == 1, (dealloc, alloc)
    consumer_regs, producer_regs = wy.GRAM_WGMMA_REGISTER_SPLIT
    assert f"{producer_regs:#x}" in sass[dealloc[0]] and f"{consumer_regs:#x}" in sass[alloc[0]]
    producer, consumer = sass[dealloc[0]:alloc[0]], sass[alloc[0]:]
    assert _count(producer, "HGMMA") == 2 * 8
    assert _count(producer, "HMMA") == (20 if decay == "wy-ws" else 0) + 40
    assert _count(consumer, "HGMMA") == 28 and _count(consumer, "HMMA") == 0
    assert _count(consumer, "STL") == 0 and _count(consumer, "LDL") == 0


@pytest.mark.parametrize("mode,decay", tiered([("plain", "wy-ws"), ("training", "wy-ws"), ("plain", "wyc-ws")], [],
                                               ids=lambda c: "-".join(c), unpack=True))
def test_no_ptxas_performance_note(mode, decay):
    """At their splits (192 / 64, 208 / 48) ptxas keeps the chains' wgmma asynchronous (8
    registers fewer for either chain's consumers and it serializes them, C7512:
    test_a_smaller_consumer_share_serializes_the_chain)."""
    from cudnn.linear_attention.frost.kernels.compile_kernel import kernel_class
    from cudnn.linear_attention.frost.kernels.launch_abi import fake_args

    cfg = _config(True, mode, decay=decay)
    assert report.ptxas_notes(kernel_class(cfg, "sm_90a")(cfg), fake_args(cfg)) == set()


@pytest.mark.parametrize("decay,split", tiered([("wy-ws", (184, 72)), ("wyc-ws", (200, 56))], [],  # 8 fewer
                                                ids=lambda c: f"{c[0]}-split{c[1][0]}", unpack=True))
def test_a_smaller_consumer_share_serializes_the_chain(decay, split):
    from cudnn.linear_attention.frost.kernels.compile_kernel import kernel_class
    from cudnn.linear_attention.frost.kernels.launch_abi import fake_args

    cfg = _config(True, "plain", ws_regs=split, decay=decay)
    assert "C7512" in report.ptxas_notes(kernel_class(cfg, "sm_90a")(cfg), fake_args(cfg))


def test_shared_memory_plan():
    """Two operand sets with A and W' fit the 227 KB a CTA may use; without dropping the raw
    v tile and single-buffering -M and the inverses they would not."""
    from cudnn.linear_attention.frost.kernels import fwd_ws, fwd_ws_wy
    from cudnn.linear_attention.frost.kernels.fwd_mma import SMEM_LIMIT, smem_bytes

    cfg = _config(True)
    used = smem_bytes(cfg, fwd_ws_wy.smem_plan)
    assert used <= SMEM_LIMIT
    added = [e for e in fwd_ws_wy.smem_plan(cfg) if e[0] in ("ainv", "wp")]
    assert smem_bytes(cfg, lambda c: fwd_ws.smem_plan(c) + added) > SMEM_LIMIT
    names = [e[0] for e in fwd_ws_wy.smem_plan(cfg)]
    assert "rv" not in names and names.count("ainv") == names.count("wp") == 1
    assert [e for e in fwd_ws_wy.smem_plan_in_chain(cfg) if e[0] == "wp"] == []


def test_the_knob():
    from cudnn.linear_attention.frost.kernels.compile_kernel import kernel_class
    from cudnn.linear_attention.frost.kernels.fwd_wgmma_gram import GramWgmma
    from cudnn.linear_attention.frost.kernels.fwd_ws_wy import FullInverseChain, FullInverseInChain

    gdn = report.config_for("gdn", "product", 128, 128, True)
    def split(**knobs):
        cfg = fx.tooling_config(gdn, "wgmma", **knobs)
        kernel = kernel_class(cfg, "sm_90a")(cfg)
        return type(kernel), (kernel.consumer_regs, kernel.producer_regs)

    cls, regs = split(decay="wy-ws")
    assert issubclass(cls, FullInverseChain) and regs == (192, 64) and not cls.inverse_in_chain
    in_chain, regs = split(decay="wyc-ws")
    assert issubclass(in_chain, FullInverseInChain) and in_chain.inverse_in_chain and regs == (208, 48)
    assert split(decay="wy-ws", ws_regs=(208, 48))[1] == (208, 48)
    # the wgmma Gram knob: GramWgmma first in the bases, its own default split, the override kept
    gram, regs = split(decay="wyc-ws", gram="wgmma64")
    assert issubclass(gram, GramWgmma) and issubclass(gram, FullInverseInChain) and gram.gram_n == 64
    assert regs == (192, 64) and split(decay="wyc-ws", gram="wgmma", ws_regs=(184, 72))[1] == (184, 72)
    small = report.config_for("gdn", "product", 64, 64, True)
    assert fx.tooling_config(small, "wgmma", decay="wy-ws") is small  # K = 64: the product's scaled chain
    with pytest.raises(ValueError, match="decay"):
        fx.experiment(report.config_for("kda", "product", 128, 128, True), "wgmma", decay="wy-ws")


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
