"""Sequence bounds that hold for any cu_seqlens table, and the rows no sequence covers.

cu_seqlens lives on the device and is never read on the host (no synchronisation), so a
kernel cannot assume it is well formed (0 = cu[0] <= cu[1] <= ... <= cu[N] = T). Every
FROST kernel reads the rows of sequence n through `sequence_bounds`: [cu[n], cu[n+1])
clamped into [0, T], an inverted range empty. No access then leaves rows [0, T) (nor
the checkpoint rows derived from bos: bos // 64 + n + j < T // 64 + N), whatever the
table holds.

A malformed table may leave output rows that no sequence covers (rows before cu[0],
after cu[N], or a gap a non-monotone table leaves). `table_order` and
`zero_uncovered_rows` let one warp per output slice write zeros there, so no row is
returned uninitialised (the tensor-core forward runs them in CTAs of their own, an extra
grid row, through `zero_uncovered_heads`: zeroing code on the chunk loop's path changed
the registers ptxas gave that loop, NOTES.md): for a non-decreasing (clamped) table the
uncovered rows are exactly [0, cu[0]) and [cu[N], T), found from two loads; otherwise each row is
tested against every sequence (slow, and only for malformed tables). The backward zeroes
in its first kernel, before the one that writes the gradients, so there an unordered table
simply zeroes every row first (its chunk search may drop a chunk two sequences claim). A
well-formed table costs one pass over it by one warp (N / 32 loads per lane), no store.

Imports cutlass; the functions are called from @cute.kernel code while it is traced.
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32

WARP = 32


@cute.jit
def clamp_row(x, total):
    """x clamped into [0, total]."""
    return cutlass.min(cutlass.max(x, Int32(0)), total)


@cute.jit
def sequence_bounds(mcu: cute.Tensor, n, total):
    """(bos, eos) of sequence n: cu_seqlens[n], cu_seqlens[n + 1] clamped into [0, total],
    with eos >= bos (an inverted range is empty)."""
    return bounds_of(mcu[n], mcu[n + 1], total)


@cute.jit
def bounds_of(cu_n, cu_next, total):
    """sequence_bounds from the two table entries, loaded by the caller (who may load them
    well before it needs the bounds)."""
    bos = clamp_row(cu_n, total)
    eos = cutlass.max(clamp_row(cu_next, total), bos)
    return bos, eos


@cute.jit
def table_order(mcu: cute.Tensor, N, total, lane):
    """Run by a whole warp: (first, last, ordered), the clamped cu[0] and cu[N] and
    whether the clamped table never decreases (1.0) or does somewhere (0.0)."""
    worst = Float32(0.0)
    for i in cutlass.range(lane, N, WARP, unroll=1):
        if clamp_row(mcu[i + 1], total) < clamp_row(mcu[i], total):
            worst = Float32(1.0)
    worst = cute.arch.warp_reduction(worst, cute.arch.fmax)
    return clamp_row(mcu[0], total), clamp_row(mcu[N], total), Float32(1.0) - worst


@cute.jit
def zero_uncovered_rows(mcu: cute.Tensor, N, total, mout: cute.Tensor, head, col0,
                        width: cutlass.Constexpr, first, last, ordered, lane,
                        every_row_if_unordered: cutlass.Constexpr = False):
    """Run by a whole warp: zeros into mout[t, head, col0:col0 + width] for every row t
    in [0, total) that no sequence covers (table_order's first, last, ordered). With
    `every_row_if_unordered` (a kernel that runs before the one writing the rows), an
    unordered table zeroes every row instead of searching the uncovered ones."""
    zero = Float32(0.0).to(mout.element_type)
    if ordered > Float32(0.5):
        for i in cutlass.range(lane, first * width, WARP, unroll=1):
            mout[i // width, head, col0 + i % width] = zero
        for i in cutlass.range(lane, (total - last) * width, WARP, unroll=1):
            mout[last + i // width, head, col0 + i % width] = zero
    elif cutlass.const_expr(every_row_if_unordered):
        for i in cutlass.range(lane, total * width, WARP, unroll=1):
            mout[i // width, head, col0 + i % width] = zero
    else:
        for t in cutlass.range(lane, total, WARP, unroll=1):
            covered = Int32(0)
            for n in cutlass.range(N, unroll=1):
                bos, eos = sequence_bounds(mcu, n, total)
                if t >= bos and t < eos:
                    covered = Int32(1)
            if covered == 0:
                for j in cutlass.range(width, unroll=1):
                    mout[t, head, col0 + j] = zero


@cute.jit
def zero_uncovered_heads(mcu: cute.Tensor, N, total, mout: cute.Tensor, heads: cutlass.Constexpr,
                         width: cutlass.Constexpr, job, jobs, lane):
    """Run by a whole warp, the `job`-th of `jobs` warps that share the work (the forward:
    warp 0 of each CTA of its zeroing grid row): zero_uncovered_rows over all `width`
    columns of heads job, job + jobs, ... < heads of mout. A warp with no head returns
    before reading the table."""
    if job < heads:
        first, last, ordered = table_order(mcu, N, total, lane)
        for head in cutlass.range(job, heads, jobs, unroll=1):
            zero_uncovered_rows(mcu, N, total, mout, head, 0, width, first, last, ordered, lane)
