"""The four-role GDN forward with the raw q / k rows by tensor-memory copies: experiment
kernels of the test tooling (frost_fwd_experiments.py knobs decay="wyc-ws4tma" and, with
v in the ring as frost_fwd_v_ahead.py has it, by 1D bulk copies, "wyc-ws4tmava").

The product's copy warpgroup (fwd_ws4.RawRing.copies) brings a chunk's raw q and k rows
into their SW128 ring stage by 16-byte cp.async: 16 per thread and chunk, each with its
own address arithmetic and a bounds branch (the copies' SASS is a third branches), on the
same four schedulers the chain and math warps issue from. Here one warp of the copy
warpgroup issues four tensor-memory copies per chunk instead (a 64-token x 64-channel box
per SW128 atom column, q and k), armed on one mbarrier with the stage's 32 KB; the gate
and beta rows and v keep the product's cp.async. The copies still wait for everything to
land before they arrive on RING_FULL, so the hand-over with math and the chain is the
product's: what changes is the copies' instruction stream and how the rows travel.

Rows past the sequence's end: a box starts at the chunk's first token and always moves 64
rows, so in a sequence's last chunk it brings the next sequence's rows (zeros only past
T); the copies zero those rows of q and k after the mbarrier wait, before the stage's
norms and proxy fence, as the product's copies write zeros there.

TmaVAhead: frost_fwd_v_ahead.VAhead's copies (v a ring stage's, copied with its chunk's
rows; FULL for chunk c arrived at the top of iteration c) with everything but the gate and
beta rows asynchronous: the q / k boxes and one cp.async.bulk per v row (256 bytes, into
the padded W0 stage) on the same mbarrier, the rows at or past eos zeroed by the lanes of
the issuing warp instead.

Descriptors: encoded by the compiled launcher on every call from the pointers and T it is
given (the launch ABI is unchanged: kernels/NOTES.md "TMA rows and the launch ABI", option
(a)); the kernel takes the two copy atoms as extra parameters (kernel_tma), the product's
kernel signature is untouched.
"""
from __future__ import annotations

from types import SimpleNamespace

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32, Int32
from cutlass.cute.nvgpu import cpasync
from cutlass.experimental.primitives import cp_async_bulk_shared_cluster_global as bulk_copy

from cudnn.linear_attention.frost.kernels import bulk_rows
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.fwd_mma import CHUNK, VEC, allocate_smem, sw128_layout
from cudnn.linear_attention.frost.kernels.fwd_wgmma import WG_THREADS
from cudnn.linear_attention.frost.kernels.fwd_wgmma_gram import tid_in_loop
from cudnn.linear_attention.frost.kernels.fwd_ws4 import (
    BAR_COPIES,
    COPY_TID0,
    COPY_WARP0,
    RING,
    RawRingInChain,
    ring_smem_plan_in_chain,
)
from cudnn.linear_attention.frost.kernels.seq_bounds import zero_uncovered_heads
from frost_fwd_v_ahead import VAhead, v_ring_smem_plan


def tma_smem_plan(c: FrostFwdConfig):
    """The product's plan and the copies' mbarrier after it (the tiles keep their offsets)."""
    return ring_smem_plan_in_chain(c) + [bulk_rows.MBARRIER]


def token_major(m: cute.Tensor) -> cute.Tensor:
    """A [T, heads, D] row tensor seen as (T, D, heads): the box modes first, the head as
    the rest mode (frost_tma_rows_probe's view)."""
    return cute.make_tensor(m.iterator, cute.select(m.layout, mode=[0, 2, 1]))


class TmaRows(RawRingInChain):
    """RawRingInChain with q and k by tensor-memory copies (module docstring)."""

    smem_plan = staticmethod(tma_smem_plan)

    # ------------------------------------------------------------------ host side
    def kernel(self, mq, mk, mv, mg, mb, mw, mcu, mo, mh0, mht, mckpt, mu, scale, T, N):
        """Called where the launcher (traced on the host) calls the device kernel: q's and
        k's copy atoms over the whole [T, heads, K] tensors, then kernel_tma with them. A
        plain method; what it returns is launched by the caller as the kernel would be."""
        K = self.cfg.K
        box = sw128_layout((CHUNK, K))
        aq, tq = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), token_major(mq), box, (CHUNK, K))
        ak, tk = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), token_major(mk), box, (CHUNK, K))
        return self.kernel_tma(mq, mk, mv, mg, mb, mw, mcu, mo, mh0, mht, mckpt, mu, scale, T, N, aq, tq, ak, tk)

    @cute.kernel
    def kernel_tma(self, mq: cute.Tensor, mk: cute.Tensor, mv: cute.Tensor, mg: cute.Tensor, mb: cute.Tensor,
                   mw: cute.Tensor, mcu: cute.Tensor, mo: cute.Tensor, mh0: cute.Tensor, mht: cute.Tensor,
                   mckpt: cute.Tensor, mu: cute.Tensor, scale: Float32, T: Int32, N: Int32, aq: cute.CopyAtom,
                   tq: cute.Tensor, ak: cute.CopyAtom, tk: cute.Tensor):
        """fwd_mma.FrostFwdMma.kernel with the copy atoms kept beside the shared tiles."""
        c = self.cfg
        n, h, _ = cute.arch.block_idx()
        s = allocate_smem(self.smem_plan(c))
        s.values = mu
        s.tma = SimpleNamespace(q=(aq, tq), k=(ak, tk))
        if cutlass.const_expr("bounds" in self.skip_stages or not c.write_output):  # no zeroing row
            self.sequence(s, mq, mk, mv, mg, mb, mw, mcu, mo, mh0, mht, mckpt, scale, T, N, n, h)
        else:
            if h < c.HO:
                self.sequence(s, mq, mk, mv, mg, mb, mw, mcu, mo, mh0, mht, mckpt, scale, T, N, n, h)
            else:  # the grid's zeroing row, as the product's
                lane = cute.arch.lane_idx()
                wid = cute.arch.make_warp_uniform(cute.arch.warp_idx())
                if wid == 0:
                    zero_uncovered_heads(mcu, N, T, mo, c.HO, c.V, n, N, lane)

    # ------------------------------------------------------------------ device side
    def box_copies(self, s, bos):
        """(atom, source boxes by chunk, ring stages) of q (where the output is written) and
        k: the sequence's chunk j's box starts at token bos + 64 j. Traced inline."""
        K = self.cfg.K
        hq, hk = s.gmem.heads[0], s.gmem.heads[1]
        parts = []
        for (atom, coords), tile, head, used in ((s.tma.q, s.q, hq, self.cfg.write_output), (s.tma.k, s.k, hk, True)):
            if used:
                boxes = cute.local_tile(cute.domain_offset((bos, 0, 0), coords), (CHUNK, K), (None, 0, head))
                stages = cute.local_tile(tile, (CHUNK, K), (None, 0))
                dst, src = cpasync.tma_partition(atom, 0, cute.make_layout(1), cute.group_modes(stages, 0, 2),
                                                 cute.group_modes(boxes, 0, 2))
                parts.append((atom, src, dst))
        return parts

    def chunk_of(self, s, t0):
        """The sequence's chunk index of the chunk starting at t0 (s.bos: copies'). Traced
        inline."""
        return (t0 - s.bos) // CHUNK

    @cute.jit
    def copy_ring_rows(self, s, r, t0, eos):
        """Chunk t0's q and k boxes into ring stage r on the mbarrier (the copy warpgroup's
        first warp as a whole: the copies elect their lane, so no divergent-warp path), its
        gate and beta rows by cp.async (committed)."""
        if cute.arch.make_warp_uniform(cute.arch.warp_idx()) == COPY_WARP0:
            parts = self.box_copies(s, s.bos)
            with cute.arch.elect_one():
                cute.arch.mbarrier_arrive_and_expect_tx(s.mbar.iterator, len(parts) * CHUNK * self.cfg.K * 2)
            for atom, src, dst in parts:
                cute.copy(atom, src[None, self.chunk_of(s, t0)], dst[None, r], tma_bar_ptr=s.mbar.iterator)
        self.as_role(WG_THREADS, self.copy_gate_beta_rows, self.ring_view(s, r), t0, eos, tid_in_loop() - COPY_TID0)
        cute.arch.cp_async_commit_group()

    @cute.jit
    def rows_landed(self, s, r, t0, eos):
        """Wait for chunk t0's boxes (the mbarrier's phase j for the sequence's chunk j: one
        load in flight at a time), then zero stage r's rows at or past eos (the next
        sequence's) in q and k."""
        cute.arch.mbarrier_wait(s.mbar.iterator, self.chunk_of(s, t0) % 2)
        if eos - t0 < CHUNK:
            ctid = tid_in_loop() - COPY_TID0
            per_row = self.cfg.K // VEC
            zero = cute.make_rmem_tensor((VEC,), BFloat16)
            zero.fill(0.0)
            stage = self.ring_view(s, r)
            for u in cutlass.range_constexpr(CHUNK * per_row // WG_THREADS):
                row = (ctid + u * WG_THREADS) // per_row
                cv = (ctid + u * WG_THREADS) % per_row
                if t0 + row >= eos:
                    cute.autovec_copy(zero, cute.local_tile(stage.k[row, None], (VEC,), (cv,)))
                    if cutlass.const_expr(self.cfg.write_output):
                        cute.autovec_copy(zero, cute.local_tile(stage.q[row, None], (VEC,), (cv,)))

    def ring_rows_landed(self, s, r, t0, eos):
        """The mbarrier's phase and the zeros past eos, then the product's stage_landed.
        Traced inline."""
        self.rows_landed(s, r, t0, eos)
        self.stage_landed(s, r)

    def copies_setup(self, s, bos, eos):
        """The copies' own warp-uniform chunk count (the caller's, made before the roles
        split, lost its uniform register to the TMA issue's and was spilled in the training
        build), the sequence's first token kept for the chunk indices, and the mbarrier,
        the copies' alone: initialised here and published by their own barrier (set up
        before the roles split, it cost the training build spilled registers). Traced
        inline; returns the chunk count."""
        s.bos = bos
        bulk_rows.init_mbarrier(s.mbar.iterator, tid_in_loop() - COPY_TID0)
        cute.arch.barrier(barrier_id=BAR_COPIES, number_of_threads=WG_THREADS)
        return cute.arch.make_warp_uniform((eos - bos + CHUNK - 1) // CHUNK)

    @cute.jit
    def copies(self, s, bos, eos, chunks):
        """fwd_ws4.RawRing.copies over this class's copy_ring_rows / ring_rows_landed."""
        RawRingInChain.copies(self, s, bos, eos, self.copies_setup(s, bos, eos))


def tma_v_ring_smem_plan(c: FrostFwdConfig):
    """frost_fwd_v_ahead's plan (W0 RING chunks tall) and the copies' mbarrier after it."""
    return v_ring_smem_plan(c) + [bulk_rows.MBARRIER]


class TmaVAhead(TmaRows, VAhead):
    """VAhead with q / k by tensor-memory copies and v by bulk copies (module docstring)."""

    smem_plan = staticmethod(tma_v_ring_smem_plan)

    @cute.jit
    def issue_chunk(self, s, j, t0, eos, lane, cwid):
        """Chunk j (first token t0)'s q / k boxes and v rows (those before eos; the rest
        zeroed by their lanes) into ring stage j mod RING on the mbarrier, by the copy
        warpgroup's first warp as a whole; its gate and beta rows by cp.async
        (committed)."""
        C, V = CHUNK, self.cfg.V
        r = j % RING
        # the warp-uniform warp index, not cwid: a branch on a value the compiler cannot
        # prove uniform gets a divergent-warp copy of the TMA issue (16 UTMALDG, WARPSYNC)
        if cute.arch.make_warp_uniform(cute.arch.warp_idx()) == COPY_WARP0:
            parts = self.box_copies(s, s.bos)
            rows = cutlass.min(eos - t0, C)
            with cute.arch.elect_one():
                cute.arch.mbarrier_arrive_and_expect_tx(s.mbar.iterator,
                                                        len(parts) * C * self.cfg.K * 2 + rows * V * 2)
            for atom, src, dst in parts:
                cute.copy(atom, src[None, j], dst[None, r], tma_bar_ptr=s.mbar.iterator)
            w0 = self.chunk_views(s, j).w0
            hv = s.gmem.heads[2]
            with cute.arch.elect_one():
                for row in cutlass.range(C, unroll=4):
                    if row < rows:
                        bulk_copy(w0[row, None].iterator, s.gmem.v[t0 + row, hv, None].iterator, s.mbar.iterator,
                                  V * 2)
            zero = cute.make_rmem_tensor((VEC,), BFloat16)
            zero.fill(0.0)
            for half in cutlass.range_constexpr(C // 32):
                row = half * 32 + lane
                if row >= rows:  # lane: the caller's lane_in_loop
                    for cv in cutlass.range_constexpr(V // VEC):
                        cute.autovec_copy(zero, cute.local_tile(w0[row, None], (VEC,), (cv,)))
        self.as_role(WG_THREADS, self.copy_gate_beta_rows, self.ring_view(s, r), t0, eos, tid_in_loop() - COPY_TID0)
        cute.arch.cp_async_commit_group()

    @cute.jit
    def chunk_landed(self, s, j, t0, eos):
        """Chunk j (first token t0)'s cp.async group and mbarrier phase waited for, q / k
        past eos zeroed, then the stage's norms, fence and RING_FULL (stage_landed)."""
        cute.arch.cp_async_wait_group(0)
        self.ring_rows_landed(s, j % RING, t0, eos)

    @cute.jit
    def copies(self, s, bos, eos, chunks):
        """VAhead's loop over this class's issue_chunk / chunk_landed (TmaRows.copies_setup
        first)."""
        VAhead.copies(self, s, bos, eos, self.copies_setup(s, bos, eos))
