"""sm_90a compiles of the warp-specialised GDN forward (kernels/fwd_ws.py, the tooling's
knob decay="scaled-ws"; plain, training and output-free builds): the role split as ptxas left it (setmaxnreg values, the chain's
wgmma only on the consumer side and unspilled there, the copies and the Gram on the
producer side, the named barriers with their thread counts), and the knob's reach.

The matrix's core (compile_tiers): decay="scaled-ws" is an experiment (the product's GDN
forward is the four-role kernel or the scaled chain: compile_kernel.product_decay), whose
class (fwd_ws.WarpSpecialisedChain) is the four-role kernel's base; so every run builds
it once, at the bench's config (its role split and hand-over barriers), and checks the
knob's reach (no build). Its other modes, the wgmma Gram in the producer and the
register-split knob wait for FROST_FULL_MATRIX=1; the product's four-role builds (plain,
training, output-free) are frost_compile_ws4_test's core.
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
from compile_tiers import FULL_ENV, full_matrix, tiered  # noqa: E402

pytestmark = pytest.mark.skipif(report.tool("CUOBJDUMP", "cuobjdump") is None
                                or report.tool("NVDISASM", "nvdisasm") is None,
                                reason="cuobjdump / nvdisasm not found")


MODES = ("plain", "initial-state", "training", "output-free")  # output-free: the backward's recompute


def _config(l2, mode="plain", gram="mma", ws_regs=()):
    cfg = report.config_for("gdn", "product", 128, 128, l2)
    if mode == "initial-state":
        cfg = dataclasses.replace(cfg, has_initial_state=True, state_dtype=cfg.state_dtype or "float32")
    elif mode == "training":
        cfg = dataclasses.replace(cfg, has_initial_state=True, write_checkpoints=True, write_values=True)
    elif mode == "output-free":
        cfg = dataclasses.replace(cfg, write_checkpoints=True, write_values=True, write_output=False)
    return fx.tooling_config(cfg, "wgmma", decay="scaled-ws", gram=gram, ws_regs=ws_regs)


@functools.cache
def _build(l2, mode="plain", gram="mma", ws_regs=()):
    """(resources, SASS instructions with their guard predicates stripped: the hand-over
    barriers are conditional, @P BAR...)."""
    with tempfile.TemporaryDirectory() as tmp:
        cubin = report.compile_cubin(_config(l2, mode, gram, ws_regs), tmp)
        sass = report.sass_instructions(cubin)
        return report.resource_usage(cubin), tuple(re.sub(r"^@!?U?P[0-9T]+\s+", "", i) for i in sass)


@pytest.mark.parametrize("l2,mode", tiered(  # core: the bench's config (an experiment kernel: the docstring)
    [(True, "plain"), (False, "plain"), (True, "initial-state"), (True, "training"), (False, "training"),
     (True, "output-free")], [0], unpack=True))
def test_roles_as_compiled(l2, mode):
    from cudnn.linear_attention.frost.kernels import fwd_ws as ws

    cfg = _config(l2, mode)
    assert cfg.decay == "scaled-ws" and "decay-scaled-ws" in cfg.kernel_label
    usage, sass = _build(l2, mode)
    wo = mode != "output-free"
    assert usage["REG"] <= 65536 // ws.BLOCK_THREADS, usage  # the launch's share; the roles re-split it
    dealloc, alloc = report.setmaxnreg_sites(sass)
    assert len(dealloc) == 1 and len(alloc) == 1, (dealloc, alloc)
    assert f"{ws.PRODUCER_REGS:#x}" in sass[dealloc[0]] and f"{ws.CONSUMER_REGS:#x}" in sass[alloc[0]]
    # ptxas lays the producer branch out first, then the consumers' (checked, not assumed)
    assert dealloc[0] < alloc[0]
    producer, consumer = sass[dealloc[0]:alloc[0]], sass[alloc[0]:]
    # the chain: all 24 wgmma (X, S^T Q^T 8 each, P U and the state update 4 each; output-free
    # X and the update, 12); at the consumers' registers no spill in the plain builds (a
    # reload or two of a value the prologue spilled before the split) and a few in the
    # training ones (their checkpoint row and U pointers: 6 stores, 9 reloads at most seen);
    # the producer: every row copy and the Gram's mma.sync
    assert sum(i.startswith("HGMMA") for i in consumer) == (24 if wo else 12)
    assert not any(i.startswith("HGMMA") for i in producer)
    stl, ldl = sum(i.startswith("STL") for i in consumer), sum(i.startswith("LDL") for i in consumer)
    if mode in ("plain", "initial-state"):
        assert stl == 0 and ldl <= 2, (stl, ldl)
    else:
        assert stl <= 10 and ldl <= 12, (stl, ldl)
    assert any(i.startswith("LDGSTS") for i in producer) and not any(i.startswith("LDGSTS") for i in consumer)
    hmma = sum(i.startswith("HMMA") for i in producer), sum(i.startswith("HMMA") for i in consumer)
    assert hmma == ((32 if wo else 16), 20), hmma  # one Gram tile's M and P (K / 16 x 2 x 2); the block solve
    # one CTA-wide barrier (before the split); the producer's own (256 threads); the hand-over
    # barriers (512: FULL arrived by the producer, EMPTY arrived by the consumers)
    assert sum(i.startswith("BAR.SYNC") and " 0x0 " in i + " " for i in sass) == 1
    assert any(i.startswith("BAR.SYNC") and f"{ws.BAR_PRODUCER:#x}, {ws.ROLE_THREADS:#x}" in i for i in producer)
    full_arrive = [i for i in producer if i.startswith("BAR.ARV") and f"{ws.BLOCK_THREADS:#x}" in i]
    empty_wait = [i for i in producer if i.startswith("BAR.SYNC") and f"{ws.BLOCK_THREADS:#x}" in i]
    full_wait = [i for i in consumer if i.startswith("BAR.SYNC") and f"{ws.BLOCK_THREADS:#x}" in i]
    empty_arrive = [i for i in consumer if i.startswith("BAR.ARV") and f"{ws.BLOCK_THREADS:#x}" in i]
    assert len(full_arrive) == len(empty_wait) == len(full_wait) == len(empty_arrive) == 1


def test_the_knob_reaches_k128_gdn_only():
    from cudnn.linear_attention.frost.kernels.compile_kernel import kernel_class
    from cudnn.linear_attention.frost.kernels.fwd_wgmma import FrostFwdWgmma
    from cudnn.linear_attention.frost.kernels.fwd_ws import WarpSpecialisedChain

    gdn = report.config_for("gdn", "product", 128, 128, True)
    cls = kernel_class(fx.tooling_config(gdn, "wgmma", decay="scaled-ws"), "sm_90a")
    assert issubclass(cls, WarpSpecialisedChain) and issubclass(cls, FrostFwdWgmma) and cls.warp_specialised
    train = dataclasses.replace(gdn, write_checkpoints=True, write_values=True)
    assert fx.tooling_config(train, "wgmma", decay="scaled-ws").decay == "scaled-ws"
    # at K = 64 (one consumer warpgroup) the scaled chain without the roles
    small = report.config_for("gdn", "product", 64, 64, True)
    assert fx.tooling_config(small, "wgmma", decay="scaled-ws") is small  # the product's own (scaled) chain
    with pytest.raises(ValueError, match=r"decay must be one of .* only for K = V = 128"):
        fx.experiment(small, "wgmma", decay="scaled-ws")


@pytest.mark.skipif(not full_matrix(), reason=f"outside the matrix's core: set {FULL_ENV}=1 to run it")
def test_wgmma_gram_in_the_producer_keeps_the_role_split():
    """gram="wgmma16" with the producer role (fwd_ws.GRAM_WGMMA_REGS): ptxas honours both
    setmaxnreg (at 40 it dropped the producer's and with it the split), the Gram's 8
    SS wgmma per column block sit on the producer side, no mma.sync Gram is left there."""
    from cudnn.linear_attention.frost.kernels import fwd_ws as ws

    cfg = _config(True, gram="wgmma16")
    assert cfg.gram == "wgmma16" and cfg.decay == "scaled-ws"
    _, sass = _build(True, "plain", "wgmma16")
    consumer_regs, producer_regs = ws.GRAM_WGMMA_REGS
    dealloc, alloc = report.setmaxnreg_sites(sass)
    assert len(dealloc) == 1 and len(alloc) == 1 and dealloc[0] < alloc[0], (dealloc, alloc)
    assert f"{producer_regs:#x}" in sass[dealloc[0]] and f"{consumer_regs:#x}" in sass[alloc[0]]
    producer = sass[dealloc[0]:alloc[0]]
    # M and P: 64 / 16 column blocks x K / 16 k-steps each, m64n16
    assert sum(i.startswith("HGMMA.64x16x16") for i in producer) == 2 * 4 * 8
    assert not any(i.startswith("HMMA") for i in producer)
    # output-free builds have no P warpgroup: the knob leaves them on the mma.sync Gram
    free = _config(True, "output-free", gram="wgmma16")
    assert free.gram == "mma" and free.decay == "scaled-ws"


@pytest.mark.skipif(not full_matrix(), reason=f"outside the matrix's core: set {FULL_ENV}=1 to run it")
def test_register_split_knob_reaches_setmaxnreg():
    """ws_regs=(184, 72) (FROST_FWD_WS_REGS): the producer lowers to 72 and the consumers
    raise to 184 in the build, the roles otherwise as compiled above."""
    _, sass = _build(True, "plain", ws_regs=(184, 72))
    dealloc, alloc = report.setmaxnreg_sites(sass)
    assert len(dealloc) == 1 and len(alloc) == 1, (dealloc, alloc)
    assert f"{72:#x}" in sass[dealloc[0]] and f"{184:#x}" in sass[alloc[0]], (sass[dealloc[0]], sass[alloc[0]])


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
