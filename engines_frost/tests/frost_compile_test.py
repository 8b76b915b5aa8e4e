"""L0: the FROST forward's oracle and mma kernels cross-compile for sm_90a (no GPU needed).

The oracle (the test-only SIMT kernel, frost_fwd_oracle.py) and mma (the pipelined layer's base class) are no product
kernels: they are built as the test and bench tooling builds them (frost_fwd_experiments.py).

CuTe DSL lowers to PTX and runs ptxas for the requested arch on a CPU-only machine, so each
family (GDN, KDA, GDN-2) x head dims x io dtype x state presence/dtype x l2norm x head
grouping is compiled through the same entry (fwd.compile_fwd, launch_abi.fake_args) the
GPU launch uses. The ABI test checks that launch_args.real_args, fed torch tensors, builds
an argument list of the same kinds, element types and alignments as fake_args. Skips with
the reason where nvidia-cutlass-dsl is not importable. The variant matrix is
frost_variants.py; pipelined compiles in frost_compile_pipelined_test.py.

The matrix's core (compile_tiers; ~25 s on one core, ~77 s before the mma layer's KDA builds and two
stage-timing builds moved to the full matrix): the oracle for GDN and GDN-2 and grouped query
heads, mma once (GDN, K = 64 fp16 with a bf16 state: mma is the pipelined layer's base class, whose product
builds frost_compile_pipelined_test's core compiles), one stage-timing build (the chain compiled
out), the accumulator layout pins and the ABI checks. The rest of the oracle / mma, their grouped
configs and the other stage-timing builds (the bounds-free one is built and inspected
in frost_bounds_registers_test's core) wait for FROST_FULL_MATRIX=1.
"""
import os
import sys

import pytest

cutlass = pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cudnn.linear_attention.frost.kernels.fwd import compile_fwd  # noqa: E402

from compile_tiers import FULL_ENV, full_matrix, tiered  # noqa: E402
from frost_variants import GROUPED, MMA_VARIANTS, VARIANTS, vid as _vid, with_algorithm as _with  # noqa: E402

# Neither is a product kernel any more, so neither needs the whole matrix (pipelined compiles all
# 96 variants): both build the subset the tooling runs, every family and head-dim pair;
# the matrix's core (compile_tiers): the oracle twice (GDN, GDN-2: ~1-3 s each), mma once at K = 64
# fp16 with a bf16 state (KDA at K = V = 128, ~16 s, waits for the full matrix).
COMPILES = [(a, i) for a in ("oracle", "mma") for i in MMA_VARIANTS]
COMPILES_CORE = {("oracle", "gdn-K128V128-bfloat16-h01ht1-float32-l21"), ("oracle", "gdn2-K128V128-bfloat16-h01ht1-float32-l21"),
                 ("mma", "gdn-K64V64-float16-h00ht1-bfloat16-l21")}


@pytest.mark.parametrize("algorithm,variant", tiered(
    COMPILES, [n for n, (a, i) in enumerate(COMPILES) if (a, _vid(i)) in COMPILES_CORE],
    ids=lambda c: f"{c[0]}-{_vid(c[1])}", unpack=True))
def test_variant_compiles_for_sm90a(variant, algorithm):
    _, cfg = VARIANTS[variant]
    fn = compile_fwd(_with(cfg, algorithm), "sm_90a")
    assert callable(fn)


GROUPED_IDS = ["gva-kda", "gva-gdn-hk-hv", "gqa-gdn2"]
GROUPED_COMPILES = [(g, a) for a in ("oracle", "mma") for g in range(len(GROUPED))]


@pytest.mark.parametrize("group,algorithm", tiered(  # core: the oracle's (~1 s); the mma layer's (~15 s each) in the full matrix
    GROUPED_COMPILES, [GROUPED_COMPILES.index((2, "oracle"))],
    ids=lambda c: f"{GROUPED_IDS[c[0]]}-{c[1]}", unpack=True))
def test_grouped_heads_compile(group, algorithm):
    assert callable(compile_fwd(_with(GROUPED[group], algorithm), "sm_90a"))


@pytest.mark.skipif(not full_matrix(), reason=f"outside the matrix's core: set {FULL_ENV}=1 to run it")
def test_mma_elementwise_operand_loads_compile():
    """The tooling's ldmatrix=False diagnostic variant of mma (element-wise shared-memory loads)."""
    _, cfg = VARIANTS[MMA_VARIANTS[-1]]
    assert callable(compile_fwd(_with(cfg, "mma", ldmatrix=False), "sm_90a"))


@pytest.mark.parametrize("skip", tiered(  # core: the chain compiled out; the bounds-free build is built and
    [("chain",), ("rows", "operands", "gram"), ("bounds",)], [0]))  # inspected in frost_bounds_registers_test
def test_stage_timing_variants_compile(skip):
    """bench/frost_stage_times.py's variants (stages compiled out of the chunk loop)."""
    _, cfg = VARIANTS[MMA_VARIANTS[-1]]
    assert callable(compile_fwd(_with(cfg, "pipelined", skip_stages=skip), "sm_90a"))


def test_mma_shared_memory_fits_every_config():
    from cudnn.linear_attention.frost.kernels.fwd_mma import SMEM_LIMIT, smem_bytes

    sizes = {(f, c.K, c.V): smem_bytes(c) for f, c in VARIANTS}
    assert max(sizes.values()) <= SMEM_LIMIT, sizes
    assert sizes[("kda", 128, 128)] > sizes[("gdn", 128, 128)]  # the vector-gate operands are counted


def test_accumulator_is_the_next_a_operand():
    """fwd_mma feeds an fp32 accumulator tile back as the bf16 A operand element by element
    (to_a_operand): the m16n8 accumulator partition and the m16n8k16 A partition of the same
    [16, N] tile must list the same (row, col) coordinates in the same order for every lane."""
    import cutlass.cute as cute

    from cudnn.linear_attention.frost.kernels.fwd_mma import warp_mma

    result = {}

    @cute.jit
    def probe():
        mma = warp_mma()
        for n_cols in cutlass.range_constexpr(16, 144, 16):
            for lane in cutlass.range_constexpr(32):
                thr = mma.get_slice(lane)
                c_crd = thr.partition_C(cute.make_identity_tensor((16, n_cols)))
                a_crd = thr.partition_A(cute.make_identity_tensor((16, n_cols)))
                for e in cutlass.range_constexpr(cute.size(c_crd)):
                    key = (n_cols, lane, e)
                    result[key] = (str(c_crd[e]), str(a_crd[e]))

    cute.compile(probe, options="--gpu-arch sm_90a")
    assert len(result) == 32 * sum(16 * n // 32 for n in range(16, 144, 16))
    assert all(c == a for c, a in result.values())
    coords = {v[0] for k, v in result.items() if k[0] == 16}
    assert len(coords) == 256  # the 32 lanes cover the 16x16 tile exactly once


def test_accumulator_layout_is_the_one_the_stores_assume():
    """fragment_stores.store_rows_vectorised (the checkpoint stores) reads value e of a
    [16, K] accumulator at fragment_stores.accumulator_coordinate(lane, e): CuTe's
    partition_C of the warp MMA must list exactly those coordinates, for every lane, K 64
    and 128."""
    import re

    import cutlass.cute as cute

    from cudnn.linear_attention.frost.kernels.fragment_stores import accumulator_coordinate
    from cudnn.linear_attention.frost.kernels.fwd_mma import warp_mma

    result = {}

    @cute.jit
    def probe():
        mma = warp_mma()
        for n_cols in cutlass.range_constexpr(64, 192, 64):
            for lane in cutlass.range_constexpr(32):
                crd = mma.get_slice(lane).partition_C(cute.make_identity_tensor((16, n_cols)))
                for e in cutlass.range_constexpr(cute.size(crd)):
                    result[(n_cols, lane, e)] = str(crd[e])

    cute.compile(probe, options="--gpu-arch sm_90a")
    assert len(result) == 32 * (16 * 64 + 16 * 128) // 32
    for (n_cols, lane, e), text in result.items():
        assert tuple(int(v) for v in re.findall(r"-?\d+", text)) == accumulator_coordinate(lane, e), \
            (n_cols, lane, e, text)


def test_real_args_mirror_fake_args():
    torch = pytest.importorskip("torch")
    from cudnn.linear_attention.frost.kernels.launch_abi import fake_args
    from cudnn.linear_attention.frost.kernels.launch_args import real_args

    _, cfg = VARIANTS[-1]  # gdn2 with both states
    T, N, H, K, V = 5, 2, cfg.H, cfg.K, cfg.V
    io = getattr(torch, cfg.io_dtype)
    st = getattr(torch, cfg.state_dtype)
    tensors = dict(
        q=torch.zeros(T, H, K, dtype=io), k=torch.zeros(T, H, K, dtype=io), v=torch.zeros(T, H, V, dtype=io),
        g=torch.zeros(T, H, K), beta=torch.zeros(T, H, K, dtype=io), w=torch.zeros(T, H, V, dtype=io),
        cu_seqlens=torch.tensor([0, 2, 5], dtype=torch.int32), out=torch.zeros(T, H, V, dtype=io),
        initial_state=torch.zeros(N, H, V, K, dtype=st), final_state=torch.zeros(N, H, V, K, dtype=st),
    )

    class _Stream:
        cuda_stream = 0

    fake, real = fake_args(cfg), real_args(cfg, tensors, T, N, 0.5, _Stream())
    assert len(fake) == len(real) == 14
    for i, (f, r) in enumerate(zip(fake[:10], real[:10])):
        assert (f.dtype, f.memspace, f._assumed_align) == (r.dtype, r.memspace, r._assumed_align), i
    assert real[0]._pointer == tensors["q"].data_ptr() and fake[0]._pointer == 0
    assert [type(x) for x in fake[10:13]] == [type(x) for x in real[10:13]]


def test_arg_packer_matches_real_args_and_reuses_pointers():
    torch = pytest.importorskip("torch")
    from cudnn.linear_attention.frost.kernels.config import OPERANDS
    from cudnn.linear_attention.frost.kernels.config import OPERANDS
    from cudnn.linear_attention.frost.kernels.launch_args import ArgPacker, real_args

    _, cfg = VARIANTS[-1]
    T, N, H, K, V = 5, 2, cfg.H, cfg.K, cfg.V
    io, st = getattr(torch, cfg.io_dtype), getattr(torch, cfg.state_dtype)
    tensors = dict(
        q=torch.zeros(T, H, K, dtype=io), k=torch.zeros(T, H, K, dtype=io), v=torch.zeros(T, H, V, dtype=io),
        g=torch.zeros(T, H, K), beta=torch.zeros(T, H, K, dtype=io), w=torch.zeros(T, H, V, dtype=io),
        cu_seqlens=torch.tensor([0, 2, 5], dtype=torch.int32), out=torch.zeros(T, H, V, dtype=io),
        initial_state=torch.zeros(N, H, V, K, dtype=st), final_state=None,
    )

    class _Stream:
        cuda_stream = 0

    pack = ArgPacker(cfg)
    first = pack(tensors, T, N, 0.5, _Stream())
    real = real_args(cfg, tensors, T, N, 0.5, _Stream())
    assert len(first) == len(real) == 14
    for i, (p, r) in enumerate(zip(first[:10], real[:10])):
        assert (p.dtype, p.memspace, p._assumed_align, p._pointer) == \
            (r.dtype, r.memspace, r._assumed_align, r._pointer), i
    assert [type(x) for x in first[10:]] == [type(x) for x in real[10:]]
    tensors["out"] = torch.zeros(T, H, V, dtype=io)  # a new address for one operand only
    second = pack(tensors, T, N, 0.5, _Stream())
    assert second[7]._pointer == tensors["out"].data_ptr() and second[7] is not first[7]
    assert all(second[i] is first[i] for i in range(10) if i != 7)
    # the engine's direct launch names only the wired ports: an unwired optional operand
    # has no key at all and must pack as the null pointer, as None does (an H200 run
    # found ArgPacker raising KeyError 'w' on a repeated GDN call)
    wired = {name: t for name, t in tensors.items() if t is not None and name != "w"}
    want = [0 if name == "w" or tensors[name] is None else tensors[name].data_ptr() for name in OPERANDS]
    for packed in (ArgPacker(cfg)(wired, T, N, 0.5, _Stream()), real_args(cfg, wired, T, N, 0.5, _Stream())):
        assert [p._pointer for p in packed[:10]] == want
    # the engine's direct launch names only the wired ports: an unwired optional operand
    # has no key at all and must pack as the null pointer, as None does
    wired = {name: t for name, t in tensors.items() if t is not None and name != "w"}
    for packed in (pack(wired, T, N, 0.5, _Stream()), real_args(cfg, wired, T, N, 0.5, _Stream())):
        assert [p._pointer for p in packed[:10]] == \
            [0 if tensors.get(n) is None or n == "w" else tensors[n].data_ptr() for n in OPERANDS]


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
