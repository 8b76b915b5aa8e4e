"""L0: FROST forward wgmma (the chain's state products on warpgroup MMA) cross-compiles for
sm_90a, and the layouts it relies on are the ones the installed CuTe DSL builds.

- every family x head dims (bf16, both states) and fp16 without an initial state, plus
  the grouped-head configs, compile through fwd.compile_fwd (the launch's entry);
- the register hand-over (fwd_wgmma docstring): for every thread of a warpgroup and every
  value, the wgmma m64nNk16 accumulator and A partitions (N = 64, 128) list the same
  (row, column) as the warp's m16n8k16 partitions, 16 rows down per warp;
- the SW128 tiles are the swizzle kernels/wgmma_fragments.sw128_tile_offset describes
  (that map is checked against the hardware's definition by frost_wgmma_fragments_test);
- FrostFwdPipelined.io_view (cute.recast_ptr) drops a pointer's swizzle, the reason wgmma keeps
  the raw-staged tiles plain (fwd_wgmma.RAW_STAGED);
- the wgmma layer's shared-memory plan fits every config and is no larger than the pipelined layer's;
- wgmma refuses other architectures, and checkpoint / values configs outside its training
  launchers, by name;
- the training launchers (FrostFwdWgmmaCheckpoints, FrostFwdWgmmaValues: the product's training
  forward for bf16 on sm_90a) compile for GDN, KDA, GDN-2 at K = V = 128 and GDN at
  K = V = 64 without local memory or a stack frame, with exactly the global stores of
  the pipelined layer's training kernel (the bf16 checkpoint rows, U), and with the plain wgmma kernel's
  wgmma issue and wait sequence (the stores serialise nothing);
  traced, the pipelined layer's and the wgmma layer's chains store as U the solve's own fp32 accumulator of each block.
Skips where nvidia-cutlass-dsl is not importable (the SASS checks where cuobjdump or
nvdisasm is not found).

The matrix's core (compile_tiers; ~50 s on one core, the full matrix 3-4 min): wgmma is the
product's forward for bf16 on sm_90a, so the core builds the product's kernels at the
bench's K = V = 128 for every family (plain and, for GDN and KDA, the training launchers
and their plain kernels at the bench config, each built once and shared),
the wgmma layer's two chains (scaled, folded) storing U (traced in the training launchers' builds), one awkward plain config per kind (KDA at
K = 64 / V = 128, GDN with grouped value heads) and the cheap layout pins. fp16 through
wgmma (the product runs pipelined there), the remaining head-dim pairs and families, the pipelined layer's U store,
the bench's stage-timing build, the training launchers at K = 64 and without U, and the
warpgroup partition check (~20 s: it pins what the installed CuTe DSL builds, so run the
full matrix when nvidia-cutlass-dsl changes) wait for FROST_FULL_MATRIX=1.
"""
import atexit
import dataclasses
import functools
import os
import re
import shutil
import sys
import tempfile

import pytest

cutlass = pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cudnn.linear_attention.frost.kernels.fwd import compile_fwd  # noqa: E402

from compile_tiers import FULL_ENV, full_matrix, tiered  # noqa: E402
from frost_variants import GROUPED, VARIANTS, vid, with_algorithm  # noqa: E402
from frost_fwd_experiments import experiment  # noqa: E402

WGMMA_VARIANTS = [
    i for i, (fam, c) in enumerate(VARIANTS)
    if (c.io_dtype, c.has_initial_state, c.has_final_state) == ("bfloat16", True, True)
    or (c.io_dtype, c.has_initial_state, c.has_final_state, c.K, c.V) == ("float16", False, True, 128, 64)
]


def _wgmma(cfg):
    return with_algorithm(cfg, "wgmma", gate_align16=cfg.gate_per_channel and cfg.io_dtype == "bfloat16")


# the product's plain forwards at the bench's head dims, and one awkward pair; GDN's and
# KDA's plain kernels at K = V = 128 are built by test_wgmma_training_launchers_store_what_pipelined_stores
# (the bench config, its "plain" build) and through compile_fwd at their awkward configs
# (grouped GDN below, KDA at K = 64), so their K = V = 128 cases here wait for the full matrix
WGMMA_CORE = {"gdn2-K128V128-bfloat16-h01ht1-float32-l21", "kda-K64V128-bfloat16-h01ht1-float32-l21"}


@pytest.mark.parametrize("variant", tiered(WGMMA_VARIANTS, [n for n, i in enumerate(WGMMA_VARIANTS) if vid(i) in WGMMA_CORE],
                                           ids=vid))
def test_wgmma_variant_compiles_for_sm90a(variant):
    _, cfg = VARIANTS[variant]
    assert callable(compile_fwd(_wgmma(cfg), "sm_90a"))


GROUPED_IDS = ["gva-kda", "gva-gdn-hk-hv", "gqa-gdn2"]


@pytest.mark.parametrize("cfg", tiered(  # core: GDN with grouped value heads (bf16: the product's wgmma)
    GROUPED, [1], ids=lambda c: GROUPED_IDS[GROUPED.index(c)]))
def test_wgmma_grouped_heads_compile(cfg):
    assert callable(compile_fwd(_wgmma(cfg), "sm_90a"))


@pytest.mark.skipif(not full_matrix(), reason=f"outside the matrix's core: set {FULL_ENV}=1 to run it")
def test_wgmma_stage_timing_variant_compiles():
    """bench/frost_stage_times.py --algorithm wgmma compiles the chain out (skip_stages)."""
    _, cfg = VARIANTS[WGMMA_VARIANTS[0]]
    assert callable(compile_fwd(with_algorithm(cfg, "wgmma", skip_stages=("chain",), gate_align16=cfg.gate_per_channel
                                               and cfg.io_dtype == "bfloat16"), "sm_90a"))


@pytest.mark.skipif(not full_matrix(), reason=f"outside the matrix's core: set {FULL_ENV}=1 to run it")
def test_warpgroup_partitions_extend_the_warp_partitions():
    import cutlass.cute as cute

    from cudnn.linear_attention.frost.kernels.fwd_mma import warp_mma
    from cudnn.linear_attention.frost.kernels.fwd_wgmma import wgmma

    result = {}

    @cute.jit
    def probe():
        mma = warp_mma()
        for n in cutlass.range_constexpr(64, 192, 64):
            wg = wgmma(n)
            for t in cutlass.range_constexpr(128):
                w = wg.get_slice(t)
                s = mma.get_slice(t % 32)
                for kind in cutlass.range_constexpr(2):
                    if cutlass.const_expr(kind == 0):
                        wc = w.partition_C(cute.make_identity_tensor((64, n)))
                        sc = s.partition_C(cute.make_identity_tensor((16, n)))
                    else:
                        wc = w.partition_A(cute.make_identity_tensor((64, n)))
                        sc = s.partition_A(cute.make_identity_tensor((16, n)))
                    for e in cutlass.range_constexpr(cute.size(wc)):
                        result[(kind, n, t, e)] = (str(wc[e]), str(sc[e]))

    cute.compile(probe, options="--gpu-arch sm_90a")
    assert len(result) == 2 * (64 * 64 + 64 * 128)  # C and A: every value of every thread, N = 64, 128
    for (kind, n, t, e), (wg_text, warp_text) in result.items():
        wr, wc = (int(v) for v in re.findall(r"-?\d+", wg_text))
        r, c = (int(v) for v in re.findall(r"-?\d+", warp_text))
        assert (wr, wc) == (r + 16 * (t // 32), c), (kind, n, t, e, wg_text, warp_text)
    covered = {v[0] for k, v in result.items() if k[0] == 0 and k[1] == 64}
    assert len(covered) == 64 * 64  # the warpgroup's 128 threads cover the 64 x 64 tile once


def test_sw128_tiles_are_the_documented_swizzle():
    """fwd_mma.sw128_layout as the DSL builds it: Swizzle<3,4,3> on byte addresses over
    8 x 64 bf16 atoms tiled rows first, i.e. wgmma_fragments.sw128_tile_offset."""
    import cutlass.cute as cute

    from cudnn.linear_attention.frost.kernels.fwd_mma import sw128_layout

    texts = {}

    @cute.jit
    def probe():
        for rows, cols in ((128, 128), (128, 64), (64, 64)):
            texts[rows, cols] = str(sw128_layout((rows, cols)))

    cute.compile(probe, options="--gpu-arch sm_90a")
    for (rows, cols), text in texts.items():
        atom_cols = cols // 64
        expected = (f"S<3,4,3> o 0 o ((8,{rows // 8}),(64,{atom_cols})):((64,512),"
                    f"(1,{rows * 64 if atom_cols > 1 else 0}))")
        assert text == expected, (rows, cols, text)


def test_wgmma_shared_memory_fits_and_is_no_larger_than_pipelined():
    from cudnn.linear_attention.frost.kernels.fwd_mma import SMEM_LIMIT, smem_bytes
    from cudnn.linear_attention.frost.kernels.fwd_pipelined import FrostFwdPipelined
    from cudnn.linear_attention.frost.kernels.fwd_wgmma import FrostFwdWgmma

    for fam, cfg in VARIANTS:
        wgmma, pipelined = smem_bytes(cfg, FrostFwdWgmma.smem_plan), smem_bytes(cfg, FrostFwdPipelined.smem_plan)
        assert wgmma <= min(pipelined, SMEM_LIMIT), (fam, cfg.K, cfg.V, wgmma, pipelined)
    names = [entry[0] for entry in FrostFwdWgmma.smem_plan(VARIANTS[0][1])]
    assert names[:2] == ["kq", "kdt"] and not {"qa", "kba"} & set(names)


def test_io_view_drops_the_swizzle_so_staged_tiles_stay_plain():
    """FrostFwdPipelined.io_view re-types a shared tile by cute.recast_ptr, which (CuTe DSL 4.8)
    returns an unswizzled pointer: a raw-staged tile in SW128 would be written to the wrong
    addresses. wgmma keeps them plain (fwd_wgmma.RAW_STAGED); this pins the DSL behaviour that
    rule exists for, so a DSL that keeps the swizzle shows up here."""
    import cutlass.cute as cute
    from cutlass import Float16

    from cudnn.linear_attention.frost.kernels.fwd_mma import SW128, allocate_smem

    texts = {}

    class Probe:
        @cute.jit
        def __call__(self):
            self.kernel().launch(grid=[1, 1, 1], block=[32, 1, 1])

        @cute.kernel
        def kernel(self):
            s = allocate_smem([("t", "bf16", (64, 64), SW128)])
            texts["tile"] = str(s.t.iterator.type) if hasattr(s.t.iterator, "type") else str(s.t)
            texts["view"] = str(cute.make_tensor(cute.recast_ptr(s.t.iterator, dtype=Float16), s.t.layout))

    cute.compile(Probe(), options="--gpu-arch sm_90a")
    assert "S<3,4,3>" in texts["tile"], texts
    assert "S<3,4,3>" not in texts["view"], texts


def test_smem_bytes_counts_the_swizzle_alignment():
    from cudnn.linear_attention.frost.kernels.fwd_mma import SW128, smem_bytes

    cfg = VARIANTS[0][1]
    assert smem_bytes(cfg, lambda c: [("t", "bf16", (64, 64), SW128)]) == 8192
    assert smem_bytes(cfg, lambda c: [("beta", "f32", (4,), (1,)), ("t", "bf16", (64, 64), SW128)]) == 1024 + 8192


def test_wgmma_refuses_what_it_does_not_do():
    from cudnn.linear_attention.frost.kernels.compile_kernel import version_class
    from cudnn.linear_attention.frost.kernels.fwd_wgmma import FrostFwdWgmma, FrostFwdWgmmaCheckpoints, FrostFwdWgmmaValues

    _, cfg = VARIANTS[WGMMA_VARIANTS[0]]
    with pytest.raises(ValueError, match="sm_90a only.*sm_100a"):  # a forced wgmma; the product picks pipelined there
        compile_fwd(experiment(cfg, "wgmma"), "sm_100a")
    ckpt = dataclasses.replace(cfg, write_checkpoints=True)
    values = dataclasses.replace(ckpt, write_values=True)
    # the plain launcher has no checkpoint or values pointer: only the training launchers take them
    for training in (ckpt, values):
        with pytest.raises(ValueError, match="written by its training launchers"):
            FrostFwdWgmma(training)
    with pytest.raises(ValueError, match="must have write_checkpoints=True"):
        FrostFwdWgmmaCheckpoints(cfg)
    with pytest.raises(ValueError, match="write_values=True"):
        FrostFwdWgmmaValues(ckpt)
    assert [version_class("wgmma", c) for c in (cfg, ckpt, values)] == [FrostFwdWgmma, FrostFwdWgmmaCheckpoints,
                                                                      FrostFwdWgmmaValues]
    with pytest.raises(ValueError, match="sm_90a only.*sm_100a"):
        compile_fwd(experiment(values, "wgmma"), "sm_100a")


TRAINING = [("gdn", 128, True), ("kda", 128, True), ("gdn2", 128, True), ("gdn", 64, True), ("gdn", 128, False)]
_BUILDS = tempfile.mkdtemp(prefix="frost_compile_wgmma_")
atexit.register(shutil.rmtree, _BUILDS, ignore_errors=True)


@functools.cache
def _training_builds(family, K, with_values):
    """The bench config of `family` at K = V as a training call (its product config with
    write_checkpoints, and write_values where with_values), cross-compiled once per process
    for sm_90a and kept: {"wgmma": the product's training kernel (the wgmma layer's launcher), "pipelined": the pipelined layer's
    launcher, forced, "plain": the product's plain kernel} -> (cubin path, the blocks of
    the solve, the blocks the U store was handed, the tiles the staged stores were handed).
    The recorders wrap the solve (fwd_mma.FrostFwdMma.solve_block), each chain's
    store_values_block (fwd_mma's, fwd_wgmma's, fwd_wgmma_scaled's) and the staged stores' tile
    writes (gmem_vector_io.stage_tile: U's blocks, then O's, in the wgmma layer's chain where
    STAGED_STORES applies) while the kernel is traced. Shared by the training-launcher SASS
    test and the U-store test (one build each)."""
    import frost_cubin_report as report
    from cudnn.linear_attention.frost.kernels import fwd_mma, fwd_wgmma, fwd_wgmma_scaled
    from cudnn.linear_attention.frost.kernels import gmem_vector_io as vio
    from frost_fwd_experiments import product_algorithm, product_config

    plain = product_config(report.config_for(family, "product", K, K, False))
    training = dataclasses.replace(plain, write_checkpoints=True, write_values=with_values)
    assert product_algorithm(training) == product_algorithm(plain) == "wgmma"  # what is built below
    builds = {}
    for name, cfg in (("wgmma", training), ("pipelined", experiment(training, "pipelined")), ("plain", plain)):
        solved, stored, tiles = [], [], []
        solve = fwd_mma.FrostFwdMma.solve_block

        def recording_solve(self, *args, _solve=solve, _solved=solved):
            u = _solve(self, *args)
            _solved.append(u)
            return u

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(fwd_mma.FrostFwdMma, "solve_block", recording_solve)
            for module in (fwd_mma, fwd_wgmma, fwd_wgmma_scaled):
                def recording_store(mu, u, *rest, _store=module.store_values_block, _stored=stored):
                    _stored.append(u)
                    return _store(mu, u, *rest)

                patch.setattr(module, "store_values_block", recording_store)

            def recording_tile(buf, acc, *rest, _stage=vio.stage_tile, _tiles=tiles):
                _tiles.append(acc)
                return _stage(buf, acc, *rest)

            patch.setattr(vio, "stage_tile", recording_tile)
            out = os.path.join(_BUILDS, f"{family}-K{K}-{int(with_values)}-{name}")
            os.makedirs(out)
            builds[name] = (report.compile_cubin(cfg, out), solved, stored, tiles)
    return training, builds


def _sass(cubin):
    """(resource usage, normalised SASS) of a cubin (frost_cubin_report)."""
    import frost_cubin_report as report

    if report.tool("CUOBJDUMP", "cuobjdump") is None or report.tool("NVDISASM", "nvdisasm") is None:
        pytest.skip("cuobjdump / nvdisasm not found (set CUOBJDUMP, NVDISASM)")
    return report.resource_usage(cubin), report.sass_instructions(cubin)


def _global_stores(instrs):
    """How many of each global store instruction (STG.E.128: checkpoint rows; STG.E.U16: U
    and the output; STG.E: the fp32 final state) the kernel holds."""
    import collections

    ops = (re.sub(r"^@!?U?P[0-9T]\s+", "", ins).split()[0] for ins in instrs)
    return collections.Counter(op for op in ops if op.startswith("STG"))


def _wgmma_sequence(instrs):
    """The kernel's warpgroup MMA issue / fence / wait instructions in order, registers and
    descriptors blanked: ptxas serialising the groups (an added WARPGROUP.DEPBAR or a
    changed wait depth) changes it."""
    return [re.sub(r"gdesc\[[^]]*\]", "gdesc", re.sub(r"\bU?R\d+\b", "R", ins))
            for ins in instrs if "HGMMA" in ins or "WARPGROUP" in ins]


@pytest.mark.parametrize("family,K,with_values", tiered(  # core: GDN's and KDA's at the bench's K = V = 128
    TRAINING, [0, 1], ids=lambda c: f"{c[0]}-K{c[1]}-{'ckpt+U' if c[2] else 'ckpt'}", unpack=True))
def test_wgmma_training_launchers_store_what_pipelined_stores(family, K, with_values):
    """The wgmma layer's training kernel (the product's training forward on sm_90a) against the pipelined layer's (the
    training forward it replaced there, still the product's on other archs) and the plain
    wgmma kernel, on the benchmark config as a training call: no spills; the same global
    stores as the pipelined layer's training kernel, which has more than the plain kernel (the checkpoint
    rows; with U, 4 blocks x 8 values per thread and chunk more 2-byte stores); the plain
    wgmma kernel's wgmma sequence. Where wgmma stages O and U (fwd_wgmma.FrostFwdWgmma.STAGED_STORES:
    vector gates, bf16 io, K >= V) each staged tensor's 32 two-byte stores per thread and chunk are
    4 sixteen-byte ones instead (frost_compile_fwd_staged_stores_test)."""
    from frost_fwd_experiments import staged_stores_apply

    training, builds = _training_builds(family, K, with_values)
    wgmma_usage, wgmma = _sass(builds["wgmma"][0])  # the product's training forward on sm_90a: wgmma's launcher
    _, pipelined = _sass(builds["pipelined"][0])  # the pipelined layer's launcher, forced
    _, wgmma_plain = _sass(builds["plain"][0])  # the product's plain bf16 forward on sm_90a: wgmma
    assert wgmma_usage["LOCAL"] == 0 and wgmma_usage["STACK"] == 0 and wgmma_usage["REG"] <= 255, wgmma_usage
    stores, plain_stores = _global_stores(wgmma), _global_stores(wgmma_plain)
    staged = staged_stores_apply(training, "wgmma")
    expected = _global_stores(pipelined)
    if staged:
        tensors = training.write_output + training.write_values  # O, U
        expected["STG.E.U16"] -= 32 * tensors
        expected["STG.E.128"] += 4 * tensors
    assert stores == +expected, (stores, expected)
    assert stores["STG.E.128"] > plain_stores["STG.E.128"], (stores, plain_stores)  # the checkpoint rows
    u_stores = 32 if with_values and not staged else 0
    assert stores["STG.E.U16"] - plain_stores["STG.E.U16"] == u_stores, (stores, plain_stores)
    sequence = _wgmma_sequence(wgmma)
    assert sum("HGMMA" in ins for ins in sequence) > 0 and sequence == _wgmma_sequence(wgmma_plain)


@pytest.mark.parametrize("family, build, decay", tiered(  # core: the wgmma layer's two chains (folded: KDA's, scaled: GDN's)
    [("kda", "pipelined", "folded"), ("kda", "wgmma", "folded"), ("gdn", "wgmma", "scaled")], [1, 2],
    ids=lambda c: f"{c[1]}-{c[2]}", unpack=True))
def test_u_stored_is_the_solves_accumulator(family, build, decay):
    """What a training forward stores as U, seen while the kernel is traced: in the pipelined layer's chain
    (fwd_mma.stage_chain) and in the wgmma layer's (fwd_wgmma.chunk_chain) the one U store
    (fwd_mma.store_values_block: the same bf16 conversion and rows) is called once per block
    of the solve, in block order, with the very fp32 accumulator solve_block returned for
    that block: not a bf16 copy, not a wgmma operand, not another block's. So wgmma stores the
    same rounding of the same value pipelined does, up to the order of the fp32 sums that made R
    (the tensor cores'; kernels/NOTES.md "v3 training forward"). The same holds for the wgmma layer's
    chain with the decays as factors (fwd_wgmma_scaled.py, the product's for GDN). Traced in
    the bench training builds test_wgmma_training_launchers_store_what_pipelined_stores inspects
    (_training_builds: KDA's product forward runs the folded chain, GDN's the scaled one).
    Where wgmma stages its stores (STAGED_STORES: KDA here), U's blocks are the first NBLK
    tiles staged, the same accumulators, and O's the NBLK after them. Only counts and
    identities are asserted: a traced value's repr outlives its trace badly."""
    from cudnn.linear_attention.frost.kernels.fwd_mma import NBLK
    from frost_fwd_experiments import default_decay, staged_stores_apply

    training, builds = _training_builds(family, 128, True)
    assert default_decay(training, build) == decay  # the chain this build traced
    _, solved, stored, tiles = builds[build]
    staged = build == "wgmma" and staged_stores_apply(training, build, decay)
    u_blocks = tiles[:NBLK] if staged else stored
    counts = (len(solved), len(stored), len(tiles))
    expected = (NBLK, 0, 2 * NBLK) if staged else (NBLK, NBLK, 0)  # (solved, U stores, staged tiles)
    assert counts == expected, (counts, expected)
    same = [u is s for u, s in zip(u_blocks, solved)]
    assert all(same), same
    _, plain_solved, plain_stored, plain_tiles = builds["plain"]  # the plain kernel solves and stores no U
    plain_counts = (len(plain_solved), len(plain_stored), len(plain_tiles))
    plain_staged = staged_stores_apply(training, "wgmma", default_decay(training, "wgmma"))  # the plain kernel is wgmma
    assert plain_counts == (NBLK, 0, NBLK if plain_staged else 0), plain_counts
    assert not any(t is u for t in plain_tiles for u in plain_solved)  # the plain kernel stages O only


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
