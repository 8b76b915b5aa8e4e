"""sm_90a compiles of the four-role GDN forward (kernels/fwd_ws4.py, the tooling's knob
decay="wy-ws4"; plain and training builds): the three setmaxnreg sites in the kernel's
split, where ptxas put each role's work (the copies' cp.async on the copy warpgroup
alone, both Gram products' wgmma and the solves' mma.sync on the math warpgroup, the
chain's wgmma on the chain), spills per role, no performance note, and the knob's reach.

The matrix's core (compile_tiers; ~55 s on one core, the full matrix ~140 s): the
product's four-role forward (decay="wyc-ws4raw", compile_kernel.FOUR_ROLE_DECAY) in its
plain, training and output-free (recompute) builds, its register split's measured trade
(the C7512 the in-chain split accepts, which also shows the notes reader works) and the
product's build being the tooling's. The experiments' builds (wy-ws4, wy-ws4raw) wait
for FROST_FULL_MATRIX=1.
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


def _config(mode="plain", ws_regs=(), decay="wy-ws4"):
    cfg = report.config_for("gdn", "product", 128, 128, True)
    if mode == "training":
        cfg = dataclasses.replace(cfg, has_initial_state=True, write_checkpoints=True, write_values=True)
    if mode == "recompute":  # the backward's recompute of its states: checkpoints and U, no output
        cfg = dataclasses.replace(cfg, has_initial_state=True, has_final_state=False, write_checkpoints=True,
                                  write_values=True, write_output=False)
    return fx.tooling_config(cfg, "wgmma", decay=decay, ws_regs=ws_regs)


@functools.cache
def _compiled(mode="plain", decay="wy-ws4"):
    """(resource usage, SASS, ptxas performance notes) of _config(mode, decay=decay)'s
    kernel, built once per run (the notes from the same build: build_cubin)."""
    notes = set()
    with tempfile.TemporaryDirectory() as tmp:
        cubin = report.compile_cubin(_config(mode, decay=decay), tmp, notes)
        return report.resource_usage(cubin), tuple(report.sass_instructions(cubin)), frozenset(notes)


@functools.cache
def _build(mode="plain", decay="wy-ws4"):
    usage, sass, _ = _compiled(mode, decay)
    return usage, tuple(re.sub(r"^@!?U?P[0-9T]+\s+", "", i) for i in sass)


def _count(instrs, prefix):
    return sum(i.startswith(prefix) for i in instrs)


@pytest.mark.parametrize("mode,decay", tiered(  # core: the product's kernel (plain, training)
    [("plain", "wy-ws4"), ("training", "wy-ws4"), ("plain", "wy-ws4raw"), ("training", "wy-ws4raw"),
     ("plain", "wyc-ws4raw"), ("training", "wyc-ws4raw")], [4, 5], unpack=True))
def test_roles_as_compiled(mode, decay):
    from cudnn.linear_attention.frost.kernels import fwd_ws4 as ws4

    usage, sass = _build(mode, decay)
    assert usage["REG"] <= 65536 // ws4.BLOCK_THREADS, usage
    in_chain = decay.startswith("wyc-")
    # the copies' branch first (the highest warps), then math, then the chain
    copies, math, chain = report.four_role_regions(sass, ws4.IN_CHAIN_REGISTER_SPLIT if in_chain
                                                   else ws4.REGISTER_SPLIT)
    # the copies: cp.async only (q, k, gate, beta rows; v's two 16-column slices per warp)
    assert _count(copies, "LDGSTS") > 0 and _count(math, "LDGSTS") == _count(chain, "LDGSTS") == 0
    assert _count(copies, "HGMMA") == _count(copies, "HMMA") == 0
    # math: M and P, 8 k-steps each on one warpgroup; the two W' row blocks (20 products
    # each; none in the in-chain kernel) and A's column blocks (10 + 6 + 3 + 1) on mma.sync
    assert _count(math, "HGMMA") == 2 * 8 and _count(math, "HMMA") == (0 if in_chain else 2 * 20) + 40
    # the chain: wy-ws's (U 12, S^T Q^T 8, P U 4, the update 4), or wyc-ws's (X 8, S^T Q^T
    # 8, U through R 4, P U 4, the update 4), no mma.sync
    assert _count(chain, "HGMMA") == 28 and _count(chain, "HMMA") == 0
    # spills: none in the chain or the copies, at most a register's worth in math (the
    # in-chain kernel's math, without W', none)
    assert _count(chain, "STL") == _count(chain, "LDL") == 0
    assert _count(copies, "STL") == _count(copies, "LDL") == 0
    limit = 0 if in_chain else 4
    assert _count(math, "STL") <= limit and _count(math, "LDL") <= limit
    if decay != "wy-ws4":  # the ring: stage full waited by math, stage empty by the copies;
        # the inverse norms on the copies (their only floating-point math: FFMA sums, MUFU.RSQ)
        assert _count(copies, "MUFU.RSQ") > 0 and _count(math, "MUFU.RSQ") == 0
        # ... and only after the copies' own barrier: a row's slices come from 16 threads'
        # cp.async, which each thread's wait alone does not cover (the H100 run before this
        # barrier read unlanded rows: mixed-length l2norm cases out by 1.6e-2)
        own = [n for n, i in enumerate(copies) if i.startswith("BAR.SYNC") and i.endswith(f"{ws4.WG_THREADS:#x} ;")]
        rsq = [n for n, i in enumerate(copies) if i.startswith("MUFU.RSQ")]
        assert own and all(any(b < r for b in own) for r in rsq), (own, rsq)
        assert _count([i for i in math if f"{ws4.PAIR_THREADS:#x}" in i], "BAR.SYNC") == 1
        assert _count([i for i in copies if f"{ws4.RING_EMPTY_THREADS:#x}" in i], "BAR.SYNC") == 1
        assert _count([i for i in chain if f"{ws4.RING_EMPTY_THREADS:#x}" in i], "BAR.ARV") == 1
    # the hand-over: FULL arrived by math and the copies, waited by the chain; EMPTY the other way
    block = f"{ws4.BLOCK_THREADS:#x}"
    assert _count([i for i in math if block in i], "BAR.ARV") == 1
    assert _count([i for i in copies if block in i], "BAR.ARV") == 1
    assert _count([i for i in chain if block in i], "BAR.SYNC") == 1
    assert _count([i for i in chain if block in i], "BAR.ARV") == 1


def test_output_free_build_drops_the_output_work():
    """The in-chain four-role kernel without an output (the backward's recompute of its
    states and U for long GDN batches, kernels/bwd.py recompute_configs): the copies bring no q rows,
    math builds M alone (8 of the Gram's 16 k-steps), the chain drops S^T Q^T and P U (12
    of its 28 wgmma) and O's stores, and keeps every other store; no spill in math or the
    chain, no ptxas note (the output build's C7512 included; read from the roles' build)."""
    from cudnn.linear_attention.frost.kernels import fwd_ws4 as ws4

    roles = {}
    for mode in ("training", "recompute"):
        usage, sass = _build(mode, "wyc-ws4raw")
        assert usage["REG"] <= 65536 // ws4.BLOCK_THREADS and usage["LOCAL"] == 0, usage
        roles[mode] = dict(zip(("copies", "math", "chain"),
                               report.four_role_regions(sass, ws4.IN_CHAIN_REGISTER_SPLIT)))
    full, free = roles["training"], roles["recompute"]
    # q's rows: C x K bf16 in 16-byte copies over the copy warpgroup's 128 threads, at both
    # of the ring's copy sites (the first chunk's before the loop, the next chunk's in it)
    q_copies = 64 * 128 * 2 // 16 // ws4.WG_THREADS
    assert _count(free["copies"], "LDGSTS") == _count(full["copies"], "LDGSTS") - 2 * q_copies
    assert _count(full["math"], "HGMMA") == 16 and _count(free["math"], "HGMMA") == 8
    assert _count(full["chain"], "HGMMA") == 28 and _count(free["chain"], "HGMMA") == 16
    assert 0 < _count(free["chain"], "STG") < _count(full["chain"], "STG")
    for role in ("math", "chain"):
        assert _count(free[role], "STL") == _count(free[role], "LDL") == 0, role
    assert not _config("recompute", decay="wyc-ws4raw").write_output
    assert _compiled("recompute", "wyc-ws4raw")[2] == frozenset()


@pytest.mark.parametrize("decay", tiered(["wy-ws4", "wy-ws4raw"], []))  # experiments
def test_no_ptxas_performance_note(decay):
    from cudnn.linear_attention.frost.kernels.compile_kernel import kernel_class
    from cudnn.linear_attention.frost.kernels.launch_abi import fake_args

    cfg = _config(decay=decay)
    assert report.ptxas_notes(kernel_class(cfg, "sm_90a")(cfg), fake_args(cfg)) == set()


def test_in_chain_register_trade():
    """The in-chain kernel's split is a measured trade: at 192 / 104 / 24 ptxas serializes
    its wgmma (C7512, the chain's X, R and U operands), at 208 / 72 / 24 it does not but the
    math warpgroup spills (0.304 against 0.509 ms on the H100, kernels/NOTES.md). If a
    change lets 192 build without the note, IN_CHAIN_REGISTER_SPLIT's comment is stale."""
    from cudnn.linear_attention.frost.kernels.compile_kernel import kernel_class
    from cudnn.linear_attention.frost.kernels.fwd_ws4 import IN_CHAIN_REGISTER_SPLIT
    from cudnn.linear_attention.frost.kernels.launch_abi import fake_args

    notes = {}
    for regs in (IN_CHAIN_REGISTER_SPLIT, (208, 72, 24)):
        cfg = _config(decay="wyc-ws4raw", ws_regs=regs)
        notes[regs] = report.ptxas_notes(kernel_class(cfg, "sm_90a")(cfg), fake_args(cfg))
    assert notes == {IN_CHAIN_REGISTER_SPLIT: {"C7512"}, (208, 72, 24): set()}


def test_shared_memory_plans():
    """Both plans fit the 227 KB a CTA may use; the ring's raw q / k stages replace the
    q-hat / k-hat sets and the raw copies beside them."""
    from cudnn.linear_attention.frost.kernels import fwd_ws4, fwd_ws_wy
    from cudnn.linear_attention.frost.kernels.fwd_mma import SMEM_LIMIT, smem_bytes

    cfg = _config()
    assert smem_bytes(cfg, fwd_ws_wy.smem_plan) <= SMEM_LIMIT
    assert smem_bytes(cfg, fwd_ws4.ring_smem_plan) <= SMEM_LIMIT
    # without W' (two sets of [C, K] bf16)
    assert smem_bytes(cfg, fwd_ws4.ring_smem_plan_in_chain) == smem_bytes(cfg, fwd_ws4.ring_smem_plan) - 2 * 64 * 128 * 2
    ring = {e[0]: e for e in fwd_ws4.ring_smem_plan(cfg)}
    assert "rq" not in ring and "rk" not in ring and ring["q"][2][0] == fwd_ws4.RING * 64
    assert ring["g"][2][0] == ring["beta"][2][0] == fwd_ws4.RING * 64 and ring["norm"][2] == (2 * fwd_ws4.RING, 64)


def test_the_knob():
    from cudnn.linear_attention.frost.kernels.compile_kernel import kernel_class
    from cudnn.linear_attention.frost.kernels.fwd_wgmma_gram import GramWgmma
    from cudnn.linear_attention.frost.kernels.fwd_ws4 import (IN_CHAIN_REGISTER_SPLIT, REGISTER_SPLIT, FourRoles,
                                                              RawRing, RawRingInChain)

    cfg = _config()
    assert cfg.decay == "wy-ws4" and cfg.gram == fx.FOUR_ROLE_GRAM and "decay-wy-ws4" in cfg.kernel_label
    kernel = kernel_class(cfg, "sm_90a")(cfg)
    assert isinstance(kernel, FourRoles) and isinstance(kernel, GramWgmma) and kernel.gram_n == 64
    assert (kernel.chain_regs, kernel.math_regs, kernel.copy_regs) == REGISTER_SPLIT
    other = _config(ws_regs=(184, 120, 24))
    k2 = kernel_class(other, "sm_90a")(other)
    assert (k2.chain_regs, k2.math_regs, k2.copy_regs) == (184, 120, 24)
    raw = _config(decay="wy-ws4raw")
    ring = kernel_class(raw, "sm_90a")(raw)
    assert isinstance(ring, RawRing) and ring.gram_norms and raw.gram == fx.FOUR_ROLE_GRAM
    plain = dataclasses.replace(report.config_for("gdn", "product", 128, 128, False))
    unnormed = fx.tooling_config(plain, "wgmma", decay="wy-ws4raw")
    assert not kernel_class(unnormed, "sm_90a")(unnormed).gram_norms  # no l2norm: no norms to apply
    in_chain = _config(decay="wyc-ws4raw")
    k3 = kernel_class(in_chain, "sm_90a")(in_chain)
    assert isinstance(k3, RawRingInChain) and k3.inverse_in_chain and k3.gram_p_transposed
    assert (k3.chain_regs, k3.math_regs, k3.copy_regs) == IN_CHAIN_REGISTER_SPLIT
    # a pair is wy-ws's form: dropped here (not silently used as a triple)
    assert _config(ws_regs=(192, 64)).ws_regs == ()
    # the backward's output-free recompute: the same four-role kernels, without P
    free = dataclasses.replace(report.config_for("gdn", "product", 128, 128, True), write_checkpoints=True,
                               write_values=True, write_output=False)
    for decay in ("wy-ws4", "wyc-ws4raw"):
        got = fx.tooling_config(free, "wgmma", decay=decay)
        assert (got.decay, got.gram, got.write_output) == (decay, fx.FOUR_ROLE_GRAM, False)
    with pytest.raises(ValueError, match="ws_regs"):
        fx.experiment(report.config_for("gdn", "product", 128, 128, True), "wgmma", decay="wy-ws4",
                      gram="wgmma64", ws_regs=(200, 104, 24))  # 128 x (400 + 128) > 65,536
    with pytest.raises(ValueError, match="gram"):
        fx.experiment(report.config_for("gdn", "product", 128, 128, True), "wgmma", decay="wy-ws4")
    with pytest.raises(ValueError, match="FROST_FWD_WS_REGS"):
        os.environ[fx.WS_REGS_ENV] = "192,64"
        try:
            fx.ws_regs_requested("wy-ws4")
        finally:
            del os.environ[fx.WS_REGS_ENV]


def test_the_product_builds_the_tooling_kernel():
    """The product's four-role forward (a pipelined config, compile_kernel.four_role_class)
    compiles to the SASS of the tooling's decay="wyc-ws4raw" experiment, instruction for
    instruction but the kernel's name: what the GPU runs of one (la_frost_smoke wgmmawycws4raw,
    FROST_FWD_DECAY=wyc-ws4raw through the engine matrix) holds for the other."""
    base = fx.product_config(report.config_for("gdn", "product", 128, 128, True))
    tooling = fx.tooling_config(base, "wgmma", decay="wyc-ws4raw")
    assert tooling == _config("plain", decay="wyc-ws4raw")  # so its build is _compiled's (roles test's)
    with tempfile.TemporaryDirectory() as tmp:
        product = report.sass_instructions(report.compile_cubin(dataclasses.replace(base, pipelined=True), tmp))
    built = [[re.sub(r"kernel_cutlass_kernel\S*", "KERNEL", i) for i in sass]
             for sass in (product, _compiled("plain", "wyc-ws4raw")[1])]
    assert built[0] == built[1] and any(i.startswith("HGMMA") for i in built[0])



@pytest.mark.parametrize("mode", tiered(["plain", "training"], [0]))
def test_no_loads_bound_builds(mode):
    """frost_fwd_no_loads.NoLoads (a timing bound): the product's split and note, no spill in
    the plain build, the product's HGMMA, and no more cp.async than the product (the
    steady-state loads are behind a guard, the first chunks' kept)."""
    usage, sass = _build(mode, "wyc-ws4nl")
    _, _, notes = _compiled(mode, "wyc-ws4nl")
    _, product_sass = _build(mode, "wyc-ws4raw")
    assert notes <= {"C7512"}, notes
    # the training build keeps one 8-byte slot on the stack (the guards' sequence start)
    assert usage["LOCAL"] == 0 and _count(sass, "STL") <= (mode != "plain"), usage
    assert _count(sass, "HGMMA") == _count(product_sass, "HGMMA")
    assert 0 < _count(sass, "LDGSTS") <= _count(product_sass, "LDGSTS")


@pytest.mark.parametrize("mode", tiered(["plain", "training"], [0]))
def test_v_ahead_builds(mode):
    """frost_fwd_v_ahead.VAhead: the product's split and note, no spill, the product's HGMMA
    (the roles' math unchanged), the v tile a ring stage per chunk (within 227 KB)."""
    usage, sass = _build(mode, "wyc-ws4va")
    _, _, notes = _compiled(mode, "wyc-ws4va")
    _, product_sass = _build(mode, "wyc-ws4raw")
    assert notes <= {"C7512"}, notes
    assert usage["LOCAL"] == 0 and _count(sass, "STL") == 0, usage
    assert _count(sass, "HGMMA") == _count(product_sass, "HGMMA")


@pytest.mark.parametrize("skip,regs,note", tiered(  # timing experiments (bench/frost_stage_times.py)
    [(("inverse",), (192, 104, 24), {"C7512"}), (("inverse",), (208, 72, 24), set()),
     (("gram",), (232, 24, 24), set())], [], unpack=True))
def test_bounds_lift_the_serialization(skip, regs, note):
    """The bounds of kernels/NOTES.md "Bounds of the four-role forward": with M and A out of
    the math warpgroup it fits 72 registers and the chain's 208 lift ptxas's C7512; with P
    out too, 232. If this changes, that section's table is stale."""
    from cudnn.linear_attention.frost.kernels.compile_kernel import kernel_class
    from cudnn.linear_attention.frost.kernels.launch_abi import fake_args

    cfg = fx.tooling_config(report.config_for("gdn", "product", 128, 128, False), "wgmma", skip_stages=skip,
                            decay="wyc-ws4raw", ws_regs=regs)
    notes = set()
    with tempfile.TemporaryDirectory() as tmp:
        usage = report.resource_usage(report.build_cubin(kernel_class(cfg, "sm_90a")(cfg), fake_args(cfg), tmp,
                                                         notes))
    assert notes == note and usage["LOCAL"] == 0 and usage["STACK"] == 0


@pytest.mark.parametrize("mode,decay", tiered(
    [("plain", "wyc-ws4tma"), ("training", "wyc-ws4tma"), ("plain", "wyc-ws4tmava"), ("training", "wyc-ws4tmava")],
    [0, 2], unpack=True))
def test_tma_rows_builds(mode, decay):
    """frost_fwd_tma_rows: q and k leave the copies' cp.async (the product's 16 per thread
    at two sites: the first chunk and the loop) for two 64 x 64 boxes each at the same two
    sites, issued under an elected lane with no divergent-warp path; TmaVAhead's v rows by
    bulk copies too (only the 4-byte gate and beta copies stay, one each at two sites); the
    product's HGMMA and note. No spill (the copies make their own warp-uniform chunk count:
    with the caller's, TmaRows' training build spilled it), except TmaVAhead's training
    build: its copies spill that count at 24 registers and math's allocation shifts
    (kernels/NOTES.md; the plain forward is what it is timed with)."""
    usage, sass = _build(mode, decay)
    _, _, notes = _compiled(mode, decay)
    _, product_sass = _build(mode, "wyc-ws4raw")
    assert notes <= {"C7512"}, notes
    assert _count(sass, "UTMALDG") == 2 * 2 * 2
    if decay == "wyc-ws4tma":
        assert _count(sass, "LDGSTS") == _count(product_sass, "LDGSTS") - 2 * 16
    else:
        assert _count(sass, "LDGSTS") == 2 * 2 and _count(sass, "UBLKCP") > 0
    assert _count(sass, "HGMMA") == _count(product_sass, "HGMMA")
    assert usage["LOCAL"] == 0 and (_count(sass, "STL") == 0 or (mode, decay) == ("training", "wyc-ws4tmava"))
    # the copies' code (every UTMALDG) comes before the math warpgroup's setmaxnreg; no
    # divergent-warp branch there (the product's one is math's gate scan, after it)
    math_start = next(n for n, i in enumerate(sass) if i.startswith("USETMAXREG.DEALLOC.CTAPOOL 0x68"))
    assert max(n for n, i in enumerate(sass) if i.startswith("UTMALDG")) < math_start
    assert not any(i.startswith(("BRA.DIV", "WARPSYNC.COLLECTIVE")) for i in sass[:math_start])


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
