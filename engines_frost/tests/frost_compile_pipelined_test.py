"""L0: every FROST forward pipelined kernel variant cross-compiles for sm_90a, and the pipelined layer's static plans.

pipelined (kernels/fwd_pipelined.py) re-types staged raw rows (io dtype) in its bf16 shared tensors and
has two gate-staging paths, so it compiles every family x head dims in both io dtypes
(16-byte gate copies with bf16, 4-byte with fp16), grouped heads and element-wise
operand loads. Also:
its shared-memory plan (fits; adds only KE, X, e^Gam_last to the mma layer's) and the Gram tile
schedule. Same entry as the launch (fwd.compile_fwd, launch_abi.fake_args). Skips where
nvidia-cutlass-dsl is not importable.

The matrix's core (compile_tiers; ~25 s on one core, the full matrix ~165 s): pipelined is the
product's forward for fp16 on sm_90a (and on other archs), so the core builds every family
in fp16 at the bench's K = V = 128 (4-byte gate copies), GDN fp16 at K = V = 64 and GDN
with grouped k / v heads at K = 64 / V = 128 (the awkward configs). the pipelined layer's bf16 build for
GDN (the product off sm_90a) at K = V = 128 is built and inspected in the core of
frost_bounds_registers_test, KDA fp16 at K = V = 64 with 16- and 4-byte gate copies in
frost_resource_test's; the other head-dim pairs, state and l2norm combinations, grouped
configs and the tooling's element-wise loads wait for FROST_FULL_MATRIX=1.
"""
import os
import sys

import pytest

cutlass = pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cudnn.linear_attention.frost.kernels.fwd import compile_fwd  # noqa: E402

from compile_tiers import FULL_ENV, full_matrix, tiered  # noqa: E402
from frost_variants import GROUPED, MMA_VARIANTS, VARIANTS, vid, with_algorithm  # noqa: E402

# Every family and head dim in both io dtypes; vector gates staged by 16-byte copies in the
# bf16 variants (gate_align16, what frost_fwd picks for aligned g) and by 4-byte copies in
# the fp16 ones.
PIPELINED_VARIANTS = [
    i for i, (fam, c) in enumerate(VARIANTS)
    if (c.io_dtype, c.has_initial_state, c.has_final_state) in (("bfloat16", True, True), ("float16", False, True))
]


def _pipelined(cfg):
    return with_algorithm(cfg, "pipelined", gate_align16=cfg.gate_per_channel and cfg.io_dtype == "bfloat16")


PIPELINED_CORE = {"gdn-K128V128-float16-h00ht1-bfloat16-l21", "kda-K128V128-float16-h00ht1-bfloat16-l21",
           "gdn2-K128V128-float16-h00ht1-bfloat16-l21", "gdn-K64V64-float16-h00ht1-bfloat16-l21"}


@pytest.mark.parametrize("variant", tiered(PIPELINED_VARIANTS, [n for n, i in enumerate(PIPELINED_VARIANTS) if vid(i) in PIPELINED_CORE],
                                           ids=vid))
def test_pipelined_variant_compiles_for_sm90a(variant):
    _, cfg = VARIANTS[variant]
    assert callable(compile_fwd(_pipelined(cfg), "sm_90a"))


GROUPED_IDS = ["gva-kda", "gva-gdn-hk-hv", "gqa-gdn2"]


@pytest.mark.parametrize("cfg", tiered(GROUPED, [1], ids=lambda c: GROUPED_IDS[GROUPED.index(c)]))
def test_pipelined_grouped_heads_compile(cfg):
    assert callable(compile_fwd(_pipelined(cfg), "sm_90a"))


@pytest.mark.skipif(not full_matrix(), reason=f"outside the matrix's core: set {FULL_ENV}=1 to run it")
def test_pipelined_elementwise_operand_loads_compile():
    """The tooling's ldmatrix=False diagnostic variant (element-wise shared-memory loads)."""
    _, cfg = VARIANTS[MMA_VARIANTS[-1]]
    assert callable(compile_fwd(with_algorithm(_pipelined(cfg), "pipelined", ldmatrix=False), "sm_90a"))


def test_pipelined_shared_memory_fits_every_config():
    from cudnn.linear_attention.frost.kernels.fwd_mma import SMEM_LIMIT, smem_bytes
    from cudnn.linear_attention.frost.kernels.fwd_pipelined import FrostFwdPipelined

    sizes = {(f, c.K, c.V): smem_bytes(c, FrostFwdPipelined.smem_plan) for f, c in VARIANTS}
    assert max(sizes.values()) <= SMEM_LIMIT, sizes
    assert sizes[("kda", 128, 128)] > sizes[("gdn", 128, 128)]  # the vector-gate operands are counted


def test_pipelined_plan_adds_to_the_mma_plan():
    """The pipelined layer stages in the mma layer's tensors and adds only its decay tables (KE, X, e^Gam_last)."""
    from cudnn.linear_attention.frost.kernels.fwd_mma import smem_bytes
    from cudnn.linear_attention.frost.kernels.fwd_pipelined import smem_plan as pipelined_plan

    _, kda = next((f, c) for f, c in VARIANTS if f == "kda" and c.K == c.V == 128)
    extra = smem_bytes(kda, pipelined_plan) - smem_bytes(kda)
    ke = (63 * (128 + 8) + 128) * 2  # 64 padded bf16 rows; the last row's padding is not allocated
    assert extra == ke + 10 * 128 * 4 + 128 * 4, extra


@pytest.mark.parametrize("warps", [4, 8])
def test_pipelined_gram_schedule_balances_tiles(warps):
    """Every Gram tile has one owner; a diagonal tile (it carries a 16x16 inverse) counts
    double and the heaviest warp carries the least possible: 2 units on 8 warps (no warp
    with a diagonal tile and a second one), 4 on 4 warps (the mma layer's round robin: 3 and 5)."""
    from cudnn.linear_attention.frost.kernels.fwd_mma import GRAM_TILES
    from cudnn.linear_attention.frost.kernels.fwd_pipelined import gram_schedule

    owners = gram_schedule(warps)
    assert len(owners) == len(GRAM_TILES) and set(owners) <= set(range(warps))
    load = [0] * warps
    for (i, j), w in zip(GRAM_TILES, owners):
        load[w] += 2 if i == j else 1
    assert max(load) == -(-14 // warps)
    if warps == 8:
        diag_warps = {w for (i, j), w in zip(GRAM_TILES, owners) if i == j}
        assert all(owners.count(w) == 1 for w in diag_warps)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
