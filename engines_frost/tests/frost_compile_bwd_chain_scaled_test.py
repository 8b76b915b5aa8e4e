"""sm_90a compiles of the backward's scaled-decay chain (kernels/bwd_chain_scaled.py,
FrostBwdConfig.chain_scaled) and of its warp-specialised form (bwd_chain_ws.py,
chain_ws): no spills and fewer registers than the wgmma chain it
replaces, its 20 wgmma with the update's 8 reading q-hat and k-hat transposed (.tnspB),
the folded operand tiles' transposed 2-byte stores gone; the config's and the launcher's
rules for it.

The matrix's core (compile_tiers; ~20 s on one core, the full matrix ~55 s): the scaled
chain is the product's GDN chain where the four-role one does not apply (bf16 at head
dims other than K = V = 128), so the core builds it at K = 64 with an initial state and
at K = 128 (where it must stay below the wgmma chain's registers) without; the other
two K = 128 builds and the warp-specialised chain (an experiment) wait for
FROST_FULL_MATRIX=1.
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
from frost_cubin_report import bwd_config_for as _cfg  # noqa: E402
from compile_tiers import FULL_ENV, full_matrix, tiered  # noqa: E402

pytestmark = pytest.mark.skipif(report.tool("CUOBJDUMP", "cuobjdump") is None
                                or report.tool("NVDISASM", "nvdisasm") is None,
                                reason="cuobjdump / nvdisasm not found")

ASYNC = dict(chain_wgmma=True, chain_async=True)


@functools.cache
def _build(scaled, h0, K=128, l2=True, forward_values=False, ws=False, ws_regs=()):
    cfg = dataclasses.replace(_cfg("gdn", "chain", K=K, V=K, H=16, HV=16, l2=l2, h0=h0), **ASYNC,
                              chain_scaled=scaled, forward_values=forward_values, chain_ws=ws,
                              chain_ws_regs=ws_regs)
    with tempfile.TemporaryDirectory() as tmp:
        cubin = report.compile_bwd_cubin(cfg, tmp)
        sass = report.sass_instructions(cubin)
        return report.resource_usage(cubin), tuple(re.sub(r"^@!?U?P[0-9T]+\s+", "", i) for i in sass)


@pytest.mark.parametrize("K,h0,l2,fv", tiered(
    [(128, False, True, False), (128, True, False, False), (128, False, True, True), (64, True, True, False)], [0, 3],
    ids=lambda c: "-".join(map(str, c)), unpack=True))
def test_scaled_chain_as_compiled(K, h0, l2, fv):
    usage, sass = _build(True, h0, K, l2, fv)
    base, base_sass = _build(False, h0, K, l2, fv)
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, usage
    if K == 128:  # the wgmma chain sits at 249 there
        assert usage["REG"] < base["REG"], (usage, base)
    hgmma = [i for i in sass if i.startswith("HGMMA")]
    # dS^T K^T (K/16) and dO^T P (4) at N = C; the update, dO fo Q and dR fr K per token block (8)
    assert len(hgmma) == K // 16 + 4 + 8, hgmma
    tn = [i for i in hgmma if ".tnspB" in i]
    assert len(tn) == 8 and all(i.startswith(f"HGMMA.64x{K}x16.") for i in tn), hgmma
    assert not any(".tnsp" in i for i in base_sass)
    sts16 = sum(i.startswith("STS.U16") for i in sass), sum(i.startswith("STS.U16") for i in base_sass)
    assert sts16[0] < sts16[1], sts16


def test_config_and_launcher_rules():
    import frost_bwd_experiments as fbx
    from cudnn.linear_attention.frost.kernels.bwd_chain_scaled import FrostBwdChainScaled
    from cudnn.linear_attention.frost.kernels.bwd_compile import bwd_kernel_for

    gdn = dataclasses.replace(_cfg("gdn", "chain"), **ASYNC, chain_scaled=True)
    assert bwd_kernel_for(gdn) is FrostBwdChainScaled
    for bad in (dict(chain_wgmma=False, chain_async=False), ):
        with pytest.raises(ValueError, match="chain_scaled must be False unless chain_wgmma"):
            dataclasses.replace(gdn, **bad)
    with pytest.raises(ValueError, match="chain_scaled must be False unless chain_wgmma"):
        dataclasses.replace(_cfg("kda", "chain"), chain_wgmma=True, chain_scaled=True)
    # only the chain kernel carries it
    assert not gdn.with_stage("grads").chain_scaled and gdn.with_stage("chain").chain_scaled
    assert "wgmma_scaled" in fbx.CHAIN_VARIANTS


@pytest.mark.parametrize("h0,fv", tiered([(False, False), (True, False), (False, True)], [],  # an experiment
                                         ids=lambda c: "-".join(map(str, c)), unpack=True))
def test_warp_specialised_chain_as_compiled(h0, fv):
    from cudnn.linear_attention.frost.kernels import fwd_ws as ws

    _, sass = _build(True, h0, 128, True, fv, ws=True)
    dealloc, alloc = report.setmaxnreg_sites(sass)
    assert len(dealloc) == 1 and len(alloc) == 1 and dealloc[0] < alloc[0], (dealloc, alloc)
    assert f"{ws.PRODUCER_REGS:#x}" in sass[dealloc[0]] and f"{ws.CONSUMER_REGS:#x}" in sass[alloc[0]]
    producer, consumer = sass[dealloc[0]:alloc[0]], sass[alloc[0]:]
    # the chain step's 20 wgmma on the consumer side, unspilled; the copies and the Gram's
    # mma.sync on the producer side; the hand-over barriers as the forward's
    assert sum(i.startswith("HGMMA") for i in consumer) == 20 and not any(i.startswith("HGMMA") for i in producer)
    # (the forward_values build's tail, warp 0 zeroing uncovered gradient rows, reloads a
    # value the prologue spilled: outside the chain step, which must have none)
    first = next(n for n, i in enumerate(consumer) if i.startswith("HGMMA"))
    last = max(n for n, i in enumerate(consumer) if i.startswith("HGMMA"))
    assert not any(i.startswith(("STL", "LDL")) for i in consumer[first:last])
    assert any(i.startswith("LDGSTS") for i in producer) and not any(i.startswith("LDGSTS") for i in consumer)
    assert sum(i.startswith("HMMA") for i in producer) == 32 and sum(i.startswith("HMMA") for i in consumer) == 20
    for part, op in ((producer, "BAR.ARV"), (producer, "BAR.SYNC"), (consumer, "BAR.SYNC"), (consumer, "BAR.ARV")):
        assert sum(i.startswith(op) and f"{ws.BLOCK_THREADS:#x}" in i for i in part) == 1, (op, part is producer)


@pytest.mark.skipif(not full_matrix(), reason=f"outside the matrix's core: set {FULL_ENV}=1 to run it")
def test_warp_specialised_chain_register_split_reaches_setmaxnreg():
    """chain_ws_regs=(184, 72) (FROST_BWD_WS_REGS): the producer lowers to 72, the consumers
    raise to 184."""
    _, sass = _build(True, False, 128, True, False, ws=True, ws_regs=(184, 72))
    dealloc, alloc = report.setmaxnreg_sites(sass)
    assert len(dealloc) == 1 and len(alloc) == 1, (dealloc, alloc)
    assert f"{72:#x}" in sass[dealloc[0]] and f"{184:#x}" in sass[alloc[0]], (sass[dealloc[0]], sass[alloc[0]])


def test_warp_specialised_chain_rules():
    import frost_bwd_experiments as fbx
    from cudnn.linear_attention.frost.kernels.bwd_chain_ws import FrostBwdChainWs
    from cudnn.linear_attention.frost.kernels.bwd_compile import bwd_kernel_for

    gdn = dataclasses.replace(_cfg("gdn", "chain", H=16, HV=16), **ASYNC, chain_scaled=True, chain_ws=True)
    assert bwd_kernel_for(gdn) is FrostBwdChainWs and not gdn.with_stage("grads").chain_ws
    with pytest.raises(ValueError, match="chain_ws must be False unless chain_scaled"):
        dataclasses.replace(gdn, chain_scaled=False)
    with pytest.raises(ValueError, match="chain_ws must be False unless chain_scaled"):
        dataclasses.replace(_cfg("gdn", "chain", K=64, V=64), **ASYNC, chain_scaled=True, chain_ws=True)
    assert "wgmma_ws" in fbx.CHAIN_VARIANTS


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
