"""The vector-gate grads kernel's score adjoints on the tf32 warp MMA (sm_90a, no GPU).

FrostBwdConfig.vec_tf32_adjoints feeds the score adjoints' products to mma.sync m16n8k8
tf32 through tf32_fragments.warp_mma_tf32, whose k permutation makes each lane hold the
elements the bf16 m16n8k16 atom gives it. Checked here:
- on the layouts the installed CuTe DSL traces: a lane's tf32 A, B and C elements are the
  PTX ISA's fragment tables (written out below, independent of CuTe) through the
  permutation, the same elements as the bf16 atom's, and value_map finds the renumbering;
  without the permutation value_map refuses (so the kernel's trace-time check can fail);
- the KDA and GDN-2 builds at K = V = 128 with the product's other switches, and KDA at
  K = V = 64 with fp16 io and grouped q / k heads: no spill, no stack, no ptxas note, the
  adjoints' products on HMMA.1688.F32.TF32 with no bf16 split (F2FP) or bf16 MMA left
  among them.
Numerics: frost_bwd_precision_test's tf32 case (the rounding model) and, on the GPU, the
backward smoke against float64 (la_frost_bwd_smoke.py; the product's default since its
H100 run, NOTES_bwd.md).
"""
import os
import sys
import tempfile

import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import frost_cubin_report as report  # noqa: E402


def _ptx_bf16(operand, lane, n_tiles=1):
    """m16n8k16 bf16 (PTX ISA tables): A (row, k), B (n, k), C (row, n) of one lane."""
    g, t = lane // 4, lane % 4
    if operand == "A":
        return {(r, k) for r in (g, g + 8) for k in (2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9)}
    if operand == "B":
        return {(8 * j + g, k) for j in range(n_tiles) for k in (2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9)}
    return {(r, 8 * j + c) for j in range(n_tiles) for r in (g, g + 8) for c in (2 * t, 2 * t + 1)}


def _ptx_tf32(operand, lane, n_tiles=1):
    """m16n8k8 tf32 (PTX ISA tables: A (g | g + 8, t | t + 4), B (k t | t + 4, n g)), two k
    steps, each k read through warp_mma_tf32's permutation k -> 2 (k % 4) + k // 4."""
    g, t = lane // 4, lane % 4
    perm = lambda k, step: 2 * (k % 4) + k // 4 + 8 * step  # noqa: E731
    if operand == "A":
        return {(r, perm(k, s)) for s in (0, 1) for r in (g, g + 8) for k in (t, t + 4)}
    if operand == "B":
        return {(8 * j + g, perm(k, s)) for j in range(n_tiles) for s in (0, 1) for k in (t, t + 4)}
    return _ptx_bf16("C", lane, n_tiles)


def test_tf32_fragments_are_the_bf16_elements():
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.nvgpu import warp

    from cudnn.linear_attention.frost.kernels import tf32_fragments as tf
    from cudnn.linear_attention.frost.kernels.fwd_mma import warp_mma

    found = {}

    @cute.jit
    def probe():
        m16, m32 = warp_mma(), tf.warp_mma_tf32()
        cases = (("A", (16, 16), 1), ("B", (64, 16), 8), ("B", (32, 16), 4), ("C", (16, 64), 8))
        for i in cutlass.range_constexpr(len(cases)):   # unrolled while tracing: static coordinates
            op, shape, tiles = cases[i]
            for lane in cutlass.range_constexpr(32):
                found[(op, shape, lane)] = (tf.lane_coords(m16, op, shape, lane), tf.lane_coords(m32, op, shape, lane), tiles)
            found[(op, shape)] = tf.value_map(m16, m32, op, shape)
        plain = cute.make_tiled_mma(warp.MmaTF32Op((16, 8, 8)), (1, 1, 1), permutation_mnk=(16, 16, 16))
        try:
            tf.value_map(m16, plain, "A", (16, 16))
        except ValueError as e:
            found["refused"] = str(e)

    cute.compile(probe)
    for (op, shape, lane), (c16, c32, tiles) in [(k, v) for k, v in found.items() if len(k) == 3]:
        assert set(c32) == _ptx_tf32(op, lane, tiles), (op, shape, lane, c32)
        assert set(c16) == _ptx_bf16(op, lane, tiles), (op, shape, lane, c16)
    for (op, shape), at in [(k, v) for k, v in found.items() if len(k) == 2]:
        assert sorted(at) == list(range(len(at))), (op, shape, at)
    assert found[("C", (16, 64))] == list(range(32))     # the accumulators are shared as they are
    assert found[("A", (16, 16))] != list(range(8))      # A's renumbering is real
    assert "refused" in found                            # no permutation: not the same elements


@pytest.mark.skipif(report.tool("CUOBJDUMP", "cuobjdump") is None or report.tool("NVDISASM", "nvdisasm") is None,
                    reason="cuobjdump / nvdisasm not found (set CUOBJDUMP, NVDISASM)")
@pytest.mark.parametrize("family, K, V, io, H", [("kda", 128, 128, "bfloat16", 16), ("gdn2", 128, 128, "bfloat16", 16),
                                                 ("kda", 64, 64, "float16", 2)])   # the last: 2 q/k heads over 4 v
def test_tf32_adjoints_build(family, K, V, io, H):
    from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
    from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

    per = family == "gdn2"
    f = FrostFwdConfig(io, "float32", H, H, max(H, 4), K, V, True, per, per, True, True, False,
                       gate_align16=True)
    cfg = FrostBwdConfig(f, "grads", "float32", "float32", checkpoints=True, vec_wide_loads=True,
                         vec_fast_decay=True, vec_bulk_copies=per, vec_tf32_adjoints=True)
    notes = set()
    with tempfile.TemporaryDirectory() as tmp:
        cubin = report.compile_bwd_cubin(cfg, tmp, notes)
        usage = report.resource_usage(cubin)
        ins = report.sass_instructions(cubin)
    tf32 = [i for i, x in enumerate(ins) if "HMMA.1688.F32.TF32" in x]
    between = ins[tf32[0]:tf32[-1] + 1] if tf32 else []
    print(f"{family} K={K} V={V} {io} tf32 grads: {usage}, {len(tf32)} tf32 MMAs, {len(between)} instructions among them")
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0 and usage["REG"] <= 255, usage
    assert not notes, notes
    assert tf32, "no tf32 MMA in the build"
    assert not [x for x in between if x.startswith("F2FP") or "HMMA.16816" in x], "bf16 split or MMA among the tf32 products"
