"""Rows into shared memory by 1D bulk copies (cp.async.bulk, one instruction per row),
completing on one mbarrier: the vector-gate grads kernel's load phase
(FrostBwdConfig.vec_bulk_copies), the backward vector chain's next-chunk rows
(FrostBwdConfig.chain_bulk_rows) and the wgmma forward's (fwd_wgmma.FrostFwdWgmma.rows_by_bulk).

A job is (shared [R, W] tile, source, R, zero dtype or None). The source is (tensor, head,
None) for a chunk's token rows t0 + r (rows at or past eos are zeroed with ordinary
stores instead: the zero dtype is given) or (tensor, head, state row) for the R rows of a
[V, K] state. Every row is a multiple of 16 bytes, 16-byte aligned on both sides; a job's
rows are a multiple of 32 (one warp's run).
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass.experimental.primitives import cp_async_bulk_shared_cluster_global as bulk_copy

from cudnn.linear_attention.frost.kernels.fwd_mma import CHUNK

#: the copies' mbarrier as a shared-memory plan entry (8 bytes; kernels put it after their
#: tiles, which then keep their offsets)
MBARRIER = ("mbar", "i64", (1,), (1,))


def row_bytes(dst) -> int:
    """Bytes of one row of a job's tile (what one cp.async.bulk of it moves)."""
    return cute.size(dst, mode=[1]) * dst.element_type.width // 8


def check_jobs(jobs, what) -> None:
    """Trace-time check: every job's rows are a multiple of 32 (issue deals warp runs)."""
    for _, _, count, _ in jobs:
        if count % 32:
            raise ValueError(f"bulk copies: a job of {count} rows (not a multiple of 32) in {what}")


@cute.jit
def init_mbarrier(mbar, tid):
    """Thread 0 initialises the copies' mbarrier (one arrival per phase: issue's thread 0)
    and fences it for the async proxy; the caller's next CTA barrier makes it visible to
    every warp before its first copy or wait."""
    if tid == 0:
        cute.arch.mbarrier_init(mbar, 1)
        cute.arch.mbarrier_init_fence()


@cute.jit
def issue(jobs, mbar, t0, eos, tid, threads: cutlass.Constexpr):
    """Every row of `jobs` by one cp.async.bulk onto mbar. The jobs' rows, back to back, go
    to the warps in runs of 32 (each run lies in one job): run i is warp i mod (threads /
    32)'s, whose elected lane issues its 32 copies (a per-lane copy's address would have to
    be made uniform lane by lane). Token rows past eos are zeroed instead, each by the lane
    of its place in the run, with ordinary stores (visible after the caller's barrier).
    Thread 0 arms the mbarrier with the bytes of the whole set first (the token rows before
    eos, every state row)."""
    rows = cutlass.min(eos - t0, CHUNK)  # the chunk's rows before the sequence end (>= 1)
    if tid == 0:
        tok = 0
        fixed = 0
        for dst, src, count, zero in jobs:
            nbytes = row_bytes(dst)
            if cutlass.const_expr(zero is None):
                fixed += count * nbytes
            else:
                tok += nbytes
        cute.arch.mbarrier_arrive_and_expect_tx(mbar, rows * tok + fixed)
    wid = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    lane = cute.arch.lane_idx()
    total = sum(job[2] for job in jobs)
    for k in cutlass.range_constexpr(-(-total // threads)):
        lo = 0
        for dst, src, count, zero in jobs:
            hi = lo + count
            if cutlass.const_expr(lo < (k + 1) * threads and hi > k * threads):
                r0 = k * threads + wid * 32 - lo  # this warp's run in the job, if it is there
                if r0 >= 0 and r0 < count:
                    run(mbar, dst, src, r0, zero, t0, eos, lane)
            lo = hi


@cute.jit
def run(mbar, dst, src, r0, zero, t0, eos, lane):
    """Rows r0 .. r0 + 31 of a job: the elected lane's cp.async.bulk per row (token rows:
    those before eos), then each lane zeroes its token row past eos."""
    nbytes = row_bytes(dst)
    tensor, head, state_row = src
    with cute.arch.elect_one():
        for i in cutlass.range(32, unroll=4):
            r = r0 + i
            if cutlass.const_expr(zero is None):
                bulk_copy(dst[r, None].iterator, tensor[state_row, head, r, None].iterator, mbar, nbytes)
            else:
                if t0 + r < eos:
                    bulk_copy(dst[r, None].iterator, tensor[t0 + r, head, None].iterator, mbar, nbytes)
    if cutlass.const_expr(zero is not None):
        r = r0 + lane
        if t0 + r >= eos:
            vec = 16 * 8 // dst.element_type.width
            z = cute.make_rmem_tensor((vec,), zero)
            z.fill(0.0)
            for cv in cutlass.range_constexpr(cute.size(dst, mode=[1]) // vec):
                cute.autovec_copy(z, cute.local_tile(dst[r, None], (vec,), (cv,)))
