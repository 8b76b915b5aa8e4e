"""ptxas's resource usage of the FROST backward kernels: no register spills (sm_90a, no GPU).

The backward's half of frost_resource_test.py (the forward's), split off so that the two
compile-bound files run in parallel under Bazel: the GDN states / values / chain / grads
kernels, the chain variants (pipelined, warpgroup MMA), the wgmma grads kernel and the
vector-gate grads kernel (mma.sync and wgmma products), each through frost_cubin_report.compile_bwd_cubin and
cuobjdump --dump-resource-usage. A draft of the grads kernel's cp.async load phase kept a
32-byte stack frame for the element-wise copy of a transposed A operand (replaced by
ldmatrix.trans); the vector-gate grads kernel spilled up to v1.4. Skips where cuobjdump or
CuTe DSL is absent.

The matrix's core (compile_tiers; 18 builds, ~165 s on one core, ~300 s with the
experiments it held before; the full matrix 88 builds): the kernels the product
launches, at the bench's K = V = 128 and an awkward config each: GDN's values kernel and
its states kernel (the recompute path's under FROST_BWD_RECOMPUTE_FORWARD=0), GDN's
wgmma grads on the checkpoint rows (what both default paths run) with and without its L2
prefetch and at fp16 grouped K = V = 64, the chain GDN runs with fp16 io (wgmma_async, at
K = V = 64 grouped), the vector gates' wgmma chain and their grads kernel with the
product's switches (KDA: wide loads and fused decay; GDN-2: also bulk copies), and the
vector grads' operand prefetch. GDN's bf16 chains are the four-role one at K = V = 128
(frost_compile_bwd_chain_wy_test) and the scaled one elsewhere
(frost_compile_bwd_chain_scaled_test). The experiments (the serial and pipelined chains,
GDN's plain wgmma chain, the async chain at bf16 and for KDA, the mma.sync grads,
FROST_BWD_GRADS_VEC=wgmma, KDA's bulk copies, GDN-2's grads without them: the register
comparison's twin), the recompute-only grads build
(FROST_BWD_RECOMPUTE_FORWARD=0) and the other switch combinations wait for
FROST_FULL_MATRIX=1.
"""
import collections
import dataclasses
import os
import sys
import tempfile

import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import frost_cubin_report as report  # noqa: E402
from compile_tiers import full_matrix, tiered  # noqa: E402

pytestmark = pytest.mark.skipif(report.tool("CUOBJDUMP", "cuobjdump") is None,
                                reason="cuobjdump not found (set CUOBJDUMP)")


BWD_CASES = [  # (stage, K, V, io, grouped q/k heads, forward checkpoints): GDN
    ("states", 128, 128, "bfloat16", False, False), ("chain", 128, 128, "bfloat16", False, False),
    ("grads", 128, 128, "bfloat16", False, False), ("grads", 128, 128, "float16", True, False),
    ("grads", 64, 64, "bfloat16", True, False), ("values", 128, 128, "bfloat16", False, True),
    ("grads", 128, 128, "float16", False, True),  # fp16 dq/dk staged by stmatrix (grouped heads: fp32, element-wise)
]


@pytest.mark.parametrize("case", tiered(  # core: the values kernel (the checkpoint path's) and the states
    BWD_CASES, [0, 5],  # kernel (FROST_BWD_RECOMPUTE_FORWARD=0); the serial chain and the mma.sync grads
    # (FROST_BWD_CHAIN=serial, FROST_BWD_GRADS=mma) are no product defaults
    ids=lambda c: f"gdn-{c[0]}-K{c[1]}V{c[2]}-{c[3]}-grouped{int(c[4])}"))
def test_backward_no_spills(case):
    """The GDN backward kernels (the vector-gate grads kernel: test_vector_gate_grads_no_spills)."""
    from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
    from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

    stage, K, V, io, grouped, ckpt = case
    H = 2 if grouped else 4
    f = FrostFwdConfig(io, "float32", H, H, 4, K, V, False, False, False, True, True, False)
    cfg = FrostBwdConfig(f, stage, "float32", "float32", checkpoints=ckpt)
    with tempfile.TemporaryDirectory() as tmp:
        usage = report.resource_usage(report.compile_bwd_cubin(cfg, tmp))
    print(f"gdn {stage} K={K} V={V} {io} grouped={grouped}: {usage}")
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, usage
    assert usage["REG"] <= 255, usage


PIPELINED_CHAIN_CASES = [  # (K, V, io, grouped q/k heads, l2norm, initial state, d_final_state, forward U)
    (128, 128, "bfloat16", False, True, True, "float32", False),   # recompute path
    (128, 128, "bfloat16", False, False, False, None, True),       # training [U] path (the bench's)
    (64, 64, "float16", True, False, True, "bfloat16", True),
    (128, 64, "bfloat16", False, True, False, "float32", False),
    (128, 128, "float16", True, True, True, "bfloat16", False),    # fp16 io, grouped, l2norm
]


@pytest.mark.parametrize("case", tiered(  # an experiment (FROST_BWD_CHAIN=pipelined): no core
    PIPELINED_CHAIN_CASES, [],
    ids=lambda c: f"gdn-chain-pipelined-K{c[0]}V{c[1]}-{c[2]}-grouped{int(c[3])}-U{int(c[7])}"))
def test_pipelined_chain_no_spills(case):
    """The pipelined chain (bwd_chain_pipelined.py) holds dS^T, dR^T and the prep's
    temporaries in the same phases: no local memory or stack (with dO^T held in registers
    from dU to the update it compiled to 255 registers and an 8-byte stack; it re-reads
    dO^T from its shared copy now) and its shared-memory plan fits."""
    from cudnn.linear_attention.frost.kernels import bwd_chain_pipelined
    from cudnn.linear_attention.frost.kernels import bwd_chain_schedule as sched
    from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
    from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
    from cudnn.linear_attention.frost.kernels.fwd_mma import SMEM_LIMIT, smem_bytes

    K, V, io, grouped, l2, h0, dht, values = case
    H = 2 if grouped else 4
    f = FrostFwdConfig(io, "float32" if h0 else None, H, H, 4, K, V, False, False, False, l2, h0, False)
    cfg = FrostBwdConfig(f, "chain", dht, "float32" if h0 else None, forward_values=values, chain_pipeline=True)
    assert smem_bytes(f, bwd_chain_pipelined.smem_plan) <= SMEM_LIMIT
    with tempfile.TemporaryDirectory() as tmp:
        cubin = report.compile_bwd_cubin(cfg, tmp)
        usage = report.resource_usage(cubin)
        # the CTA barriers ptxas kept: the protocol's (bwd_chain_schedule), no more, no less
        bars = None
        if report.tool("NVDISASM", "nvdisasm") is not None:
            bars = sum("BAR.SYNC" in ins for ins in report.sass_instructions(cubin))
    print(f"gdn pipelined chain K={K} V={V} {io} grouped={grouped} U={values}: {usage} barriers={bars}")
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, usage
    assert usage["REG"] <= 255, usage
    assert bars in (None, sched.PROLOGUE_BARRIERS + len(sched.PHASES)), bars


# the pipelined chain's configs plus K = 64 / V = 128 (one warpgroup's K-wide update at N = C)
WGMMA_CHAIN_CASES = PIPELINED_CHAIN_CASES + [(64, 128, "bfloat16", False, True, False, "float32", True)]


@pytest.mark.parametrize("case", tiered(  # GDN's wgmma chain is an experiment (FROST_BWD_CHAIN=wgmma): no core;
    WGMMA_CHAIN_CASES, [],  # its class, with check_wgmma_chain, runs in the vector and async chains' cores
    ids=lambda c: f"gdn-chain-wgmma-K{c[0]}V{c[1]}-{c[2]}-grouped{int(c[3])}-U{int(c[7])}"))
def test_wgmma_chain_no_spills(case):
    """The wgmma chain (bwd_chain_wgmma.py) over WGMMA_CHAIN_CASES: no local
    memory or stack, its SW128 plan fits, and (with nvdisasm) exactly the warpgroup MMAs
    of its two products per chunk: dU^T (C / 16 + K / 16 of m64nC) and the dS^T update
    (2 C / 16 of m64nK); ptxas neither duplicates nor drops one."""
    from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
    from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

    K, V, io, grouped, l2, h0, dht, values = case
    H = 2 if grouped else 4
    f = FrostFwdConfig(io, "float32" if h0 else None, H, H, 4, K, V, False, False, False, l2, h0, False)
    cfg = FrostBwdConfig(f, "chain", dht, "float32" if h0 else None, forward_values=values, chain_wgmma=True)
    check_wgmma_chain(cfg, f"gdn wgmma chain K={K} V={V} {io} grouped={grouped} U={values}")


def check_wgmma_chain(cfg, label: str, instructions: list | None = None, notes: set | None = None):
    """Compile the wgmma chain for cfg: its plan fits, no local memory or stack, and (with
    nvdisasm) exactly the warpgroup MMAs of its two products per chunk, dU^T (C / 16 +
    K / 16 of m64nC) and the dS^T update (2 C / 16 of m64nK). Returns the SASS opcode
    counts (None without nvdisasm); `instructions`, if given, gets the SASS instructions
    in program order (predicates included), `notes` the build's ptxas performance notes."""
    from cudnn.linear_attention.frost.kernels import bwd_chain_wgmma
    from cudnn.linear_attention.frost.kernels.fwd_mma import CHUNK, SMEM_LIMIT, smem_bytes

    K = cfg.fwd.K
    assert smem_bytes(cfg.fwd, bwd_chain_wgmma.smem_plan) <= SMEM_LIMIT
    with tempfile.TemporaryDirectory() as tmp:
        cubin = report.compile_bwd_cubin(cfg, tmp, notes)
        usage = report.resource_usage(cubin)
        ops = None
        if report.tool("NVDISASM", "nvdisasm") is not None:
            whole = report.sass_instructions(cubin)
            ops = collections.Counter(i.split()[0] for i in whole)
            if instructions is not None:
                instructions.extend(whole)
    print(f"{label}: {usage} "
          f"{None if ops is None else {k: v for k, v in ops.items() if 'MMA' in k or k.startswith('LDSM')}}")
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, usage
    assert usage["REG"] <= 255, usage
    if ops is not None:
        kb = CHUNK // 16
        want = collections.Counter({f"HGMMA.64x{CHUNK}x16.F32.BF16": kb + K // 16})
        want[f"HGMMA.64x{K}x16.F32.BF16"] += 2 * kb  # the same instruction where K = C
        assert {k: v for k, v in ops.items() if k.startswith("HGMMA")} == dict(want), ops
    return ops


# (family, K, V, io, grouped q/k heads, l2norm, initial state, d_final_state, forward U,
# gates 16-byte aligned): the bench's [U] path, the heaviest rows stage (l2norm, initial
# and final state, fp16), grouped heads, a gate at a 4-byte address, GDN-2's K != V (at
# K = 128 / V = 64 the only vector plan with the dR store buffers at K = 128)
VECTOR_WGMMA_CHAIN_CASES = [
    ("kda", 128, 128, "bfloat16", False, False, False, None, True, True),
    ("kda", 128, 128, "float16", True, True, True, "float32", False, False),
    ("kda", 64, 64, "float16", True, True, True, "float32", False, True),
    ("gdn2", 128, 64, "bfloat16", False, False, False, None, True, True),
    ("gdn2", 128, 128, "bfloat16", True, True, True, "float32", False, True),
    ("gdn2", 64, 128, "float16", False, True, True, "bfloat16", False, False),
]


@pytest.mark.parametrize("case", tiered(  # core (the product's vector chain): KDA's and GDN-2's bench
    VECTOR_WGMMA_CHAIN_CASES, [0, 2, 3],  # configs, fp16 grouped K = V = 64
    ids=lambda c: f"{c[0]}-chain-wgmma-K{c[1]}V{c[2]}-{c[3]}-grouped{int(c[4])}-U{int(c[8])}"))
def test_vector_wgmma_chain_no_spills(case):
    """The wgmma chain with vector gates (FROST_BWD_CHAIN_VEC=wgmma) over
    VECTOR_WGMMA_CHAIN_CASES: no local memory or stack, its plan fits, the same warpgroup
    MMAs per chunk as for GDN (dU^T: C / 16 + K / 16 of m64nC, the update: 2 C / 16 of
    m64nK) and only the Gram's and the dR solve's mma.sync left (the serial chain's dU and
    update HMMA all gone: 264 -> 52 at K = 128). KDA's bench config: no ptxas performance
    note either (frost_ptxas_notes_test's kda-chain, read from this build: reading them
    costs a build ~3 s, so once per kernel)."""
    from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
    from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

    family, K, V, io, grouped, l2, h0, dht, values, align = case
    H = 2 if grouped else 4
    per_beta = family == "gdn2"
    f = FrostFwdConfig(io, "float32" if h0 else None, H, H, 4, K, V, True, per_beta, per_beta, l2, h0, False,
                       gate_align16=align)
    cfg = FrostBwdConfig(f, "chain", dht, "float32" if h0 else None, forward_values=values, chain_wgmma=True)
    notes = set() if case == VECTOR_WGMMA_CHAIN_CASES[0] else None
    ops = check_wgmma_chain(cfg, f"{family} wgmma chain K={K} V={V} {io} grouped={grouped} U={values}",
                            notes=notes)
    assert not notes, notes
    if ops is not None:
        # mma.sync left: the Gram tile body (M and P, two n8 halves per k16: 4 K / 16; one
        # copy, dispatched at run time) and the dR solve (6 (-M)^T blocks + 4 inverses, 2 each)
        assert ops["HMMA.16816.F32.BF16"] == 4 * K // 16 + 20, ops


# (family, K, V, io, grouped q/k heads, l2norm, initial state, d_final_state, forward U):
# the bench's [U] path for each family, K = V = 64 fp16 grouped with l2norm and both
# states (the heaviest rows stage), the recompute path with l2norm at K = V = 128, and
# GDN-2 K = 128 / V = 64 (the vector plan with the dR store buffers at K = 128)
ASYNC_CHAIN_CASES = [
    ("gdn", 128, 128, "bfloat16", False, False, False, None, True),
    ("gdn", 128, 128, "bfloat16", False, True, True, "float32", False),
    ("gdn", 64, 64, "float16", True, True, True, "float32", False),
    ("kda", 128, 128, "bfloat16", False, False, False, None, True),
    ("kda", 64, 64, "float16", True, True, True, "bfloat16", True),
    ("gdn2", 128, 64, "bfloat16", False, True, False, None, True),
]


@pytest.mark.parametrize("case", tiered(  # core: GDN's fp16 chain (the product's wgmma_async fallback for fp16
    ASYNC_CHAIN_CASES, [2],  # io) at K = V = 64 grouped; at bf16 GDN runs other chains and KDA's is the
    # synchronous one (FROST_BWD_CHAIN_VEC=wgmma_async is an experiment)
    ids=lambda c: f"{c[0]}-chain-async-K{c[1]}V{c[2]}-{c[3]}-grouped{int(c[4])}-U{int(c[8])}"))
def test_async_chain_no_spills(case):
    """The wgmma chain with its update group in flight across the chunk boundary
    (chain_async, FROST_BWD_CHAIN[_VEC]=wgmma_async) over ASYNC_CHAIN_CASES: no local
    memory or stack, the wgmma chain's HGMMA counts, and (with nvdisasm) the schedule ptxas
    kept. In program order the update group's last HGMMA is followed by the chunk's last
    barrier before any warpgroup wait (ptxas did not retire it at once, which it does when
    it cannot prove the in-flight registers untouched), and the chunk's prep retires it
    once, after its first barrier: for scalar gates after the Gram stage's mma.sync (the
    Gram runs under the group), for vector gates before them (their Gram reads the
    operand stage's tables, behind the retirement). Vector gates: the L2 prefetch of the
    next chunk's dO rows, exactly one CCTL per 128-byte line at each of its two sites."""
    from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
    from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

    family, K, V, io, grouped, l2, h0, dht, values = case
    H = 2 if grouped else 4
    vec, per_beta = family != "gdn", family == "gdn2"
    f = FrostFwdConfig(io, "float32" if h0 else None, H, H, 4, K, V, vec, per_beta, per_beta, l2, h0, False)
    cfg = FrostBwdConfig(f, "chain", dht, "float32" if h0 else None, forward_values=values, chain_wgmma=True,
                         chain_async=True)
    whole = []
    if check_wgmma_chain(cfg, f"{family} async wgmma chain K={K} V={V} {io} grouped={grouped} U={values}",
                         whole) is None:
        return
    sass = [i.split()[0] for i in whole]
    # vector gates: prefetch_chunk asks L2 for the next chunk's dO rows (one CCTL per
    # 128-byte line of a row; prefetch_chunk runs before the loop and in it); scalar gates
    # stage dO in shared memory instead
    cctl = sum("CCTL" in i for i in whole)
    assert cctl == (2 * (V * 2 // 128) if vec else 0), cctl  # 16-bit dO
    hgmma = [i for i, op in enumerate(sass) if op.startswith("HGMMA")]
    waits = [i for i, op in enumerate(sass) if op == "WARPGROUP.DEPBAR.LE"]
    bars = [i for i, op in enumerate(sass) if op.startswith("BAR.SYNC")]
    last = hgmma[-1]  # the update group's last HGMMA (the update is issued after dU)
    after = [i for i in waits if i > last]
    assert after and any(last < b < after[0] for b in bars), (last, waits, bars)
    # the prep's wait: the one before the first HGMMA (dU), after the loop's first barrier
    prep = [i for i in waits if i < hgmma[0]]
    assert len(prep) == 1, (prep, hgmma[0])
    before = [b for b in bars if b < prep[0]]  # the prologue's barrier, then (GDN) rows -> Gram
    assert len(before) >= (1 if vec else 2), (before, prep)
    under = sum(op.startswith("HMMA") for op in sass[before[-1]:prep[0]])
    assert under == (0 if vec else 4 * K // 16), under  # GDN: the Gram tile body under the group
    # after the wait, the chunk's other barriers up to dU: before the operand stage and the
    # chain (vector gates: and before their Gram); four per chunk in all, as synchronous
    assert sum(prep[0] < b < hgmma[0] for b in bars) == (3 if vec else 2), (prep, bars, hgmma[0])


# (K, V, io, grouped q/k heads, l2norm, forward checkpoints): the bench's config on the
# recompute and checkpoint paths, fp16 io (dO converted in its swizzled tile), grouped
# heads (fp32 dq/dk staging), and every head-dim pair (K = 64: the SW64 S / dS tiles)
WGMMA_GRADS_CASES = [
    (128, 128, "bfloat16", False, False, False), (128, 128, "bfloat16", False, False, True),
    (128, 128, "float16", True, True, False), (64, 64, "float16", True, False, False),
    (64, 64, "bfloat16", False, True, True), (128, 64, "bfloat16", False, True, False),
    (64, 128, "bfloat16", True, False, True),
]


@pytest.mark.parametrize("case", tiered(  # core (the product's GDN grads): the bench's checkpoint path (the
    WGMMA_GRADS_CASES, [1, 3],  # recompute path's grads read the forward's rows too), fp16 grouped K = V = 64
    # (SW64); the grads without checkpoints run only under FROST_BWD_RECOMPUTE_FORWARD=0
    ids=lambda c: f"gdn-grads-wgmma-K{c[0]}V{c[1]}-{c[2]}-grouped{int(c[3])}-ckpt{int(c[5])}"))
def test_wgmma_grads_no_spills(case):
    """The wgmma grads kernel (bwd_grads_wgmma.py) over WGMMA_GRADS_CASES: no local memory
    or stack, its plan fits, and (with nvdisasm) exactly the warpgroup MMAs of its two
    groups per item, each unserialised: the three state products (3 V / 16 of
    m64n(K/2)k16) and the four score adjoints (dZp k-hat, dZm k-hat, dZp^T q-hat,
    dZm^T kb: 4 C / 16 of the same shape, the reduction over the chunk's C rows); ptxas
    neither duplicates nor drops one, and no per-warp mma.sync of either is left: fewer
    HMMA than the default kernel's count less the products' 3 (V / 16) (K / 16) per warp
    (only the score tiles' remain)."""
    from cudnn.linear_attention.frost.kernels import bwd_grads_wgmma
    from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
    from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
    from cudnn.linear_attention.frost.kernels.fwd_mma import SMEM_LIMIT, smem_bytes

    K, V, io, grouped, l2, ckpt = case
    H = 2 if grouped else 4
    f = FrostFwdConfig(io, None, H, H, 4, K, V, False, False, False, l2, False, False)
    plain = FrostBwdConfig(f, "grads", None, None, checkpoints=ckpt)
    cfg = FrostBwdConfig(f, "grads", None, None, checkpoints=ckpt, grads_wgmma=True)
    assert smem_bytes(f, bwd_grads_wgmma.smem_plan) <= SMEM_LIMIT
    usage, ops = wgmma_and_mma_sass(cfg, plain, groups=2)
    print(f"gdn wgmma grads K={K} V={V} {io} grouped={grouped} ckpt={ckpt}: {usage} "
          f"{ {k: {o: n for o, n in c.items() if 'MMA' in o or o.startswith('LDSM')} for k, c in ops.items()} }")
    check_wgmma_products(usage, ops, K, V, adjoints=True)


def wgmma_and_mma_sass(cfg, plain, groups: int = 1):
    """Compile the grads kernel cfg (state products on warpgroup MMA) and, with nvdisasm,
    its mma.sync twin `plain`: (cfg's resource usage, {"wgmma", "mma": opcode Counter},
    empty without nvdisasm). Checks on the way that
    cfg's wgmma are `groups` groups, each issued back to back: one scoreboard release and
    one wait per group (ptxas serialising them would put a wait behind each one)."""
    sass = {}
    with tempfile.TemporaryDirectory() as tmp:
        cubin = report.compile_bwd_cubin(cfg, tmp)
        usage = report.resource_usage(cubin)
        if report.tool("NVDISASM", "nvdisasm") is not None:
            sass["wgmma"] = report.sass_instructions(cubin)
    if sass:
        got = sass["wgmma"]
        assert sum(i.startswith("HGMMA") and "gsb0" in i for i in got) == groups, got
        assert sum(i.startswith("WARPGROUP.DEPBAR") for i in got) == groups, got
        with tempfile.TemporaryDirectory() as tmp:
            sass["mma"] = report.sass_instructions(report.compile_bwd_cubin(plain, tmp))
    return usage, {k: collections.Counter(i.split()[0] for i in v) for k, v in sass.items()}


def check_wgmma_products(usage, ops, K: int, V: int, adjoints: bool = False):
    """No local memory or stack, at most 255 registers, and (ops from wgmma_and_mma_sass,
    when nvdisasm ran) exactly the three state products' 3 V / 16 wgmma m64n(K/2)k16 (with
    `adjoints`, the four score adjoints' 4 CHUNK / 16 more), with the mma.sync twin's HMMA
    less those products' 3 (V / 16) (K / 16) per warp (with `adjoints`, fewer still): ptxas
    neither duplicates nor drops one, and no per-warp mma.sync of them is left."""
    from cudnn.linear_attention.frost.kernels.fwd_mma import CHUNK

    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, usage
    assert usage["REG"] <= 255, usage
    if ops:
        hgmma = {k: v for k, v in ops["wgmma"].items() if k.startswith("HGMMA")}
        n = 3 * V // 16 + (4 * CHUNK // 16 if adjoints else 0)
        assert hgmma == {f"HGMMA.64x{K // 2}x16.F32.BF16": n}, ops["wgmma"]
        hmma = "HMMA.16816.F32.BF16"
        left = ops["mma"][hmma] - 3 * (V // 16) * (K // 16)
        if adjoints:
            assert ops["wgmma"][hmma] < left, ops
        else:
            assert ops["wgmma"][hmma] == left, ops


# (family, K, V, io, grouped q/k heads, l2norm, forward checkpoints, vec_wide_loads,
# vec_fast_decay): the bench's KDA config (the launcher's defaults: wide loads, fused
# decay) with and without l2norm on both paths, the wide-load switch off and the fused
# decay off, GDN-2 at K = 128 / V = 64 and K = V = 128 (l2norm: the most registers), fp16
# grouped KDA at K = V = 64 (SW64 S / dS, dO converted in its swizzled tile) and fp16
# GDN-2 at K = 64 / V = 128
VECTOR_WGMMA_GRADS_CASES = [
    ("kda", 128, 128, "bfloat16", False, False, False, True, True),
    ("kda", 128, 128, "bfloat16", False, False, True, True, True),
    ("kda", 128, 128, "bfloat16", False, True, False, True, True),
    ("kda", 128, 128, "bfloat16", False, True, True, True, True),
    ("kda", 128, 128, "bfloat16", False, False, False, False, True),
    ("kda", 128, 128, "bfloat16", False, False, False, True, False),
    ("gdn2", 128, 64, "bfloat16", False, False, False, True, True),
    ("gdn2", 128, 128, "bfloat16", False, True, False, True, True),
    ("kda", 64, 64, "float16", True, True, False, True, True),
    ("gdn2", 64, 128, "float16", False, True, True, True, True),
]


@pytest.mark.parametrize("case", tiered(  # an experiment (FROST_BWD_GRADS_VEC=wgmma): no core
    VECTOR_WGMMA_GRADS_CASES, [],
    ids=lambda c: f"{c[0]}-grads-wgmma-K{c[1]}V{c[2]}-{c[3]}-grouped{int(c[4])}-l2{int(c[5])}"
                  f"-ckpt{int(c[6])}-wide{int(c[7])}-fast{int(c[8])}"))
def test_vector_wgmma_grads_no_spills(case):
    """The vector-gate grads kernel with its state products on warpgroup MMA
    (FROST_BWD_GRADS_VEC=wgmma, bwd_grads_vec.FrostBwdGradsVecWgmma) over
    VECTOR_WGMMA_GRADS_CASES: no local memory or stack, the plan fits, and (with
    nvdisasm) exactly 3 V / 16 wgmma m64n(K/2)k16 in one unserialised group (a single
    scoreboard release, a single wait), the mma.sync kernel's HMMA less the products'
    3 (V / 16) (K / 16) per warp, and one CTA barrier fewer than it."""
    from cudnn.linear_attention.frost.kernels import bwd_grads_vec
    from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
    from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
    from cudnn.linear_attention.frost.kernels.fwd_mma import SMEM_LIMIT

    family, K, V, io, grouped, l2, ckpt, wide, fast = case
    per_beta = family == "gdn2"
    H = 2 if grouped else 4
    f = FrostFwdConfig(io, None, H, H, 4, K, V, True, per_beta, per_beta, l2, False, False, gate_align16=True)
    plain = FrostBwdConfig(f, "grads", None, None, checkpoints=ckpt, vec_wide_loads=wide, vec_fast_decay=fast)
    cfg = FrostBwdConfig(f, "grads", None, None, checkpoints=ckpt, vec_wide_loads=wide, vec_fast_decay=fast,
                         grads_wgmma=True)
    assert bwd_grads_vec.smem_bytes(f, wgmma=True) <= SMEM_LIMIT
    usage, ops = wgmma_and_mma_sass(cfg, plain)
    shown = {k: {o: n for o, n in c.items() if "MMA" in o or o.startswith(("LDSM", "BAR"))} for k, c in ops.items()}
    print(f"{family} wgmma grads K={K} V={V} {io} grouped={grouped} l2={l2} ckpt={ckpt} wide={wide} fast={fast}: "
          f"{usage} {shown}")
    check_wgmma_products(usage, ops, K, V)
    if ops:
        bar = "BAR.SYNC.DEFER_BLOCKING"
        assert ops["wgmma"][bar] == ops["mma"][bar] - 1, ops


VEC_GRADS_CASES = [  # (family, K, V, io, grouped q/k heads): the three that spilled up to v1.4
    ("kda", 128, 128, "bfloat16", False), ("gdn2", 128, 64, "bfloat16", False), ("kda", 64, 64, "float16", True),
]


LOAD_SWITCHES = {(False, False): "v16-loads", (True, False): "wide-loads", (True, True): "wide-fast-decay"}
VEC_GRADS_BUILDS = [(c, w, f) for (w, f) in LOAD_SWITCHES for c in VEC_GRADS_CASES]


@pytest.mark.parametrize("case,wide,fast", tiered(  # core: KDA with the product's switches (wide, fast) at
    VEC_GRADS_BUILDS, [i for i, b in enumerate(VEC_GRADS_BUILDS)  # K = V = 128 and fp16 grouped K = V = 64;
                       if b[1:] == (True, True) and b[0][0] == "kda"],  # GDN-2's product build adds bulk
    # copies: test_vector_gate_grads_bulk_copies' core
    ids=lambda b: f"{b[0][0]}-grads-K{b[0][1]}V{b[0][2]}-{b[0][3]}-grouped{int(b[0][4])}-{LOAD_SWITCHES[b[1:]]}",
    unpack=True))
def test_vector_gate_grads_no_spills(case, wide, fast):
    """The vector-gate grads kernel (bwd_grads_vec.py): up to v1.4 it kept a 424-632 byte
    stack frame, all of it in the score-adjoint region, where exact_diagonal's 16-step sum
    was unrolled for each of the 32 accumulator elements; as a loop it fits in registers.
    With vec_wide_loads (v1.7) too: the decayed B operands' ldmatrix once pushed KDA to
    255 registers and a 16-byte stack frame (kb's loads hoisted above q's MMAs). With
    vec_fast_decay (v1.9) as well: the fused exponent and packed hi + lo conversions. KDA
    at K = V = 128 with the product's switches: no ptxas performance note either
    (frost_ptxas_notes_test's kda-grads, read from this build)."""
    from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
    from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

    family, K, V, io, grouped = case
    per_beta = family == "gdn2"
    H = 2 if grouped else 4
    f = FrostFwdConfig(io, "float32", H, H, 4, K, V, True, per_beta, per_beta, True, True, False,
                       gate_align16=True)
    cfg = FrostBwdConfig(f, "grads", "float32", "float32", vec_wide_loads=wide, vec_fast_decay=fast)
    notes = set() if (case, wide, fast) == (VEC_GRADS_CASES[0], True, True) else None
    with tempfile.TemporaryDirectory() as tmp:
        usage = report.resource_usage(report.compile_bwd_cubin(cfg, tmp, notes))
    print(f"{family} grads K={K} V={V} {io} grouped={grouped} wide={wide} fast={fast}: {usage} notes={notes}")
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, usage
    assert usage["REG"] <= 255, usage
    assert not notes, notes


def prefetch_cctl(plain, prefetch, read_notes: bool = False):
    """Compile a grads kernel without and with grads_prefetch: no local memory or stack and
    at most 255 registers either way (with read_notes, no ptxas performance note in the
    prefetch build); the CCTL (prefetch) count of each build, None without nvdisasm."""
    counts = []
    for cfg in (plain, prefetch):
        notes = set() if read_notes and cfg is prefetch else None
        with tempfile.TemporaryDirectory() as tmp:
            cubin = report.compile_bwd_cubin(cfg, tmp, notes)
            usage = report.resource_usage(cubin)
            assert usage["LOCAL"] == 0 and usage["STACK"] == 0, (cfg.grads_prefetch, usage)
            assert usage["REG"] <= 255, (cfg.grads_prefetch, usage)
            assert not notes, (cfg.grads_prefetch, notes)
            if report.tool("NVDISASM", "nvdisasm") is not None:
                counts.append(sum("CCTL" in i for i in report.sass_instructions(cubin)))
    return tuple(counts) if counts else None


@pytest.mark.parametrize("case", tiered(  # core: the product's GDN grads (wgmma, checkpoint rows); the
    [(128, "bfloat16", True, True), (64, "float16", False, False)], [0],  # mma.sync grads: FROST_BWD_GRADS=mma
    ids=lambda c: f"gdn-K{c[0]}-{c[1]}-wgmma{int(c[2])}-ckpt{int(c[3])}"))
def test_scalar_gate_grads_prefetch(case):
    """grads_prefetch in GDN's persistent grads kernel: the next item's q and k rows into
    L2 when that item's copies are issued, and the state rows of the item after it at the
    end of each item; no local memory or stack, and (with nvdisasm) exactly 2 K / 64 more
    CCTL than without for the q and k rows and 4 V / 64 (V = K here) for the dO, U, dR and v rows
    (128-byte lines, one job per thread quarter), plus one per thread and state tensor
    (dS; S too on the recompute path) for the state lines (V K / 64 of them: at most one
    per thread at K, V <= 128). The prefetch build of the first case is the product's GDN
    grads kernel: its ptxas notes (none: frost_ptxas_notes_test's gdn-grads) are read
    from that build."""
    from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
    from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

    K, io, wgmma, ckpt = case
    f = FrostFwdConfig(io, None, 4, 4, 4, K, K, False, False, False, True, False, False)
    plain = FrostBwdConfig(f, "grads", None, None, checkpoints=ckpt, grads_wgmma=wgmma, grads_ctas=132)
    counts = prefetch_cctl(plain, dataclasses.replace(plain, grads_prefetch=True), read_notes=wgmma and ckpt)
    print(f"gdn grads K={K} {io} wgmma={wgmma}: CCTL plain / prefetch {counts}")
    if counts:
        assert counts[1] - counts[0] == 2 * K * 2 // 128 + 4 * K * 2 // 128 + (1 if ckpt else 2), counts


@pytest.mark.parametrize("case", tiered(  # core: KDA (q, k and the beta copy), GDN-2 without l2norm (+ b)
    [("kda", 128, 128, False), ("gdn2", 128, 64, True), ("gdn2", 64, 64, False)], [0, 2],
    ids=lambda c: f"{c[0]}-K{c[1]}V{c[2]}-l2{int(c[3])}"))
def test_vector_gate_grads_operand_prefetch(case):
    """The vector-gate grads kernel asks L2 for the rows stage_operands_vec reads with plain
    loads (prefetch_operand_rows): q and k without use_l2norm (with it the norms pass has
    read them), and GDN-2's b; one CCTL per 128-byte line of a row, so (with nvdisasm)
    exactly that many in the SASS, and no local memory or stack. KDA's scalar beta arrives
    by one 4-byte cp.async per row (copy_beta_async: the kernel's only LDGSTS narrower
    than 16 bytes, the gate rows being 16-byte aligned here); GDN-2 has none."""
    from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
    from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

    family, K, V, l2 = case
    per_beta = family == "gdn2"
    f = FrostFwdConfig("bfloat16", None, 4, 4, 4, K, V, True, per_beta, per_beta, l2, False, False,
                       gate_align16=True)
    cfg = FrostBwdConfig(f, "grads", None, None, vec_wide_loads=True, vec_fast_decay=True)
    with tempfile.TemporaryDirectory() as tmp:
        cubin = report.compile_bwd_cubin(cfg, tmp)
        usage = report.resource_usage(cubin)
        assert usage["LOCAL"] == 0 and usage["STACK"] == 0 and usage["REG"] <= 255, usage
        if report.tool("NVDISASM", "nvdisasm") is None:
            pytest.skip("nvdisasm not found: resources checked, CCTL count not")
        sass = report.sass_instructions(cubin)
    cctl = sum("CCTL" in i for i in sass)
    narrow = [i for i in sass if i.startswith("LDGSTS") and ".128" not in i]
    lines = K * 2 // 128 * ((0 if l2 else 2) + (1 if per_beta else 0))
    print(f"{family} grads K={K} V={V} l2norm={l2}: {usage}, CCTL {cctl}, narrow cp.async {narrow}")
    assert cctl == lines, (cctl, lines)
    assert len(narrow) == (0 if per_beta else 1), narrow


@pytest.mark.parametrize("case", tiered(  # core: GDN-2 (the product's bulk copies) at its bench config and fp16
    [("kda", 128, 128, "bfloat16", True), ("gdn2", 128, 128, "bfloat16", True), ("gdn2", 128, 64, "float16", False),
     ("kda", 64, 64, "bfloat16", False)], [1, 2],  # K = 128 / V = 64 with 4-byte gates; KDA's: FROST_BWD_VEC_BULK=1
    ids=lambda c: f"{c[0]}-K{c[1]}V{c[2]}-{c[3]}-align16{int(c[4])}"))
def test_vector_gate_grads_bulk_copies(case):
    """vec_bulk_copies: the load phase's rows by cp.async.bulk (UBLKCP), each warp's elected
    lane issuing its run of rows from uniform registers: no per-lane waterfall (ELECT /
    R2UR / BRA.U.ANY around each copy) and no 16-byte cp.async left; the remaining LDGSTS
    are KDA's 4-byte beta and, without 16-byte aligned gate rows, their cp.async. No local
    memory or stack, at most 255 registers, and (FROST_FULL_MATRIX=1) fewer than the
    cp.async build's: that twin (GDN-2's grads without bulk copies) is no kernel the
    product launches, and its build costs as much as the product's (~13 s)."""
    from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
    from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

    family, K, V, io, align = case
    per_beta = family == "gdn2"
    f = FrostFwdConfig(io, None, 4, 4, 4, K, V, True, per_beta, per_beta, True, False, False, gate_align16=align)
    plain = FrostBwdConfig(f, "grads", None, None, vec_wide_loads=True, vec_fast_decay=True)
    usages, codes = {}, {}
    for name, cfg in [("bulk", dataclasses.replace(plain, vec_bulk_copies=True))] + (
            [("cp.async", plain)] if full_matrix() else []):
        with tempfile.TemporaryDirectory() as tmp:
            cubin = report.compile_bwd_cubin(cfg, tmp)
            usages[name] = report.resource_usage(cubin)
            if report.tool("NVDISASM", "nvdisasm") is not None:
                codes[name] = report.sass_instructions(cubin)
    print(f"{family} grads K={K} V={V} {io} align16={align}: {usages}")
    bulk = usages["bulk"]
    assert bulk["LOCAL"] == 0 and bulk["STACK"] == 0 and bulk["REG"] <= 255, bulk
    if "cp.async" in usages:
        assert bulk["REG"] < usages["cp.async"]["REG"], usages
    if not codes:
        pytest.skip("nvdisasm not found: resources checked, instructions not")
    sass = codes["bulk"]
    copies = [i for i, ins in enumerate(sass) if ins.startswith("UBLKCP")]
    assert copies, "no bulk copy in the SASS"
    waterfall = [i for i in copies if any("BRA.U.ANY" in ins for ins in sass[i:i + 3])]
    assert not waterfall, [sass[i:i + 3] for i in waterfall[:2]]
    ldgsts = [ins for ins in sass if ins.startswith("LDGSTS")]
    assert not [ins for ins in ldgsts if ".128" in ins], ldgsts[:4]
    if align:
        assert len(ldgsts) == (0 if per_beta else 1), ldgsts


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
