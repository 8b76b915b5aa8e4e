"""FROST backward, kernel 1 (``states``): the forward chain again, keeping what the
backward needs instead of the output.

Grid, warps, stages and state registers are the pipelined forward's (FrostBwdStates derives from
FrostFwdPipelined); per chunk it writes
- the state entering the chunk, S^T [V, K] in bf16, to checkpoint row cu[n] // 64 + n + j
  (chunk j of sequence n; bwd_config.checkpoint_rows), and
- U = (I + M)^-1 (W0 - KBA S) [C, V] per token (bf16), the "new values" the chain and the
  gradients read,
S through the pipelined forward's store_state (16-byte stores after a quad exchange, fragment_stores.py), U
through a per-warp shared buffer in 16-byte stores where the plan has room
(gmem_vector_io; store_values_block's element stores otherwise), and skips the output
products (O = QA S + P U is not needed). No final state.
Sequence bounds are clamped into [0, T] (seq_bounds.py); warp 0 of the last sequence's
CTAs zeroes the gradient rows no sequence covers before the grads kernel runs.
"""
from __future__ import annotations

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32

from cudnn.linear_attention.frost.kernels.bwd_abi import FrostBwdLauncher
from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
from cudnn.linear_attention.frost.kernels import gmem_vector_io as vio
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.fwd_mma import (CHUNK, NBLK, SUB, allocate_smem, store_values_block,
                                                         to_a_operand, warp_mma)
from cudnn.linear_attention.frost.kernels.fwd_pipelined import FrostFwdPipelined
from cudnn.linear_attention.frost.kernels.fwd_pipelined import smem_plan as pipelined_smem_plan
from cudnn.linear_attention.frost.kernels.seq_bounds import (sequence_bounds, table_order,
                                                             zero_uncovered_rows)


def smem_plan(c: FrostFwdConfig):
    """The pipelined forward's tensors plus, where they fit (GDN; vector gates at K = 64), one store buffer per
    warp: U leaves in 16-byte stores (gmem_vector_io)."""
    return vio.with_warp_buffers(pipelined_smem_plan(c), c)


class FrostBwdStates(FrostBwdLauncher, FrostFwdPipelined):
    """Callable for cute.compile (bwd_abi's argument list)."""

    smem_plan = staticmethod(smem_plan)

    def __init__(self, cfg: FrostBwdConfig):
        super().__init__(cfg.fwd)
        self.bcfg = cfg
        # the class's own plan decides (values, deriving from this class, has another)
        self.staged = vio.has_warp_buffers(self.smem_plan(cfg.fwd))

    @cute.jit
    def launch_kernel(self, m, T: Int32, N: Int32, scale: Float32, stream: cuda.CUstream):
        self.states_kernel(m.q, m.k, m.v, m.g, m.beta, m.w, m.cu_seqlens, m.initial_state, m.ckpt, m.u,
                           scale, T, N, m.dq, m.dk, m.dv, m.dg, m.dbeta, m.dw).launch(
            grid=[N, self.cfg.HO, 1], block=[self.threads, 1, 1], stream=stream)

    @cute.kernel
    def states_kernel(self, mq: cute.Tensor, mk: cute.Tensor, mv: cute.Tensor, mg: cute.Tensor,
                      mb: cute.Tensor, mw: cute.Tensor, mcu: cute.Tensor, mh0: cute.Tensor,
                      mckpt: cute.Tensor, mu: cute.Tensor, scale: Float32, T: Int32, N: Int32,
                      mdq: cute.Tensor, mdk: cute.Tensor, mdv: cute.Tensor, mdg: cute.Tensor,
                      mdb: cute.Tensor, mdw: cute.Tensor):
        c = self.cfg
        tid, _, _ = cute.arch.thread_idx()
        n, h, _ = cute.arch.block_idx()
        heads = c.heads_of(h)
        s = allocate_smem(self.smem_plan(c))
        mma = warp_mma()
        lane = cute.arch.lane_idx()
        wid = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        thr = mma.get_slice(lane)
        acc_s, coord_s = self.initial_state(mh0, n, h, thr, wid)
        bos, eos = sequence_bounds(mcu, n, T)  # inside [0, T] whatever cu_seqlens holds
        row0 = bos // CHUNK + n
        self.before_chunks(s, mq, mk, mv, mg, mb, mw, heads, bos, eos, tid, lane, wid)
        for t0 in cutlass.range(bos, eos, CHUNK):
            self.store_state(mckpt, row0 + (t0 - bos) // CHUNK, T // CHUNK + N, h, acc_s, coord_s, wid)
            self.stage_rows(s, mq, mk, mv, mg, mb, mw, heads, t0, eos, tid)
            cute.arch.sync_threads()
            self.stage_operands(s, mb, heads, t0, eos, scale, tid)
            cute.arch.sync_threads()
            self.stage_gram(s, mb, heads, t0, eos, scale, thr, lane, wid)
            cute.arch.sync_threads()
            self.stage_chain(s, mu, acc_s, coord_s, heads, t0, eos, thr, lane, wid)
            cute.arch.sync_threads()
        if n == N - 1 and wid == 0:
            self.zero_gradient_rows(mcu, T, N, mdq, mdk, mdv, mdg, mdb, mdw, h, lane)

    @cute.jit
    def zero_gradient_rows(self, mcu, T, N, mdq, mdk, mdv, mdg, mdb, mdw, h, lane):
        """Zeros into head h of every gradient row no sequence covers (seq_bounds.py), run
        by warp 0 of the last sequence's CTAs before the grads kernel writes the others:
        an unordered table zeroes every row (a chunk two sequences claim may be skipped)."""
        c = self.cfg
        gk = c.K if c.gate_per_channel else 1
        bk = c.K if c.beta_per_channel else 1
        first, last, ordered = table_order(mcu, N, T, lane)
        zero_uncovered_rows(mcu, N, T, mdq, h, 0, c.K, first, last, ordered, lane, True)
        zero_uncovered_rows(mcu, N, T, mdk, h, 0, c.K, first, last, ordered, lane, True)
        zero_uncovered_rows(mcu, N, T, mdv, h, 0, c.V, first, last, ordered, lane, True)
        zero_uncovered_rows(mcu, N, T, mdg, h, 0, gk, first, last, ordered, lane, True)
        zero_uncovered_rows(mcu, N, T, mdb, h, 0, bk, first, last, ordered, lane, True)
        if cutlass.const_expr(c.has_w):
            zero_uncovered_rows(mcu, N, T, mdw, h, 0, c.V, first, last, ordered, lane, True)

    @cute.jit
    def chunk_chain(self, s, mu, acc_s, coord_s, heads, t0, eos, thr, lane, wid):
        """The base forward's chain without the output: U (solve_u), then S^T <- S^T Diag(e^Gam_last) +
        U^T KD."""
        s_kdt = s.kdt
        K = self.cfg.K
        mma = warp_mma()
        a_u = self.solve_u(s, mu, acc_s, heads, t0, eos, thr, lane, wid)
        for e in cutlass.range_constexpr(cute.size(acc_s)):
            d = coord_s[e][1]
            acc_s[e] = acc_s[e] * self.state_decay(s, d)
        for bj in cutlass.range_constexpr(NBLK):
            b_kd = self.operand(thr, lane, cute.local_tile(s_kdt, (K, SUB), (0, bj)), False)
            cute.gemm(mma, acc_s, a_u[bj][None, None, 0], b_kd[None, None, 0], acc_s)

    @cute.jit
    def solve_u(self, s, mu, acc_s, heads, t0, eos, thr, lane, wid):
        """R^T = W0^T - S^T KBA^T for this warp's 16 value columns and the block solve for
        U^T, stored (bf16, rows < eos); returns U's blocks as A operands."""
        s_w0 = s.w0
        s_kba = s.kba
        s_mneg = s.mneg
        s_dinv = s.dinv
        K = self.cfg.K
        h = heads[3]
        mma = warp_mma()
        j0 = wid * SUB
        a_s = to_a_operand(acc_s, thr.partition_shape_A((SUB, K)))
        crd = thr.partition_C(cute.make_identity_tensor((SUB, SUB)))
        buf = None
        if cutlass.const_expr(self.staged):
            buf = vio.warp_buffer(s, self.cfg, wid, CHUNK, SUB)
        acc_r = []
        for bi in cutlass.range_constexpr(NBLK):
            r = cute.make_rmem_tensor(thr.partition_shape_C((SUB, SUB)), Float32)
            for e in cutlass.range_constexpr(cute.size(r)):
                jt = crd[e]
                r[e] = s_w0[bi * SUB + jt[1], j0 + jt[0]].to(Float32)
            b_kba = self.operand(thr, lane, cute.local_tile(s_kba, (SUB, K), (bi, 0)), False)
            for kk in cutlass.range_constexpr(K // 16):
                cute.gemm(mma, r, a_s[None, None, kk], b_kba[None, None, kk], r)
            acc_r.append(r)
        self.after_rhs_reads(s, heads, t0, eos, lane, wid)
        a_u = []
        for bi in cutlass.range_constexpr(NBLK):
            r = acc_r[bi]
            u = self.solve_block(mma, thr, lane, r, a_u, s_mneg, s_dinv, bi)
            if cutlass.const_expr(self.staged):
                vio.stage_tile(buf, u, crd, bi * SUB, 0, True)  # U^T block -> rows t
            else:
                store_values_block(mu, u, crd, t0 + bi * SUB, eos, h, j0)
        if cutlass.const_expr(self.staged):
            vio.flush_rows(buf, mu[None, h, None], t0, j0, eos - t0, lane, CHUNK, SUB)
        return a_u
