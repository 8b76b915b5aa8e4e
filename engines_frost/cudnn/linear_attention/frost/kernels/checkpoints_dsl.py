"""The in-kernel half of checkpoints.py: which state_checkpoints row a CTA writes or reads.

Sequences' rows are packed one after another, so the first row of sequence n is the
number of chunks of sequences 0 .. n-1: a sum over cu_seqlens that each warp computes on
its own (lanes stride over the sequences, then a butterfly of integer adds: every lane of
every warp gets the same value, with no shared memory and no barrier). Bounds are read
through seq_bounds.sequence_bounds, as every kernel reads them, so the forward that
writes and the backward that reads agree whatever the table holds. Imports cutlass; the
functions are called from @cute.kernel code while it is traced.
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Int32

from cudnn.linear_attention.frost.kernels.checkpoints import CHUNK
from cudnn.linear_attention.frost.kernels.seq_bounds import sequence_bounds

WARP = 32


@cute.jit
def packed_row0(mcu: cute.Tensor, n, T, lane):
    """Run by a whole warp: the first checkpoint row of sequence n (checkpoints.py)."""
    acc = Int32(0)
    for m0 in cutlass.range(0, n, WARP, unroll=1):
        m = m0 + lane
        if m < n:
            bos, eos = sequence_bounds(mcu, m, T)
            acc = acc + (eos - bos + CHUNK - 1) // CHUNK
    for off in cutlass.range_constexpr(5):
        acc = acc + cute.arch.shuffle_sync_bfly(acc, offset=1 << off)
    return acc


@cute.jit
def checkpoint_row(mcu: cute.Tensor, n, j, T, N, lane):
    """Run by a whole warp: the row a reader takes for chunk j of sequence n, packed_row0
    + j kept below T // 64 + N (a well-formed table never reaches that bound; a malformed
    one may, and then reads a wrong row rather than past the tensor)."""
    return cutlass.min(packed_row0(mcu, n, T, lane) + j, T // CHUNK + N - 1)
