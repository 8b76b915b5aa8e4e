"""The four-role GDN forward with P's Gram and the gate scan on the copy warpgroup: an
experiment kernel of the test tooling (frost_fwd_experiments.py knob decay="wyc-ws4pc").

The product's four-role forward (fwd_ws4.RawRingInChain) is paced by its math warpgroup
(kernels/NOTES.md "Next: what paces the four-role GDN forward"): four warps, latency-bound,
forming per chunk the gate scan, the factor rows, M and P on wgmma with their epilogues,
the diagonal inverses and A. The copy warpgroup meanwhile waits for its loads. Here the
copies take the state-free work that needs no inverse:
- the gate scan, in stage_landed once a ring stage's rows landed (a chunk before math
  reads the gates, beside the l2 norms' inverses the copies already form there);
- P (P^T = k q^T as the product builds it, stored back as P), for chunk c after the set's
  release (EMPTY) and the issue of chunk c's v and chunk c + 1's rows, so it runs while
  those loads fly; in m64n16 column blocks (GramWgmma with gram_n 16, one 8-register
  accumulator at a time), since the copies get 40 registers.
Math forms the factor rows, M (traced with an output-free config: the Gram's M alone), the
diagonal inverses and A. Registers (chain, math, copies): 184 / 104 / 40. sm_90a builds
(GDN, no l2norm): at 192 / 96 / 32 ptxas ignores the setmaxnreg split (C7507: the copies'
P cannot fit 32); at 192 / 88 / 40 math spills 4 / 4 per chunk; at 184 / 104 / 40 one
2-byte value in math, the copies and the chain none, the chain's wgmma serialized (C7512)
as in the product's at 192.
Hand-over as RawRing's: the copies' FULL arrival now also says P is written (its stores
fenced for the async proxy by the Gram's closing fence).
"""
from __future__ import annotations

import dataclasses

import cutlass
import cutlass.cute as cute

from cudnn.linear_attention.frost.kernels.fwd_wgmma import WG_THREADS
from cudnn.linear_attention.frost.kernels.fwd_wgmma_gram import GramWgmma, lane_in_loop, tid_in_loop
from cudnn.linear_attention.frost.kernels.fwd_ws4 import (
    BAR_COPIES,
    BAR_MATH,
    BAR_RING_FULL,
    COPY_TID0,
    PAIR_THREADS,
    RING,
    FourRoles,
    RawRingInChain,
)

REGISTER_SPLIT = (184, 104, 40)
#: P's column blocks on the copy warpgroup (GramWgmma.gram_n while it traces P)
P_BLOCK = 16
#: its accumulators (GramWgmma.gram_buffers): 1, each block waited before its epilogue
P_BUFFERS = 1


class PInCopies(RawRingInChain):
    """RawRingInChain with P and the gate scan on the copy warpgroup (module docstring)."""

    split_mma_gram = REGISTER_SPLIT
    split_wgmma_gram = REGISTER_SPLIT

    def sequence(self, s, mq, mk, mv, mg, mb, mw, mcu, mo, mh0, mht, mckpt, scale, T, N, n, h):
        """FourRoles' roles, the output scale kept for the copies' P (a kernel argument: it
        dominates every role's code). A plain method, traced inline."""
        self.p_scale = scale
        return FourRoles.sequence(self, s, mq, mk, mv, mg, mb, mw, mcu, mo, mh0, mht, mckpt, scale, T, N, n, h)

    # ------------------------------------------------------------------ math
    def math(self, s, mb, heads, bos, eos, chunks, scale):
        """FourRoles' math loop traced with an output-free config: its Gram forms M alone."""
        cfg = self.cfg
        self.cfg = dataclasses.replace(cfg, write_output=False)
        try:
            return FourRoles.math(self, s, mb, heads, bos, eos, chunks, scale)
        finally:
            self.cfg = cfg

    @cute.jit
    def math_inputs(self, s, st, i, chunks, heads, t0, eos, mtid):
        """RING_FULL of the chunk's stage (the copies scanned its gates and formed its norms),
        then the math warpgroup's barrier."""
        cute.arch.barrier(barrier_id=BAR_RING_FULL + i % RING, number_of_threads=PAIR_THREADS)
        cute.arch.barrier(barrier_id=BAR_MATH, number_of_threads=WG_THREADS)

    # ------------------------------------------------------------------ copies
    @cute.jit
    def stage_landed(self, s, r):
        """Once every copy thread's group of ring stage r landed: the norms (l2norm), the
        gate scan (warp 0), a barrier for both, the proxy fence, RING_FULL."""
        ctid = tid_in_loop() - COPY_TID0
        ring = self.ring_view(s, r)
        cute.arch.barrier(barrier_id=BAR_COPIES, number_of_threads=WG_THREADS)
        if cutlass.const_expr(self.cfg.use_l2norm):
            self.inverse_norms(ring, ctid)
        self.scan_gates_in_place(ring.g, ctid)
        cute.arch.barrier(barrier_id=BAR_COPIES, number_of_threads=WG_THREADS)
        cute.arch.fence_proxy("async.shared", space="cta")
        cute.arch.barrier_arrive(barrier_id=BAR_RING_FULL + r, number_of_threads=PAIR_THREADS)

    def while_loads_fly(self, s, i, t0, eos, cwid):
        """Chunk i's P into its operand set while its v and the next chunk's rows land:
        GramWgmma's stage traced with P_BLOCK columns and the "inverse" skip (its loop then
        runs P alone); nothing without an output. A plain method, traced inline."""
        if not self.cfg.write_output:
            return
        saved_n, saved_nb = self.gram_n, self.gram_buffers
        had_skip = "skip_stages" in vars(self)
        saved_skip = self.skip_stages
        self.gram_n, self.gram_buffers = P_BLOCK, P_BUFFERS
        self.skip_stages = (*saved_skip, "inverse")
        try:
            GramWgmma.stage_gram(self, self.chunk_views(s, i), None, None, t0, eos, self.p_scale, None,
                                 lane_in_loop(), cwid)
        finally:
            self.gram_n, self.gram_buffers = saved_n, saved_nb
            if had_skip:
                self.skip_stages = saved_skip
            else:
                del self.skip_stages
