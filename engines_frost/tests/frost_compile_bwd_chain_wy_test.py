"""sm_90a compiles of the backward chain without its back substitution
(kernels/bwd_chain_ws_wy.py, FrostBwdConfig.chain_wy, FROST_BWD_CHAIN=wgmma_wy): the
consumers' step is wgmma only (dS^T K^T, dO^T P, dR^T = dU^T A, the update with dU^T W'),
the block solves and the Gram sit on the producer side, spills and ptxas notes at the
kernel's register split, the shared-memory plan, and the config and launcher rules. The
same chain in four roles (kernels/bwd_chain_ws4.py, chain_ws4, FROST_BWD_CHAIN=wgmma_ws4):
where ptxas put each role's work and barriers.

The matrix's core (compile_tiers; ~15 s on one core, ~61 s before the experiments moved to
the full matrix): the product's GDN chain at K = V = 128, bf16 (FROST_BWD_CHAIN's default
wgmma_ws4rawc: four roles, raw rows, no W') in one build with an initial state on the
forward-values path (the recompute path's chain), its roles as compiled and its ptxas notes
read from that build; the plans and the config rules. The experiments (the wy chain,
wgmma_wy, whose class the four-role chains extend; wgmma_ws4, wgmma_ws4c, wgmma_ws4raw)
wait for FROST_FULL_MATRIX=1.
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
from compile_tiers import tiered  # noqa: E402
from frost_cubin_report import bwd_config_for as _cfg  # noqa: E402

pytestmark = pytest.mark.skipif(report.tool("CUOBJDUMP", "cuobjdump") is None
                                or report.tool("NVDISASM", "nvdisasm") is None,
                                reason="cuobjdump / nvdisasm not found")

WY = dict(chain_wgmma=True, chain_async=True, chain_scaled=True, chain_ws=True, chain_wy=True)


def _config(h0=False, forward_values=False, ws_regs=(), ws4=False, in_chain=False, raw=False):
    return dataclasses.replace(_cfg("gdn", "chain", K=128, V=128, H=16, HV=16, l2=True, h0=h0), **WY,
                               forward_values=forward_values, chain_ws_regs=ws_regs, chain_ws4=ws4,
                               chain_a_in_chain=in_chain, chain_raw_rows=raw)


@functools.cache
def _build(h0=False, forward_values=False, ws_regs=(), ws4=False, in_chain=False, raw=False):
    """(resource usage, normalised SASS, ptxas notes) of the chain's build; the notes (~3 s
    more) of the product's chain (ws4, in_chain, raw) only, None for the others."""
    notes = set() if ws4 and in_chain and raw else None
    with tempfile.TemporaryDirectory() as tmp:
        cubin = report.compile_bwd_cubin(_config(h0, forward_values, ws_regs, ws4, in_chain, raw), tmp, notes)
        sass = report.sass_instructions(cubin)
        return report.resource_usage(cubin), tuple(re.sub(r"^@!?U?P[0-9T]+\s+", "", i) for i in sass), notes


def _count(instrs, prefix):
    return sum(i.startswith(prefix) for i in instrs)


@pytest.mark.parametrize("h0,fv", tiered([(False, False), (True, True)], [], unpack=True))  # an experiment (wgmma_wy)
def test_roles_as_compiled(h0, fv):
    from cudnn.linear_attention.frost.kernels import bwd_chain_ws_wy as wy
    from cudnn.linear_attention.frost.kernels import fwd_ws as ws

    usage, sass, _ = _build(h0, fv)
    assert usage["REG"] <= 65536 // ws.BLOCK_THREADS, usage
    dealloc, alloc = report.setmaxnreg_sites(sass)
    assert len(dealloc) == 1 and len(alloc) == 1 and dealloc[0] < alloc[0], (dealloc, alloc)
    consumer_regs, producer_regs = wy.REGISTER_SPLIT
    assert f"{producer_regs:#x}" in sass[dealloc[0]] and f"{consumer_regs:#x}" in sass[alloc[0]]
    producer, consumer = sass[dealloc[0]:alloc[0]], sass[alloc[0]:]
    # dS^T K^T (8), dO^T P (4), dR^T = dU^T A (4), the update dO^T fo Q + dU^T W' (8); no
    # mma.sync: the back substitution left the step
    assert _count(consumer, "HGMMA") == 24 and _count(consumer, "HMMA") == 0
    assert _count(consumer, "LDSM.16.MT88.4") == 4  # dO^T's four blocks, from the rows
    # the producer: the forward's Gram (32), the W' solve (20), the inverse's columns (40)
    assert _count(producer, "HMMA") == 32 + 20 + 40 and _count(producer, "HGMMA") == 0
    assert _count(producer, "STSM.16.MT88.4") == 4 + 10
    assert _count(consumer, "STL") == 0 and _count(consumer, "LDL") == 0
    assert _count(producer, "STL") <= 6 and _count(producer, "LDL") <= 6
    full_arrive = [i for i in producer if i.startswith("BAR.ARV") and f"{ws.BLOCK_THREADS:#x}" in i]
    full_wait = [i for i in consumer if i.startswith("BAR.SYNC") and f"{ws.BLOCK_THREADS:#x}" in i]
    assert len(full_arrive) == len(full_wait) == 1


@pytest.mark.parametrize("h0,fv,in_chain,raw", tiered(  # core: the product's (wgmma_ws4rawc); the other
    [(False, True, False, False), (True, False, True, False), (False, True, False, True), (True, True, True, True)],
    [3], unpack=True))  # steps to it (wgmma_ws4, wgmma_ws4c, wgmma_ws4raw) are experiments
def test_four_roles_as_compiled(h0, fv, in_chain, raw):
    """The three setmaxnreg sites in bwd_chain_ws4's split (copies, math, then the chain);
    cp.async on the copies alone, the Gram's wgmma and the solves' mma.sync on math, the
    chain's step as the wy chain's (in_chain: its update's W' term as (dR^T fr) K, the same
    number of wgmma); no spills (raw: a few on the chain); the hand-over's barriers per
    role (raw: the ring's, and the norms on the copies after their own barrier)."""
    from cudnn.linear_attention.frost.kernels import bwd_chain_ws4 as ws4
    from cudnn.linear_attention.frost.kernels import fwd_ws4

    usage, sass, _ = _build(h0, fv, ws4=True, in_chain=in_chain, raw=raw)
    assert usage["REG"] <= 65536 // fwd_ws4.BLOCK_THREADS, usage
    copies, math, chain = report.four_role_regions(sass, ws4.REGISTER_SPLIT)
    # the copies: the raw q, k, gate and beta rows and dO into the set, nothing else
    assert _count(copies, "LDGSTS") > 0 and _count(math, "LDGSTS") == _count(chain, "LDGSTS") == 0
    assert _count(copies, "HGMMA") == _count(copies, "HMMA") == 0
    # math: M and P on one warpgroup (8 k-steps each), two W' row blocks per warp (20 each;
    # none in chain) and A's column blocks (10 + 6 + 3 + 1) on mma.sync
    assert _count(math, "HGMMA") == 2 * 8 and _count(math, "HMMA") == (0 if in_chain else 2 * 20) + 40
    # the chain: the wy chain's step (24 wgmma, dO^T's four blocks from the rows)
    assert _count(chain, "HGMMA") == 24 and _count(chain, "HMMA") == 0
    assert _count(chain, "LDSM.16.MT88.4") == 4
    for role in (copies, math):
        assert _count(role, "STL") == _count(role, "LDL") == 0
    # on raw rows the chain keeps a loop-carried offset or two in local memory (the ring's
    # stage index is one more live value): up to 5 stores / 3 reloads at 184 registers
    assert _count(chain, "STL") <= (5 if raw else 0) and _count(chain, "LDL") <= (3 if raw else 0)
    # FULL arrived by math and the copies, waited by the chain; EMPTY the other way
    block, pair = f"{fwd_ws4.BLOCK_THREADS:#x}", f"{fwd_ws4.PAIR_THREADS:#x}"
    for role in (math, copies, chain):
        assert _count([i for i in role if block in i], "BAR.ARV") == 1
        assert _count([i for i in role if block in i], "BAR.SYNC") == 1
    if not raw:  # RAW_FULL arrived by the copies, waited by math; RAW_FREE the other way
        for role in (math, copies):
            assert _count([i for i in role if pair in i], "BAR.ARV") == 1
            assert _count([i for i in role if pair in i], "BAR.SYNC") == 1
        return
    # the ring: RING_FULL arrived by the copies (the first stage before the loop, then
    # each next one), waited by math; RING_EMPTY arrived by the chain, waited by the copies
    ring_empty = f"{fwd_ws4.RING_EMPTY_THREADS:#x}"
    assert _count([i for i in math if pair in i], "BAR.SYNC") == 1
    assert _count([i for i in copies if pair in i], "BAR.ARV") == 2
    assert _count([i for i in copies if ring_empty in i], "BAR.SYNC") == 1
    assert _count([i for i in chain if ring_empty in i], "BAR.ARV") == 1
    # the inverse norms on the copies alone, each after the copy warpgroup's own barrier
    own = [n for n, i in enumerate(copies) if i.startswith("BAR.SYNC") and i.endswith(f"{fwd_ws4.WG_THREADS:#x} ;")]
    rsq = [n for n, i in enumerate(copies) if i.startswith("MUFU.RSQ")]
    assert rsq and own and all(any(b < r for b in own) for r in rsq), (own, rsq)
    assert _count(math, "MUFU.RSQ") == _count(chain, "MUFU.RSQ") == 0


@pytest.mark.parametrize("ws4,in_chain,raw", tiered(  # core: the product's chain; the rest are experiments
    [(False, False, False), (True, False, False), (True, True, False), (True, True, True)], [3], unpack=True))
def test_no_ptxas_performance_note(ws4, in_chain, raw):
    """No ptxas performance note; the product's chain's read from the build
    test_four_roles_as_compiled inspects (an initial state, forward values)."""
    from cudnn.linear_attention.frost.kernels.bwd_abi import bwd_fake_args
    from cudnn.linear_attention.frost.kernels.bwd_compile import bwd_kernel_for

    if ws4 and in_chain and raw:
        assert _build(True, True, ws4=True, in_chain=True, raw=True)[2] == set()
        return
    cfg = _config(ws4=ws4, in_chain=in_chain, raw=raw)
    assert report.ptxas_notes(bwd_kernel_for(cfg)(cfg), bwd_fake_args(cfg)) == set()


def test_shared_memory_plan():
    from cudnn.linear_attention.frost.kernels import bwd_chain_ws4, bwd_chain_ws_wy
    from cudnn.linear_attention.frost.kernels.fwd_mma import SMEM_LIMIT, smem_bytes

    fwd = _config().fwd
    assert smem_bytes(fwd, bwd_chain_ws_wy.smem_plan) <= SMEM_LIMIT
    assert smem_bytes(fwd, bwd_chain_ws4.ring_smem_plan) <= SMEM_LIMIT
    ring = {e[0]: e[2] for e in bwd_chain_ws4.ring_smem_plan(fwd)}
    assert ring["q"][0] == ring["k"][0] == 3 * 64 and "norm" in ring and not {"rq", "rk"} & set(ring)
    names = [e[0] for e in bwd_chain_ws_wy.smem_plan(fwd)]
    assert {"ainv", "wp", "do"} <= set(names) and not {"dot", "rdo", "pt"} & set(names)


def test_config_and_launcher_rules(monkeypatch):
    import frost_bwd_experiments as fbx
    from cudnn.linear_attention.frost.kernels.bwd_chain_ws_wy import FrostBwdChainWsWy
    from cudnn.linear_attention.frost.kernels.bwd_compile import bwd_kernel_for

    from cudnn.linear_attention.frost.kernels.bwd_chain_ws4 import (FrostBwdChainWs4, FrostBwdChainWs4InChain,
                                                                    FrostBwdChainWs4Raw, FrostBwdChainWs4RawInChain)

    assert bwd_kernel_for(_config()) is FrostBwdChainWsWy
    assert bwd_kernel_for(_config(ws4=True)) is FrostBwdChainWs4
    assert bwd_kernel_for(_config(ws4=True, in_chain=True)) is FrostBwdChainWs4InChain
    assert bwd_kernel_for(_config(ws4=True, raw=True)) is FrostBwdChainWs4Raw
    assert bwd_kernel_for(_config(ws4=True, in_chain=True, raw=True)) is FrostBwdChainWs4RawInChain
    with pytest.raises(ValueError, match="chain_a_in_chain"):
        _config(in_chain=True)
    with pytest.raises(ValueError, match="chain_raw_rows"):
        _config(raw=True)
    with pytest.raises(ValueError, match="chain_wy"):
        dataclasses.replace(_config(), chain_ws=False)
    assert dataclasses.replace(_config(), stage="grads").with_stage("grads").chain_wy is False
    assert "wgmma_wy" in fbx.CHAIN_VARIANTS
    monkeypatch.setenv(fbx.CHAIN_ENV, "wgmma_wy")
    assert fbx.requested().chain == "wgmma_wy"


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
