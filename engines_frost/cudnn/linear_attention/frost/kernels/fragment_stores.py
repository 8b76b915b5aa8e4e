"""Stores of m16n8 accumulator tiles: 16-byte global rows, and stmatrix into shared memory.

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
them.

When the tile's rows are the memory's columns (the forward's O^T: rows are value
channels, columns tokens, and out[t, h, v] is contiguous in v), no quad holds a memory
row: store_block_transposed writes each 16 x 16 block through a per-warp shared scratch
with one stmatrix.x4.trans (store_fragment with transpose: the block lands token-major)
and leaves it as one 16-byte load and one 16-byte global store per lane, where one
2-byte store per element (8 per lane and block, 32 per lane and chunk) used to go.

Imports cutlass; store_rows_vectorised and quad_exchange are also run on the CPU by
engines_frost/tests/simt_emulator.py (stmatrix is not in its subset).
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32
from cutlass.cute.nvgpu import warp

from cudnn.linear_attention.frost.kernels.fwd_v1 import warp_mma
from cudnn.linear_attention.frost.kernels.stmatrix_map import BLOCK, check_stmatrix_copy

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


def traced_tv(layout):
    """A traced thread-value layout as ((thread shape, value shape), (strides)), static."""
    return (cute.get(layout.shape, mode=[0]), cute.get(layout.shape, mode=[1])), \
        (cute.get(layout.stride, mode=[0]), cute.get(layout.stride, mode=[1]))


@cute.jit
def store_fragment(frag: cute.Tensor, tile: cute.Tensor, transpose: cutlass.Constexpr = False):
    """Run by a whole warp: 16-bit values `frag`, laid out as warp_mma's accumulator over
    a [16, N] tile, into shared memory `tile` ([16, N] view) by stmatrix.x4, one
    instruction per 16 x 16 block. Plain: `tile` has unit column stride and 16-byte
    aligned rows; lane l gives the address of row l % 16, columns 8 (l // 16) .. + 7 of
    the block, and per 8 x 8 matrix one register (a column pair). transpose
    (stmatrix.trans): `tile` has unit row stride and 16-byte aligned columns; each lane
    addresses 8 consecutive rows of one column. Before v1.6 each element was one 2-byte
    store (32 per [16, 64] tile). The register and address maps CuTe builds for the copy
    are checked while tracing (stmatrix_map.check_stmatrix_copy) against the PTX tables."""
    lane = cute.arch.lane_idx()
    atom = cute.make_copy_atom(warp.StMatrix8x8x16bOp(transpose, 4), tile.element_type)
    mma = warp_mma()
    copy = cute.make_tiled_copy_C(atom, mma)
    check_stmatrix_copy(traced_tv(copy.layout_src_tv_tiled), traced_tv(copy.layout_dst_tv_tiled),
                        traced_tv(mma.tv_layout_C_tiled), transpose)
    thr_copy = copy.get_slice(lane)
    cute.copy(copy, thr_copy.retile(frag), thr_copy.partition_D(tile))


SCRATCH_PITCH = BLOCK + VEC  # elements per scratch row: 48 bytes, so the 8 rows of a matrix
# (and of a quarter-warp's 16-byte loads) fall in 8 different 16-byte bank groups


def scratch_shape() -> tuple[tuple[int, int], tuple[int, int]]:
    """(shape, stride) of one warp's store_block_transposed scratch: [16 rows, pitch]."""
    return (BLOCK, BLOCK), (SCRATCH_PITCH, 1)


@cute.jit
def store_block_transposed(frag: cute.Tensor, scratch: cute.Tensor, dst: cute.Tensor, row0, rows, col0, lane):
    """Run by a whole warp: a 16-bit [16, 16] accumulator block `frag` (warp_mma's layout;
    block row j, column i) into dst[row0 + i, col0 + j] for row0 + i < rows: dst a
    [rows, cols] view with unit column stride and 16-byte aligned rows, col0 a multiple of
    8, scratch this warp's [16, SCRATCH_PITCH] shared tile (scratch_shape). The block is
    stored transposed into scratch (row i: 16 consecutive values), then lane l moves row
    l % 16, columns 8 (l // 16) .. + 7 with one 16-byte load and one 16-byte store. The
    warp syncs after the stmatrix (other lanes' values are read) and at the end (the next
    block may overwrite the scratch)."""
    view = cute.make_tensor(scratch.iterator, cute.make_layout((BLOCK, BLOCK), stride=(1, SCRATCH_PITCH)))
    store_fragment(frag, view, True)
    cute.arch.sync_warp()
    i = lane % BLOCK
    half = lane // BLOCK
    y = cute.make_rmem_tensor((VEC,), frag.element_type)
    cute.autovec_copy(cute.local_tile(scratch[i, None], (VEC,), (half,)), y)
    if row0 + i < rows:
        cute.autovec_copy(y, cute.local_tile(dst[row0 + i, None], (VEC,), (col0 // VEC + half,)))
    cute.arch.sync_warp()
