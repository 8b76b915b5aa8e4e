"""L0: the FROST backward kernels cross-compile for sm_90a (no GPU needed).

Every stage (states, chain, grads) for GDN, and the vector-gate kernels (KDA, GDN-2) that
differ from it, through the same entry (bwd_compile.compile_bwd, bwd_abi.bwd_fake_args)
the GPU launch uses; the config rules that pick each kernel class; plus the shared-memory
plans and budgets of every family's chain and grads. Skips where nvidia-cutlass-dsl is not
importable.

The matrix's core (compile_tiers; ~20 s on one core, the full matrix ~180 s): a compile
here only proves that a kernel builds, and the product's kernels are built and inspected
(spills, SASS, ptxas notes) by the cores of frost_resource_bwd_test,
frost_compile_bwd_chain_wy_test and frost_compile_bwd_chain_scaled_test. So the core keeps
what no other core test builds: the vector-gate states kernel (the recompute path's under
FROST_BWD_RECOMPUTE_FORWARD=0; GDN's is frost_resource_bwd_test's), GDN's wgmma grads
through compile_bwd at an awkward config (K = V = 64, grouped heads, no l2norm, no initial
state), and the wgmma grads' PTX descriptors for GDN at K = 128 and K = 64. The
default-flag builds (the serial chains, the mma.sync grads: FROST_BWD_CHAIN=serial,
FROST_BWD_GRADS=mma, the vector grads without the product's switches), the experiments
(pipelined chain, GDN's wgmma chain, FROST_BWD_GRADS_VEC=wgmma) and the product configs
another core test builds wait for FROST_FULL_MATRIX=1; each case list says which test
covers them. The config rules and the plans run in every case, compiled or not.
"""
import os
import sys

import pytest

cutlass = pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compile_tiers import tiered  # noqa: E402
from frost_cubin_report import FAMILIES as FAMILY  # noqa: E402
from frost_cubin_report import bwd_config_for as _cfg  # noqa: E402

from cudnn.linear_attention.frost.kernels.bwd_compile import compile_bwd  # noqa: E402
from cudnn.linear_attention.frost.kernels.fwd_mma import CHUNK  # noqa: E402


# Every switch off (FrostBwdConfig's defaults): the states kernel, the serial chains and the
# mma.sync grads. The chains and grads here are no product defaults (FROST_BWD_CHAIN=serial,
# FROST_BWD_CHAIN_VEC=serial, FROST_BWD_GRADS=mma; the vector grads without vec_wide_loads /
# vec_fast_decay). GDN's states kernel at K = V = 128 is built and checked for spills in
# frost_resource_bwd_test::test_backward_no_spills's core (its serial chain and mma.sync
# grads in that test's full matrix; the mma.sync grads also as the wgmma grads' twin in
# test_wgmma_grads_no_spills's core).
CASES = [("gdn", "states", {}), ("gdn", "chain", {}), ("gdn", "grads", {}),
         ("gdn", "grads", dict(K=64, V=64, H=2, HV=4, l2=False, h0=False)),
         ("kda", "chain", {}), ("kda", "grads", {}), ("gdn2", "grads", dict(K=128, V=64)),
         # the chain's 16-byte dS/dR stores: grouped GDN at K=V=64, vector gates where they fit
         ("gdn", "chain", dict(K=64, V=64, H=2, HV=4, l2=False, h0=False)), ("kda", "chain", dict(K=64, V=128)),
         ("kda", "states", dict(K=64, V=128)),
         # the states kernel zeroes every gradient output (seq_bounds.py): vector gates, w
         ("kda", "states", dict(H=2, HV=4)), ("gdn2", "states", dict(K=128, V=64))]


@pytest.mark.parametrize("family, stage, kw", tiered(  # core: the vector-gate states kernel (GDN-2: w and
    CASES, [11], ids=lambda c: f"{c[0]}-{c[1]}-{CASES.index(c)}", unpack=True))  # per-channel beta)
def test_backward_kernel_compiles_for_sm90a(family, stage, kw):
    assert callable(compile_bwd(_cfg(family, stage, **kw), "sm_90a", ffi="cute"))


@pytest.mark.parametrize("family", list(FAMILY))
@pytest.mark.parametrize("dims", [(128, 128), (128, 64), (64, 128)])
def test_shared_memory_fits(family, dims):
    from cudnn.linear_attention.frost.kernels import bwd_chain, bwd_grads, bwd_grads_vec
    from cudnn.linear_attention.frost.kernels.fwd_mma import SMEM_LIMIT, smem_bytes

    f = _cfg(family, "chain", *dims).fwd
    assert smem_bytes(f, bwd_chain.smem_plan) <= SMEM_LIMIT
    grads = bwd_grads_vec.smem_bytes(f) if f.gate_per_channel else smem_bytes(f, bwd_grads.smem_plan)
    assert grads <= SMEM_LIMIT


@pytest.mark.parametrize("dims", [(128, 128), (128, 64), (64, 128), (64, 64)])
def test_pipelined_chain_fits_with_its_store_buffers(dims):
    """GDN's pipelined chain (second copies of dO^T, QA^T, -KBA^T, e^Gam_last) fits in
    shared memory at every head dim, its dR store buffers included; vector gates refuse it."""
    from cudnn.linear_attention.frost.kernels import bwd_chain_pipelined
    from cudnn.linear_attention.frost.kernels.fwd_mma import SMEM_LIMIT, smem_bytes
    from cudnn.linear_attention.frost.kernels.gmem_vector_io import has_warp_buffers

    f = _cfg("gdn", "chain", *dims).fwd
    assert smem_bytes(f, bwd_chain_pipelined.smem_plan) <= SMEM_LIMIT
    assert has_warp_buffers(bwd_chain_pipelined.smem_plan(f))
    with pytest.raises(ValueError, match="scalar gates only"):
        bwd_chain_pipelined.smem_plan(_cfg("kda", "chain", *dims).fwd)


def _gdn_chain_with(flag, cls, forward_values):
    """GDN's chain config with the switch `flag` on: bwd_kernel_for picks `cls` from it, and
    not with the switch off."""
    import dataclasses

    from cudnn.linear_attention.frost.kernels.bwd_compile import bwd_kernel_for

    cfg = dataclasses.replace(_cfg("gdn", "chain"), forward_values=forward_values, **{flag: True})
    assert bwd_kernel_for(cfg) is cls
    assert bwd_kernel_for(dataclasses.replace(cfg, **{flag: False})) is not cls
    return cfg


def _pipelined_chain(forward_values):
    """The pipelined chain's config; bwd_kernel_for picks its class from it."""
    from cudnn.linear_attention.frost.kernels.bwd_chain_pipelined import FrostBwdChainPipelined

    return _gdn_chain_with("chain_pipeline", FrostBwdChainPipelined, forward_values)


@pytest.mark.parametrize("forward_values", [False, True])
def test_pipelined_chain_class(forward_values):
    _pipelined_chain(forward_values)


# an experiment (FROST_BWD_CHAIN=pipelined): built with spill and barrier checks in
# frost_resource_bwd_test::test_pipelined_chain_no_spills (full matrix)
@pytest.mark.parametrize("forward_values", tiered([False, True], []))
def test_pipelined_chain_compiles_through_the_engine_entry(forward_values):
    """compile_bwd (the launcher's entry) builds the pipelined class from the config."""
    assert callable(compile_bwd(_pipelined_chain(forward_values), "sm_90a", ffi="cute"))


@pytest.mark.parametrize("dims", [(128, 128), (128, 64), (64, 128), (64, 64)])
@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_wgmma_chain_plan(dims, family):
    """The wgmma chain: its four B operands are unpadded SW128 tiles in the orientation the
    serial chain stores them (the reduction index contiguous), first in the plan, and the
    plan fits, smaller than the serial one (no row padding in the four tiles). The dR
    store buffers: every plan but the vector gates' at K = V = 128 (GDN-2 at K = 128 /
    V = 64 gains them: the serial plan has no room, the unpadded tiles make it)."""
    from cudnn.linear_attention.frost.kernels import bwd_chain, bwd_chain_wgmma
    from cudnn.linear_attention.frost.kernels.fwd_mma import SMEM_LIMIT, SW128, smem_bytes
    from cudnn.linear_attention.frost.kernels.gmem_vector_io import has_warp_buffers

    f = _cfg(family, "chain", *dims).fwd
    plan = bwd_chain_wgmma.smem_plan(f)
    serial = {name: shape for name, _, shape, _ in bwd_chain.smem_plan(f)}
    tiles = [(name, shape) for name, _, shape, stride in plan if stride == SW128]
    assert tiles == [(name, serial[name]) for name in serial if name in bwd_chain_wgmma.WGMMA_B]
    assert [name for name, _, _, _ in plan[:len(tiles)]] == [name for name, _ in tiles]
    assert {name for name, _, _, _ in plan} - {"wbuf"} == set(serial) - {"wbuf"}
    staged = has_warp_buffers(plan)
    assert staged >= bwd_chain.staged_stores(f)
    if staged == bwd_chain.staged_stores(f):
        assert smem_bytes(f, bwd_chain_wgmma.smem_plan) < smem_bytes(f, bwd_chain.smem_plan)
    assert smem_bytes(f, bwd_chain_wgmma.smem_plan) <= SMEM_LIMIT
    assert staged == (family == "gdn" or dims != (128, 128)), (family, dims, staged)


def _wgmma_chain(forward_values):
    """GDN's wgmma chain config: bwd_kernel_for picks the wgmma class from it, and the
    config refuses it beside the pipelined chain (vector gates take it: below)."""
    import dataclasses

    from cudnn.linear_attention.frost.kernels.bwd_chain_wgmma import FrostBwdChainWgmma

    cfg = _gdn_chain_with("chain_wgmma", FrostBwdChainWgmma, forward_values)
    for stage in ("grads",) if forward_values else ("states", "grads"):
        assert not cfg.with_stage(stage).chain_wgmma
    with pytest.raises(ValueError, match="one chain variant at a time"):
        dataclasses.replace(cfg, chain_pipeline=True)
    return cfg


@pytest.mark.parametrize("forward_values", [False, True])
def test_wgmma_chain_class(forward_values):
    _wgmma_chain(forward_values)


# an experiment for GDN (FROST_BWD_CHAIN=wgmma): built and inspected in
# frost_resource_bwd_test::test_wgmma_chain_no_spills (full matrix); its class, the vector
# gates' product chain, in test_vector_wgmma_chain_no_spills's core there
@pytest.mark.parametrize("forward_values", tiered([False, True], []))
def test_wgmma_chain_compiles_through_the_engine_entry(forward_values):
    """compile_bwd (the launcher's entry) builds GDN's wgmma chain."""
    assert callable(compile_bwd(_wgmma_chain(forward_values), "sm_90a", ffi="cute"))


@pytest.mark.parametrize("family", ["gdn", "kda"])
def test_async_chain_config(family):
    """chain_async (FROST_BWD_CHAIN[_VEC]=wgmma_async) is a schedule of the wgmma chain:
    refused without chain_wgmma, kept by the chain stage alone, served by the wgmma class
    (compiled in frost_resource_bwd_test::test_async_chain_no_spills)."""
    import dataclasses

    from cudnn.linear_attention.frost.kernels.bwd_chain_wgmma import FrostBwdChainWgmma
    from cudnn.linear_attention.frost.kernels.bwd_compile import bwd_kernel_for

    base = _cfg(family, "chain")
    with pytest.raises(ValueError, match="chain_async must be False unless chain_wgmma"):
        dataclasses.replace(base, chain_async=True)
    with pytest.raises(ValueError, match="chain_async must be a bool"):
        dataclasses.replace(base, chain_wgmma=True, chain_async=1)
    cfg = dataclasses.replace(base, chain_wgmma=True, chain_async=True)
    assert bwd_kernel_for(cfg) is FrostBwdChainWgmma
    assert cfg.with_stage("chain").chain_async
    for stage in ("states", "grads"):
        assert not cfg.with_stage(stage).chain_async and not cfg.with_stage(stage).chain_wgmma
    assert cfg != dataclasses.replace(cfg, chain_async=False)  # a separate compile key


def _vector_wgmma_chain(family, dims):
    """Vector gates: the config takes chain_wgmma (FROST_BWD_CHAIN_VEC=wgmma), the chain
    stage alone keeps it, bwd_kernel_for picks the wgmma class; the pipelined chain stays
    refused for them."""
    import dataclasses

    from cudnn.linear_attention.frost.kernels.bwd_chain_wgmma import FrostBwdChainWgmma
    from cudnn.linear_attention.frost.kernels.bwd_compile import bwd_kernel_for

    cfg = dataclasses.replace(_cfg(family, "chain", *dims), chain_wgmma=True)
    assert bwd_kernel_for(cfg) is FrostBwdChainWgmma
    for stage in ("states", "grads"):
        assert not cfg.with_stage(stage).chain_wgmma
    assert cfg.with_stage("chain").chain_wgmma
    with pytest.raises(ValueError, match="chain_pipeline must be False for vector gates"):
        dataclasses.replace(cfg, chain_wgmma=False, chain_pipeline=True)
    return cfg


VECTOR_CHAINS = [("kda", (128, 128)), ("gdn2", (128, 64))]


@pytest.mark.parametrize("family, dims", VECTOR_CHAINS)
def test_vector_wgmma_chain_class(family, dims):
    _vector_wgmma_chain(family, dims)


# the product's vector chain: built and inspected at these dims (and fp16 grouped K = V = 64)
# in the core of frost_resource_bwd_test::test_vector_wgmma_chain_no_spills
@pytest.mark.parametrize("family, dims", tiered(VECTOR_CHAINS, [], unpack=True))
def test_vector_wgmma_chain_compiles_through_the_engine_entry(family, dims):
    """compile_bwd builds the vector-gate wgmma chain."""
    assert callable(compile_bwd(_vector_wgmma_chain(family, dims), "sm_90a", ffi="cute"))


@pytest.mark.parametrize("dims", [(128, 128), (128, 64), (64, 128), (64, 64)])
def test_chain_states_values_store_through_warp_buffers(dims):
    """GDN's chain, states and values kernels have room for their per-warp dR / U buffers
    at every head dim, the vector gates' at K = 64 (their chain at K = V = 128 does not,
    and keeps element stores for dR)."""
    from cudnn.linear_attention.frost.kernels import bwd_chain

    from cudnn.linear_attention.frost.kernels import bwd_states, bwd_values
    from cudnn.linear_attention.frost.kernels.gmem_vector_io import has_warp_buffers

    assert bwd_chain.staged_stores(_cfg("gdn", "chain", *dims).fwd)
    if dims[0] == 64:
        assert bwd_chain.staged_stores(_cfg("kda", "chain", *dims).fwd)
    if dims == (128, 128):
        assert not bwd_chain.staged_stores(_cfg("kda", "chain", *dims).fwd)
    for plan in (bwd_states.smem_plan, bwd_values.smem_plan):   # S checkpoints and U
        assert has_warp_buffers(plan(_cfg("gdn", "states", *dims).fwd))


@pytest.mark.parametrize("dims", [(128, 128), (128, 64), (64, 128), (64, 64)])
@pytest.mark.parametrize("out_bits", [16, 32])
def test_grads_stages_dq_dk_in_dead_shared_memory(dims, out_bits):
    """GDN grads writes dq/dk through shared memory (16-byte global stores) at every head
    dim and output width (bf16/fp16, or fp32 for grouped heads): the tensors it reuses are
    consecutive in the plan and hold at least one padded [64, K] tile."""
    from cudnn.linear_attention.frost.kernels import bwd_grads

    f = _cfg("gdn", "grads", *dims).fwd
    room = bwd_grads.staging_bytes(f)
    tiles = bwd_grads.staging_tiles(dims[0], out_bits, room)
    assert tiles >= 1, (dims, out_bits, room)
    assert tiles * 64 * (dims[0] * out_bits // 8 + 16) <= room


WIDE_LOADS = [("kda", dict(K=128, V=128)), ("kda", dict(K=64, V=64)),
              ("gdn2", dict(K=128, V=64)), ("gdn2", dict(K=64, V=128))]


def _wide_loads(family, kw):
    import dataclasses

    cfg = dataclasses.replace(_cfg(family, "grads", **kw), vec_wide_loads=True)
    assert cfg.with_stage("grads").vec_wide_loads and not cfg.with_stage("chain").vec_wide_loads
    return cfg


@pytest.mark.parametrize("family, kw", WIDE_LOADS)
def test_vector_grads_wide_loads_config(family, kw):
    """with_stage keeps vec_wide_loads for grads only."""
    _wide_loads(family, kw)


# wide loads without the fused decay (FROST_BWD_VEC_DECAY=0), no product default: the
# product's switches (both) are built at K = 128 and K = 64 in the core of
# frost_resource_bwd_test::test_vector_gate_grads_no_spills
@pytest.mark.parametrize("family, kw", tiered(WIDE_LOADS, [], unpack=True))
def test_vector_grads_compile_with_wide_loads(family, kw):
    """FrostBwdConfig.vec_wide_loads (FROST_BWD_VEC_WIDE=1, NOTES_bwd.md v1.7): the
    ldmatrix / 4-byte shared reads of the vector-gate grads kernel, where S dS by ldmatrix
    applies (K = 128) and where it falls back (K = 64)."""
    assert callable(compile_bwd(_wide_loads(family, kw), "sm_90a", ffi="cute"))



@pytest.mark.parametrize("dims", [(128, 128), (128, 64), (64, 128), (64, 64)])
def test_wgmma_grads_plan(dims):
    """GDN's wgmma grads kernel: dO, U, dR are unpadded SW128 [C, V] tiles, the score
    tiles dZp, dZm SW128 [C, C] tiles (the adjoints' A operands), and S, dS [V, K] and the
    q-hat / k-hat / kb row tiles [C, K] tiles whose swizzle atom is one channel half wide
    (SW128 at K = 128, SW64 at K = 64: the B operands), every tensor of the default plan is
    there once, it fits in less shared memory than the default's, and the dq/dk staging
    region (dO, U, dZp, dZm, consecutive) holds both padded tiles (out_bits 16) as the
    default's does; vector gates refuse it."""
    from cudnn.linear_attention.frost.kernels import bwd_grads, bwd_grads_wgmma as gw
    from cudnn.linear_attention.frost.kernels.fwd_mma import SMEM_LIMIT, SW64, SW128, SWIZZLED, smem_bytes

    K, V = dims
    f = _cfg("gdn", "grads", K, V).fwd
    plan = gw.smem_plan(f)
    base = {name: shape for name, _, shape, _ in bwd_grads.smem_plan(f)}
    swizzled = {name: (shape, stride) for name, _, shape, stride in plan if stride in SWIZZLED}
    sw_b = SW128 if K == 128 else SW64
    assert swizzled == {"do": ((64, V), SW128), "u": ((64, V), SW128), "dr": ((64, V), SW128),
                        "dzp": ((64, 64), SW128), "dzm": ((64, 64), SW128),
                        "sf": ((V, K), sw_b), "dsf": ((V, K), sw_b),
                        "qr": ((64, K), sw_b), "kr": ((64, K), sw_b), "kbr": ((64, K), sw_b)}
    assert [name for name, _, _, _ in plan][:len(gw.STAGED)] == list(gw.STAGED)
    assert sorted(name for name, _, _, _ in plan if name != "tail") == sorted(base)
    assert {name: shape for name, _, shape, _ in plan if name != "tail"} == base
    assert smem_bytes(f, gw.smem_plan) <= smem_bytes(f, bwd_grads.smem_plan) <= SMEM_LIMIT
    for bits in (16, 32):
        assert bwd_grads.staging_tiles(K, bits, gw.staging_bytes(f)) == \
            bwd_grads.staging_tiles(K, bits, bwd_grads.staging_bytes(f))
    with pytest.raises(ValueError, match="scalar gates only"):
        gw.smem_plan(_cfg("kda", "grads", K, V).fwd)


WGMMA_GRADS = [{}, dict(K=64, V=64, H=2, HV=4, l2=False, h0=False)]


def _wgmma_grads(kw):
    """bwd_kernel_for picks the wgmma grads class from the config, with_stage keeps the
    flag for the grads stage alone (vector gates: _vector_wgmma_grads)."""
    import dataclasses

    from cudnn.linear_attention.frost.kernels.bwd_compile import bwd_kernel_for
    from cudnn.linear_attention.frost.kernels.bwd_grads_wgmma import FrostBwdGradsWgmma

    cfg = dataclasses.replace(_cfg("gdn", "grads", **kw), grads_wgmma=True)
    assert bwd_kernel_for(cfg) is FrostBwdGradsWgmma
    assert bwd_kernel_for(dataclasses.replace(cfg, grads_wgmma=False)) is not FrostBwdGradsWgmma
    assert cfg.with_stage("grads").grads_wgmma
    for stage in ("states", "chain"):
        assert not cfg.with_stage(stage).grads_wgmma
    return cfg


@pytest.mark.parametrize("kw", WGMMA_GRADS)
def test_wgmma_grads_class(kw):
    _wgmma_grads(kw)


# GDN's grads kernel (the product's): core K = V = 64 grouped through compile_bwd; at the
# bench's K = V = 128 it is built and inspected in the core of frost_resource_bwd_test::
# test_wgmma_grads_no_spills and test_scalar_gate_grads_prefetch (and
# test_wgmma_grads_descriptors below)
@pytest.mark.parametrize("kw", tiered(WGMMA_GRADS, [1]))
def test_wgmma_grads_compiles_through_the_engine_entry(kw):
    """compile_bwd (the launcher's entry) builds GDN's wgmma grads kernel."""
    assert callable(compile_bwd(_wgmma_grads(kw), "sm_90a", ffi="cute"))


@pytest.mark.parametrize("family, dims", [("kda", (128, 128)), ("kda", (64, 64)), ("gdn2", (128, 64)),
                                          ("gdn2", (64, 128)), ("gdn2", (128, 128))])
def test_vector_wgmma_grads_plan(family, dims):
    """The vector-gate wgmma grads kernel (FrostBwdGradsVecWgmma): stage A holds dO, dR, U
    as unpadded SW128 [C, V] tiles and S, dS as [V, K] tiles with GDN's channel-half
    swizzle, each at a multiple of 1024 bytes from the (1024-byte aligned) region, then the
    padded v (GDN-2: and w) rows the load phase copies for stage_values; stage B
    and the persistent tensors are the default plan's; it fits (the alignment's worst case
    counted) in no more shared memory than the default, and the dq/dk staging holds as
    many tiles as the default's."""
    from cudnn.linear_attention.frost.kernels import bwd_grads, bwd_grads_vec as gv
    from cudnn.linear_attention.frost.kernels.fwd_mma import SMEM_LIMIT, SW64, SW128, SWIZZLED

    K, V = dims
    f = _cfg(family, "grads", K, V).fwd
    a, b, keep = gv.smem_regions(f, wgmma=True)
    a0, b0, keep0 = gv.smem_regions(f)
    sw_b = SW128 if K == 128 else SW64
    rows = [("vr", (64, V), (V + 8, 1))] + ([("wr", (64, V), (V + 8, 1))] if family == "gdn2" else [])
    assert [(n, shape, stride) for n, _, shape, stride in a] == \
        [("do", (64, V), SW128), ("dr", (64, V), SW128), ("u", (64, V), SW128), ("sf", (V, K), sw_b),
         ("dsf", (V, K), sw_b)] + rows
    assert [(n, shape) for n, _, shape, _ in a] == [(n, shape) for n, _, shape, _ in a0]
    assert (b, keep) == (b0, keep0)
    offset = 0
    for entry in a:
        if entry[3] in SWIZZLED:  # the padded row tiles after them need only 16 bytes
            assert offset % 1024 == 0, (entry, offset)
        assert offset % 16 == 0, (entry, offset)
        offset += gv._span_bytes(entry)
    assert gv.smem_bytes(f, wgmma=True) <= gv.smem_bytes(f) + 1024 and gv.smem_bytes(f, wgmma=True) <= SMEM_LIMIT
    for bits in (16, 32):
        assert bwd_grads.staging_tiles(K, bits, gv.staging_room(f, wgmma=True)[1]) == \
            bwd_grads.staging_tiles(K, bits, gv.staging_room(f)[1])


VECTOR_WGMMA_GRADS = [("kda", {}), ("gdn2", dict(K=128, V=64)),
                      ("kda", dict(K=64, V=64, H=2, HV=4, l2=False, h0=False))]


def _vector_wgmma_grads(family, kw):
    """Vector gates: the config takes grads_wgmma (FROST_BWD_GRADS_VEC=wgmma), the grads
    stage alone keeps it, bwd_kernel_for picks FrostBwdGradsVecWgmma (and the mma.sync
    class without the flag); each class refuses the other's config."""
    import dataclasses

    from cudnn.linear_attention.frost.kernels.bwd_compile import bwd_kernel_for
    from cudnn.linear_attention.frost.kernels.bwd_grads_vec import FrostBwdGradsVec, FrostBwdGradsVecWgmma

    cfg = dataclasses.replace(_cfg(family, "grads", **kw), grads_wgmma=True, vec_wide_loads=True)
    assert bwd_kernel_for(cfg) is FrostBwdGradsVecWgmma
    plain = dataclasses.replace(cfg, grads_wgmma=False)
    assert bwd_kernel_for(plain) is FrostBwdGradsVec
    assert cfg.with_stage("grads").grads_wgmma
    for stage in ("states", "chain"):
        assert not cfg.with_stage(stage).grads_wgmma
    with pytest.raises(ValueError, match="grads_wgmma must be True"):
        FrostBwdGradsVecWgmma(plain)
    with pytest.raises(ValueError, match="grads_wgmma must be False"):
        FrostBwdGradsVec(cfg)
    return cfg


@pytest.mark.parametrize("family, kw", VECTOR_WGMMA_GRADS)
def test_vector_wgmma_grads_class(family, kw):
    _vector_wgmma_grads(family, kw)


# an experiment (FROST_BWD_GRADS_VEC=wgmma): built and inspected in
# frost_resource_bwd_test::test_vector_wgmma_grads_no_spills (full matrix)
@pytest.mark.parametrize("family, kw", tiered(VECTOR_WGMMA_GRADS, [], unpack=True))
def test_vector_wgmma_grads_compiles_through_the_engine_entry(family, kw):
    """compile_bwd builds FrostBwdGradsVecWgmma."""
    assert callable(compile_bwd(_vector_wgmma_grads(family, kw), "sm_90a", ffi="cute"))


# core: GDN's (the product's grads) at K = 128 and K = 64 (SW128 and SW64 B operands); the
# vector-gate kernel is an experiment (FROST_BWD_GRADS_VEC=wgmma)
@pytest.mark.parametrize("family, K", tiered([("gdn", 128), ("gdn", 64), ("kda", 128), ("gdn2", 64)], [0, 1],
                                             unpack=True))
def test_wgmma_grads_descriptors(family, K, tmp_path):
    """The PTX of the wgmma grads kernel: 3 V / 16 wgmma m64n(K/2)k16 per item for the
    state products, A K-major (imm-trans-a 0), B transposed (imm-trans-b 1: the MN-major
    S / dS channel halves); GDN's then the score adjoints, 2 C / 16 with the score tiles
    K-major (dZp k-hat, dZm k-hat) and 2 C / 16 with them transposed (imm-trans-a 1:
    dZp^T q-hat, dZm^T kb), B the row tiles' channel halves, MN-major; and the descriptors'
    constant fields as the swizzled tiles need them: A SW128 with stride byte offset 1024
    (8 rows of 128 B), B SW128 / SBO 1024 at K = 128 and SW64 / SBO 512 at K = 64 (8 value
    rows of one channel half). A layout that CuTe could not describe, or one described with
    another swizzle, changes these. The vector-gate kernel (FrostBwdGradsVecWgmma) issues
    the same state products from its own plan, and its adjoints on mma.sync."""
    import dataclasses
    import glob
    import re

    import cutlass.cute as cute

    from cudnn.linear_attention.frost.kernels.bwd_abi import bwd_fake_args
    from cudnn.linear_attention.frost.kernels.bwd_compile import bwd_kernel_for

    V = 128
    cfg = dataclasses.replace(_cfg(family, "grads", K, V, l2=False, h0=False), grads_wgmma=True)
    cute.compile(bwd_kernel_for(cfg)(cfg), *bwd_fake_args(cfg),
                 options=f"--gpu-arch sm_90a --keep-ptx --dump-dir {tmp_path}")
    (ptx,) = glob.glob(str(tmp_path / "*.ptx"))
    text = open(ptx).read()
    ops = re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k16)\.f32\.bf16\.bf16 \{[^}]*\}, "
                     r"%rd\d+, %rd\d+, p, (\d), +(\d), (\d), (\d);", text)
    n = f"m64n{K // 2}k16"
    adjoints = [(n, "1", "1", "0", "1")] * (2 * CHUNK // 16) + [(n, "1", "1", "1", "1")] * (2 * CHUNK // 16)
    assert ops == [(n, "1", "1", "0", "1")] * (3 * V // 16) + (adjoints if family == "gdn" else []), ops
    sw = {128: 1, 64: 2}  # the descriptor's layout type (bits 62-63): 128- and 64-byte swizzle
    a_fields = (sw[128] << 62) | ((1024 >> 4) << 32) | (1 << 16)   # LBO 1 (unused for SW K-major)
    b_hi = (sw[K] << 30) | ((K // 2 * 2 * 8) >> 4)                 # high word: layout type, SBO
    consts = {int(c) % 2**64 for c in re.findall(r"(-?\d{6,})", text)}
    assert a_fields in consts, "A descriptor fields"
    assert b_hi in consts or b_hi - 2**32 in {int(c) for c in re.findall(r"(-?\d{6,})", text)}, "B descriptor"


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
