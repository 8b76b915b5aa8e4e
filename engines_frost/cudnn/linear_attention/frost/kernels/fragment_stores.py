"""16-byte global stores of an m16n8 accumulator tile whose columns are contiguous in memory.

The state S^T lives in the chain's fp32 accumulators: a warp's [16, K] tile of m16n8
tiles, where lane l holds rows l // 4 and l // 4 + 8 and, in each n8 tile, the column pair
2 (l % 4), 2 (l % 4) + 1; value e of the partition sits at row l // 4 + 8 ((e // 2) % 2),
column 8 (e // 4) + 2 (l % 4) + e % 2 (accumulator_coordinate; frost_compile_test checks
it against CuTe's partition). Storing it element by element (what the checkpoint stores did)
issues 64 two-byte stores per thread per chunk at K = 128, each warp store touching 8 rows
with 8 of every 16 bytes: the forward's checkpoint stores cost ~0.15 ms at the bench shape
for 0.27 GB, 2.5x their HBM time (NOTES_bwd.md v1.2). Here the four lanes of a quad, which
hold the same rows, swap column pairs (quad_exchange: two butterfly stages of shuffles)
until each holds the 8 consecutive columns of one n8 tile, converted to bf16 and stored
as one 16-byte vector: 8 stores per thread per chunk, each warp store writing 8 rows x
64 contiguous bytes. The values and their bf16 rounding are unchanged, only who stores
them. Imports cutlass; the functions are called from kernel code while it is traced (and
run on the CPU by engines_frost/tests/simt_emulator.py).
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32

QUAD = 4  # lanes sharing a row of an m16n8 accumulator
VEC = 8   # bf16 per 16-byte store: one n8 tile's row


def accumulator_coordinate(lane: int, e: int) -> tuple[int, int]:
    """(row, column) of value e of lane `lane` in a [16, N] m16n8 accumulator tile (pure
    Python: the layout the store relies on, for the tests)."""
    return lane // QUAD + 8 * ((e // 2) % 2), 8 * (e // 4) + 2 * (lane % QUAD) + e % 2


@cute.jit
def quad_exchange(x: cute.Tensor, lane):
    """Run by a whole warp. x: a register tensor of 4 pieces of W = size(x) / 4 values, piece
    p meant for quad lane p (lane % 4 == p); afterwards piece p holds what quad lane p meant
    for this lane (a 4 x 4 transpose of pieces within each quad). Butterfly over lane bit 1,
    then bit 0: in each pair of pieces (a, a + step) a lane keeps the one whose bit matches
    its own, sends the other to lane ^ step and puts what comes back in the sent one's
    place; W shuffles per pair and stage."""
    width = cute.size(x) // QUAD
    for stage in cutlass.range_constexpr(2):
        step = 2 >> stage
        upper = (lane & step) != 0
        for a in cutlass.range_constexpr(QUAD):
            if cutlass.const_expr((a & step) == 0):
                for w in cutlass.range_constexpr(width):
                    lo = a * width + w
                    hi = (a + step) * width + w
                    send = x[hi]
                    if upper:
                        send = x[lo]
                    got = cute.arch.shuffle_sync_bfly(send, offset=step)
                    if upper:
                        x[lo] = got
                    else:
                        x[hi] = got


@cute.jit
def store_rows_vectorised(dst: cute.Tensor, acc: cute.Tensor, row0, lane, ncols: cutlass.Constexpr):
    """Run by a whole warp: its [16, ncols] fp32 accumulator tile `acc` (laid out as
    accumulator_coordinate says) into dst[row0 + r, :] (dst a [rows, ncols] view with unit column stride, 16-byte
    aligned rows) as bf16, one 16-byte store per lane and group of four n8 tiles and row
    half."""
    g = lane // QUAD
    t = lane % QUAD
    for half in cutlass.range_constexpr(2):
        for m in cutlass.range_constexpr(ncols // (QUAD * VEC)):
            x = cute.make_rmem_tensor((QUAD * 2,), Float32)
            for i in cutlass.range_constexpr(QUAD):      # n8 tile 4 m + i, meant for quad lane i
                for c in cutlass.range_constexpr(2):
                    x[2 * i + c] = acc[c + 2 * half + 4 * (QUAD * m + i)]
            quad_exchange(x, lane)
            y = cute.make_rmem_tensor((VEC,), BFloat16)
            for e in cutlass.range_constexpr(VEC):       # piece p: columns 2p, 2p + 1 of tile 4m + t
                y[e] = x[e].to(BFloat16)
            cute.autovec_copy(y, cute.local_tile(dst[row0 + g + 8 * half, None], (VEC,), (QUAD * m + t,)))
