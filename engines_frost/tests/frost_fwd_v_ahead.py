"""The four-role GDN forward with v in the raw ring: an experiment kernel of the test
tooling (frost_fwd_experiments.py knob decay="wyc-ws4va").

The product's copy warpgroup (fwd_ws4.RawRing.copies) issues, per chunk c, the next chunk's
raw rows into ring stage (c + 1) mod RING once the chain released chunk c - 2, then this
chunk's v into operand set c mod SETS once the chain released chunk c - 2 from that set,
and waits for both before it arrives on FULL for chunk c: the chain's start on chunk c
sits one load round trip after chunk c - 2's release. Here v is a ring stage's as the rows
are (the W0 tile RING chunks tall instead of SETS), copied with the rows of the same
chunk, so chunk c's v lands with its rows a chunk earlier and the copies arrive on FULL
for chunk c at the top of its iteration (after EMPTY, which orders the arrival after the
chain's FULL wait of chunk c - 2), before they issue anything. Every other role runs the
product's code; the chain reads W0 from the ring stage (chunk_views). Shared memory: one
more [C, V] bf16 tile, 17 KB (183 -> 200 KB at K = V = 128).
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute

from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.fwd_mma import CHUNK
from cudnn.linear_attention.frost.kernels.fwd_wgmma import WG_THREADS
from cudnn.linear_attention.frost.kernels.fwd_wgmma_gram import lane_in_loop, tid_in_loop
from cudnn.linear_attention.frost.kernels.fwd_ws import BAR_EMPTY, BAR_FULL, BLOCK_THREADS, SETS
from cudnn.linear_attention.frost.kernels.fwd_ws4 import (
    BAR_RING_EMPTY,
    CHAIN_WARPS,
    COPY_TID0,
    RING,
    RING_EMPTY_THREADS,
    RawRingInChain,
    ring_smem_plan_in_chain,
)


def v_ring_smem_plan(c: FrostFwdConfig):
    """The product's plan with W0 (raw v) RING chunks tall."""
    return [(name, dtype, (CHUNK * RING, *shape[1:]) if name == "w0" else shape, stride)
            for name, dtype, shape, stride in ring_smem_plan_in_chain(c)]


class VAhead(RawRingInChain):
    """RawRingInChain with v copied into the ring with its chunk's rows (module docstring)."""

    smem_plan = staticmethod(v_ring_smem_plan)

    def chunk_views(self, s, i):
        """The product's views of chunk i with W0 from ring stage i mod RING. Traced inline."""
        st = super().chunk_views(s, i)
        st.w0 = cute.local_tile(s.w0, (CHUNK, self.cfg.V), (i % RING, 0))
        return st

    @cute.jit
    def issue_chunk(self, s, j, t0, eos, lane, cwid):
        """Chunk j (first token t0)'s raw rows and v into ring stage j mod RING, one
        committed group."""
        st = self.chunk_views(s, j)
        self.as_role(WG_THREADS, self.prefetch_rows, self.ring_view(s, j % RING), t0, eos, tid_in_loop() - COPY_TID0)
        for part in cutlass.range_constexpr(CHAIN_WARPS // 4):
            self.prefetch_v(st, t0, eos, lane, cwid + 4 * part)
        cute.arch.cp_async_commit_group()

    @cute.jit
    def chunk_landed(self, s, j, t0, eos):
        """Chunk j (first token t0)'s group waited for, then its stage's norms, fence and
        RING_FULL."""
        cute.arch.cp_async_wait_group(0)
        self.stage_landed(s, j % RING)

    @cute.jit
    def copies(self, s, bos, eos, chunks):
        C = CHUNK
        if chunks > 0:
            self.issue_chunk(s, 0, bos, eos, lane_in_loop(), (tid_in_loop() - COPY_TID0) // 32)
            self.chunk_landed(s, 0, bos, eos)
        for i in cutlass.range(chunks, unroll=1):
            t0 = bos + i * C
            b = i % SETS
            r = (i + 1) % RING
            lane = lane_in_loop()
            cwid = (tid_in_loop() - COPY_TID0) // 32
            if i >= SETS:  # chunk i - 2's chain passed its FULL wait: this arrival is chunk i's
                cute.arch.barrier(barrier_id=BAR_EMPTY + b, number_of_threads=BLOCK_THREADS)
            cute.arch.barrier_arrive(barrier_id=BAR_FULL + b, number_of_threads=BLOCK_THREADS)  # v(i) landed
            if i + 1 < chunks:
                if i + 1 >= RING:
                    cute.arch.barrier(barrier_id=BAR_RING_EMPTY + r, number_of_threads=RING_EMPTY_THREADS)
                self.issue_chunk(s, i + 1, t0 + C, eos, lane, cwid)
                self.chunk_landed(s, i + 1, t0 + C, eos)
