"""FROST forward v3 with the next chunk's rows by 1D bulk copies (an experiment of the test
tooling: frost_fwd_experiments' rows="bulk", FROST_FWD_ROWS=bulk; vector gates).

v3's chain issues the next chunk's q, k, gate (and GDN-2 b, w) rows as 16-byte cp.async
while its first wgmma groups run: ~16-20 per thread, each preceded by ptxas's never-taken
shared-load placeholder, and those held ~17.5 % of the KDA chain region's stall samples on
the H100 (NOTES.md, the KDA forward's per-instruction profile). Here one cp.async.bulk per
row (bulk_rows.issue: an elected lane per warp, ~4 rows per job and warp at 8 warps)
completes on an mbarrier instead; the rest of the set (unaligned gate rows, KDA's scalar
beta, each warp's v columns) stays cp.async.

Ordering: the rows' tiles were last read by generic loads in the rows, operand and Gram
stages; v3's Gram stage ends with fence.proxy.async (each thread's earlier accesses
against the async proxy) and the barrier after it precedes the copies' issue. The set of
chunk j + 1 is the mbarrier's phase j (chunk 0 is staged by v2's cp.async before the
loop), waited for at the end of chunk j's chain, before v1's closing barrier; the zeros
past eos (plain stores) are visible after that barrier too.
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute

from cudnn.linear_attention.frost.kernels import bulk_rows
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.fwd_v1 import CHUNK
from cudnn.linear_attention.frost.kernels.fwd_v2 import FrostFwdV2
from cudnn.linear_attention.frost.kernels.fwd_v3 import FrostFwdV3
from cudnn.linear_attention.frost.kernels.fwd_v3 import smem_plan as v3_smem_plan

#: the bulk copies' mbarrier, after v3's tiles (theirs keep their offsets)
MBARRIER = ("mbar", "i64", (1,), (1,))


def smem_plan(c: FrostFwdConfig):
    return v3_smem_plan(c) + [MBARRIER]


class BulkNextRows:
    """Mixin before a FrostFwdV3 class (plain or a training launcher)."""

    smem_plan = staticmethod(smem_plan)

    @cute.jit
    def before_chunks(self, s, mq, mk, mv, mg, mb, mw, heads, bos, eos, tid, lane, wid):
        """The mbarrier (visible to every warp and the async proxy after the barrier that
        ends v3's first-chunk staging), then that staging."""
        if tid == 0:
            cute.arch.mbarrier_init(s.mbar.iterator, 1)
            cute.arch.mbarrier_init_fence()
        s.bos = bos
        FrostFwdV3.before_chunks(self, s, mq, mk, mv, mg, mb, mw, heads, bos, eos, tid, lane, wid)

    @cute.jit
    def prefetch_next_rows(self, s, t0, eos, lane, wid):
        """The next chunk's rows by bulk copies onto s.mbar, the rest as v2 copies them
        (cp.async, one committed group), when there is a next chunk."""
        if t0 + CHUNK < eos:
            tid = wid * 32 + lane
            jobs = self.bulk_row_jobs(s)
            bulk_rows.check_jobs(jobs, self.cfg)
            bulk_rows.issue(jobs, s.mbar.iterator, t0 + CHUNK, eos, tid, self.threads)
            self.copy_gate_beta_rows(s, t0 + CHUNK, eos, tid, gates=not self.cfg.gate_align16)
            cute.arch.cp_async_commit_group()

    @cute.jit
    def stage_chain(self, s, mo, acc_s, coord_s, heads, t0, eos, thr, lane, wid):
        """v2's (v3's chain, then its cp.async wait), then the wait for the bulk set."""
        FrostFwdV2.stage_chain(self, s, mo, acc_s, coord_s, heads, t0, eos, thr, lane, wid)
        if t0 + CHUNK < eos:
            cute.arch.mbarrier_wait(s.mbar.iterator, ((t0 - s.bos) // CHUNK) % 2)
