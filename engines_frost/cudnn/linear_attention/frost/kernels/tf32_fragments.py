"""A tf32 warp MMA whose fragments hold, lane for lane, the elements of fwd_mma.warp_mma's.

mma.sync m16n8k8 tf32 gives lane (g = lane / 4, t = lane % 4) the k columns t and t + 4 of
each 8-wide k step; the bf16 m16n8k16 atom gives it 2 t, 2 t + 1, 2 t + 8, 2 t + 9. A
product does not care in which order k is summed, so warp_mma_tf32 reads its two k steps
through the permutation k = i + 4 j + 8 b -> 2 i + j + 8 b (i < 4, j, b < 2): its lanes
then own exactly the A and B elements of the bf16 atom's fragments, in another order, and
the same accumulator layout. A kernel can therefore load an operand the bf16 way
(ldmatrix), widen each value to fp32 in its own registers and feed it to the tf32 MMA:
no shuffles, only a static renumbering (value_map). bwd_grads_vec's score adjoints use it
for their decayed operands, which one bf16 rounding makes too coarse (NOTES_bwd.md
"Vector-gate grads: the decayed operands in tf32").
"""
from __future__ import annotations

import cutlass.cute as cute
from cutlass.cute.nvgpu import warp

TILE = 16  # the tiled MMA's M, N and K extent, as warp_mma's


def warp_mma_tf32():
    """m16n8k8 tf32, fp32 accumulate, tiled 16 x 16 x 16 with the k permutation above."""
    kperm = cute.make_layout((4, 2, 2), stride=(2, 1, 8))
    return cute.make_tiled_mma(warp.MmaTF32Op((16, 8, 8)), (1, 1, 1), permutation_mnk=(TILE, TILE, kperm))


def lane_coords(mma, operand: str, shape, lane: int) -> list:
    """The (row, column) of each value of one lane's fragment of operand "A", "B" or "C" over a
    tile of `shape`, static (called while tracing, with a constant lane)."""
    part = getattr(mma.get_slice(lane), f"partition_{operand}")(cute.make_identity_tensor(shape))
    return [tuple(int(x) for x in part[e]) for e in range(cute.size(part))]


def value_map(mma16, mma32, operand: str, shape) -> list[int]:
    """For each index e of the tf32 MMA's fragment of operand "A", "B" or "C" over a tile
    of `shape`, the index of the bf16 MMA's fragment that holds the same element, the
    same for every lane (lanes' coordinates are static while tracing). Raises ValueError
    when a lane's two fragments do not hold the same elements (the premise of this
    module)."""
    out = None
    for lane in range(32):
        c16, c32 = lane_coords(mma16, operand, shape, lane), lane_coords(mma32, operand, shape, lane)
        if sorted(c16) != sorted(c32) or len(set(c16)) != len(c16):
            raise ValueError(f"operand {operand} {shape}: lane {lane} holds {c16} (bf16) and {c32} (tf32)")
        at = [c16.index(c) for c in c32]
        if out is None:
            out = at
        elif at != out:
            raise ValueError(f"operand {operand} {shape}: lane {lane} orders its values as {at}, lane 0 as {out}")
    return out
