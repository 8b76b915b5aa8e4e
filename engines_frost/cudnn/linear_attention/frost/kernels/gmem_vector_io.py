"""16-byte global stores of a warp's transposed MMA accumulator tiles, through a warp-private buffer.

The chain and the states / values kernels hold per-token outputs (dR, U) as blocks of
their transpose: warp w's [16, 16] accumulator has the value columns j of its slice as
rows and the tokens t as columns, while memory is [T, H, V] (j contiguous). Stored element
by element that is one 2-byte store per value, 8 rows of 2 bytes per warp store; the
Nsight profile showed those stores throttling the load/store pipe. Here a warp writes its
blocks, transposed, into a shared buffer of its own ([C, 16] bf16), then every lane copies
16-byte row slices to global memory (two lanes per token row: the warp's 32 contiguous
bytes, a whole sector). Only the warp takes part (warp barriers, no CTA barrier), so the
callers keep their barrier structure. Tiles whose columns are contiguous in memory (the
states S, dS) need no buffer: fragment_stores.py exchanges them within quads.

Protocol: ``stage_tile`` (any number of times, into disjoint parts of the buffer), then
``flush_rows``; flush_rows starts and ends with a warp barrier, so the buffer may be
reused right after it.

The kernels that use it (chain, states, values) give each warp of the mma / pipelined layout (warp
w owns value rows [16 w, 16 w + 16) of the state) one buffer for its [C, 16] columns of a
chunk's per-token tensor, as the plan tensor "wbuf" when the kernel's shared memory leaves
room for it (with_warp_buffers); the wgmma forward's staged stores (fwd_wgmma.STAGED_STORES)
put theirs, unpadded, in a tile that is dead while its chain runs.
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16

from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.fwd_mma import CHUNK, SMEM_LIMIT, SUB, smem_bytes

SLICE = 8    # bf16 elements per 16-byte store
PAD = 8      # bf16 elements of padding per buffer row (rows stay 16-byte aligned)


def buffer_elements(rows: int, cols: int) -> int:
    """bf16 elements of one warp's buffer for a [rows, cols] tile (padded rows)."""
    return rows * (cols + PAD)


def buffer_view(ptr, rows: int, cols: int, pad: int = PAD) -> cute.Tensor:
    """The [rows, cols] bf16 buffer at ptr (a shared-memory bf16 pointer, 16-byte aligned),
    rows `pad` elements apart beyond cols (a multiple of 8: rows stay 16-byte aligned)."""
    return cute.make_tensor(ptr, cute.make_layout((rows, cols), stride=(cols + pad, 1)))


def warp_buffer_elements(c: FrostFwdConfig) -> int:
    """One warp's buffer: its 16 value columns of a chunk's per-token rows, [C, 16]."""
    return buffer_elements(CHUNK, SUB)


def with_warp_buffers(plan: list, c: FrostFwdConfig) -> list:
    """plan plus "wbuf" (one buffer per warp, V // 16 warps) when the total fits in shared
    memory, else plan unchanged (the kernel then stores element-wise)."""
    per = warp_buffer_elements(c)
    extended = plan + [("wbuf", "bf16", (c.V // SUB, per), (per, 1))]
    return extended if smem_bytes(c, lambda _: extended) <= SMEM_LIMIT else plan


def has_warp_buffers(plan: list) -> bool:
    return any(entry[0] == "wbuf" for entry in plan)


def warp_buffer(s, c: FrostFwdConfig, wid, rows: int, cols: int) -> cute.Tensor:
    """Warp wid's buffer as [rows, cols] (called while a kernel is traced)."""
    assert buffer_elements(rows, cols) <= warp_buffer_elements(c), (rows, cols)
    return buffer_view(s.wbuf.iterator + wid * warp_buffer_elements(c), rows, cols)


@cute.jit
def stage_tile(buf: cute.Tensor, acc: cute.Tensor, coord: cute.Tensor, row0, col0,
               transpose: cutlass.Constexpr):
    """acc (fp32, element e at tile coordinate coord[e] = (i, j)) into buf as bf16, at
    buf[row0 + i, col0 + j], or buf[row0 + j, col0 + i] when transposed."""
    for e in cutlass.range_constexpr(cute.size(acc)):
        ij = coord[e]
        if cutlass.const_expr(transpose):
            buf[row0 + ij[1], col0 + ij[0]] = acc[e].to(BFloat16)
        else:
            buf[row0 + ij[0], col0 + ij[1]] = acc[e].to(BFloat16)


@cute.jit
def flush_rows(buf: cute.Tensor, dst: cute.Tensor, dst_row0, dst_col0, valid_rows, lane,
               rows: cutlass.Constexpr, cols: cutlass.Constexpr):
    """buf [rows, cols] into dst[dst_row0 + r, dst_col0 : dst_col0 + cols] for the rows r <
    valid_rows (dst: a 2-D bf16 view with unit column stride; dst_col0 a multiple of 8),
    16 bytes per store. Warp barriers before (every lane's stage_tile writes) and after
    (every lane's reads, so the buffer may be refilled)."""
    per_row = cols // SLICE
    cute.arch.sync_warp()
    for u in cutlass.range_constexpr(rows * per_row // 32):
        i = lane + 32 * u
        r = i // per_row
        cv = i % per_row
        if r < valid_rows:
            x = cute.make_rmem_tensor((SLICE,), BFloat16)
            cute.autovec_copy(cute.local_tile(buf[r, None], (SLICE,), (cv,)), x)
            cute.autovec_copy(x, cute.local_tile(dst[dst_row0 + r, None], (SLICE,), (dst_col0 // SLICE + cv,)))
    cute.arch.sync_warp()
