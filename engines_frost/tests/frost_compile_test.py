"""L0: every FROST forward kernel variant cross-compiles for sm_90a (no GPU needed).

CuTe DSL lowers to PTX and runs ptxas for the requested arch on a CPU-only machine, so each
family (GDN, KDA, GDN-2) x head dims x io dtype x state presence/dtype x l2norm x head
grouping is compiled through the same entry (fwd.compile_fwd, launch_abi.fake_args) the
GPU launch uses. The ABI test checks that launch_abi.real_args, fed torch tensors, builds
an argument list of the same kinds, element types and alignments as fake_args. Skips with
the reason where nvidia-cutlass-dsl is not importable.
"""
import itertools

import pytest

cutlass = pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")

from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig  # noqa: E402
from cudnn.linear_attention.frost.kernels.fwd import compile_fwd  # noqa: E402

FAMILIES = {  # gate_per_channel, beta_per_channel/has_w
    "gdn": (False, False),
    "kda": (True, False),
    "gdn2": (True, True),
}
STATES = [  # (has_initial_state, has_final_state, state dtype)
    (False, False, None),
    (True, False, "float32"),
    (False, True, "bfloat16"),
    (True, True, "float32"),
]
HEAD_DIMS = [(64, 64), (128, 128), (64, 128), (128, 64)]


def _variants():
    for (fam, (gpc, bpc)), (K, V), io, (h0, ht, st) in itertools.product(
            FAMILIES.items(), HEAD_DIMS, ("bfloat16", "float16"), STATES):
        l2 = (K + V + h0 + ht) % 2 == (io == "float16")  # alternate l2norm across the matrix
        yield fam, FrostFwdConfig(io_dtype=io, state_dtype=st, H=2, HK=2, HV=2, K=K, V=V, gate_per_channel=gpc,
                                  beta_per_channel=bpc, has_w=bpc, use_l2norm=l2, has_initial_state=h0,
                                  has_final_state=ht)


VARIANTS = list(_variants())
V1_VARIANTS = [
    i for i, (fam, c) in enumerate(VARIANTS)
    if (c.io_dtype, c.has_initial_state, c.has_final_state) == ("bfloat16", True, True)
    or (fam == "gdn" and c.K == c.V == 64 and c.io_dtype == "float16" and c.has_final_state)
]
GROUPED = [  # value grouping (HV = 2H, k at H or HV heads) and query grouping (H = 2HV)
    FrostFwdConfig(io_dtype="bfloat16", state_dtype="float32", H=2, HK=2, HV=4, K=128, V=128,
                   gate_per_channel=True, beta_per_channel=False, has_w=False, use_l2norm=True,
                   has_initial_state=True, has_final_state=True),
    FrostFwdConfig(io_dtype="bfloat16", state_dtype="bfloat16", H=2, HK=4, HV=4, K=64, V=128,
                   gate_per_channel=False, beta_per_channel=False, has_w=False, use_l2norm=False,
                   has_initial_state=False, has_final_state=True),
    FrostFwdConfig(io_dtype="float16", state_dtype=None, H=4, HK=4, HV=2, K=128, V=64,
                   gate_per_channel=True, beta_per_channel=True, has_w=True, use_l2norm=True,
                   has_initial_state=False, has_final_state=False),
]


def _with(cfg, algorithm):
    import dataclasses
    return dataclasses.replace(cfg, algorithm=algorithm)


def _vid(i):
    f, c = VARIANTS[i]
    return (f"{f}-K{c.K}V{c.V}-{c.io_dtype}-h0{int(c.has_initial_state)}ht{int(c.has_final_state)}"
            f"-{c.state_dtype}-l2{int(c.use_l2norm)}")


# v2 re-types staged raw rows (io dtype) in its bf16 shared tensors: every family and head
# dim in both io dtypes.
V2_VARIANTS = [
    i for i, (fam, c) in enumerate(VARIANTS)
    if (c.io_dtype, c.has_initial_state, c.has_final_state) in (("bfloat16", True, True), ("float16", False, True))
]
COMPILES = ([("v0", i) for i in range(len(VARIANTS))] + [("v1", i) for i in V1_VARIANTS]
            + [("v2", i) for i in V2_VARIANTS])


@pytest.mark.parametrize("algorithm,variant", COMPILES, ids=[f"{a}-{_vid(i)}" for a, i in COMPILES])
def test_variant_compiles_for_sm90a(variant, algorithm):
    _, cfg = VARIANTS[variant]
    fn = compile_fwd(_with(cfg, algorithm), "sm_90a")
    assert callable(fn)


@pytest.mark.parametrize("algorithm", ["v0", "v1", "v2"])
@pytest.mark.parametrize("cfg", GROUPED, ids=["gva-kda", "gva-gdn-hk-hv", "gqa-gdn2"])
def test_grouped_heads_compile(cfg, algorithm):
    assert callable(compile_fwd(_with(cfg, algorithm), "sm_90a"))


@pytest.mark.parametrize("variant", [
    i for i, (fam, c) in enumerate(VARIANTS)
    if fam != "gdn" and (c.io_dtype, c.has_initial_state, c.has_final_state) == ("bfloat16", True, True)
], ids=_vid)
def test_v2_aligned_gate_copies_compile(variant):
    """v2 with 16-byte gate copies (gate_align16, what frost_fwd picks for aligned g)."""
    import dataclasses

    _, cfg = VARIANTS[variant]
    assert callable(compile_fwd(dataclasses.replace(cfg, algorithm="v2", gate_align16=True), "sm_90a"))


@pytest.mark.parametrize("algorithm", ["v1", "v2"])
def test_elementwise_operand_loads_compile(algorithm):
    """The FROST_FWD_LDMATRIX=0 diagnostic variant (element-wise shared-memory loads)."""
    import dataclasses

    _, cfg = VARIANTS[V1_VARIANTS[-1]]
    assert callable(compile_fwd(dataclasses.replace(cfg, algorithm=algorithm, ldmatrix=False), "sm_90a"))


@pytest.mark.parametrize("algorithm", ["v1", "v2"])
def test_shared_memory_fits_every_config(algorithm):
    from cudnn.linear_attention.frost.kernels.fwd import kernel_class
    from cudnn.linear_attention.frost.kernels.fwd_v1 import SMEM_LIMIT, smem_bytes

    plan = kernel_class(algorithm).smem_plan
    sizes = {(f, c.K, c.V): smem_bytes(c, plan) for f, c in VARIANTS}
    assert max(sizes.values()) <= SMEM_LIMIT, sizes
    assert sizes[("kda", 128, 128)] > sizes[("gdn", 128, 128)]  # the vector-gate operands are counted


def test_v2_plan_adds_to_v1():
    """v2 stages in v1's tensors and adds only its decay tables (KE, X, e^Gam_last)."""
    from cudnn.linear_attention.frost.kernels.fwd_v1 import smem_bytes
    from cudnn.linear_attention.frost.kernels.fwd_v2 import smem_plan as v2_plan

    _, kda = next((f, c) for f, c in VARIANTS if f == "kda" and c.K == c.V == 128)
    extra = smem_bytes(kda, v2_plan) - smem_bytes(kda)
    ke = (63 * (128 + 8) + 128) * 2  # 64 padded bf16 rows; the last row's padding is not allocated
    assert extra == ke + 10 * 128 * 4 + 128 * 4, extra


@pytest.mark.parametrize("warps", [4, 8])
def test_v2_gram_schedule_balances_tiles(warps):
    """Every Gram tile has one owner; a diagonal tile (it carries a 16x16 inverse) counts
    double and the heaviest warp carries the least possible: 2 units on 8 warps (no warp
    with a diagonal tile and a second one), 4 on 4 warps (v1's round robin: 3 and 5)."""
    from cudnn.linear_attention.frost.kernels.fwd_v1 import GRAM_TILES
    from cudnn.linear_attention.frost.kernels.fwd_v2 import gram_schedule

    owners = gram_schedule(warps)
    assert len(owners) == len(GRAM_TILES) and set(owners) <= set(range(warps))
    load = [0] * warps
    for (i, j), w in zip(GRAM_TILES, owners):
        load[w] += 2 if i == j else 1
    assert max(load) == -(-14 // warps)
    if warps == 8:
        diag_warps = {w for (i, j), w in zip(GRAM_TILES, owners) if i == j}
        assert all(owners.count(w) == 1 for w in diag_warps)


def test_accumulator_is_the_next_a_operand():
    """fwd_v1 feeds an fp32 accumulator tile back as the bf16 A operand element by element
    (to_a_operand): the m16n8 accumulator partition and the m16n8k16 A partition of the same
    [16, N] tile must list the same (row, col) coordinates in the same order for every lane."""
    import cutlass.cute as cute

    from cudnn.linear_attention.frost.kernels.fwd_v1 import warp_mma

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


def test_real_args_mirror_fake_args():
    torch = pytest.importorskip("torch")
    from cudnn.linear_attention.frost.kernels.launch_abi import fake_args, real_args

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


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
