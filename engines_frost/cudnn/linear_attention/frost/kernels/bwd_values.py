"""FROST backward, kernel 1 with forward checkpoints (``values``): U of every chunk at once.

When the backward node carries the forward's state_checkpoints (cadence 64), the state S
entering each chunk is already known, so the serial recompute of kernel 1 (``states``,
grid N x HO, one chunk after another) is not needed: U = (I + M)^-1 (W0 - KBA S) of a chunk
depends only on that chunk's rows and its S. Grid (T // 64 + N, HO) like ``grads``, one
chunk per CTA, found the way grads finds it (bwd_grads.FrostBwdGrads.find_chunk: the
backward's workspace row rho = cu[n] // 64 + n + j; rows between sequences exit); S comes
from the checkpoint's packed row (checkpoints.py, checkpoints_dsl.checkpoint_row) into the
state registers, then the states kernel's stages run once: staged rows (the pipelined forward's cp.async
copies, without the next-chunk prefetch), operands, Gram and inverses, and
FrostBwdStates.solve_u, which writes U (bf16, per token). No state update, no
checkpoint write: the workspace has no state region on this path. Sequence bounds are
clamped (seq_bounds.py) and, in the states kernel's place, warp 0 of the last row's CTA
of each head zeroes the gradient rows no sequence covers before grads runs.
"""
from __future__ import annotations

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32

from cudnn.linear_attention.frost.kernels import gmem_vector_io as vio
from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
from cudnn.linear_attention.frost.kernels.bwd_grads import FrostBwdGrads
from cudnn.linear_attention.frost.kernels.bwd_states import FrostBwdStates
from cudnn.linear_attention.frost.kernels.checkpoints_dsl import checkpoint_row
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.fwd_mma import CHUNK, SUB, allocate_smem, warp_mma
from cudnn.linear_attention.frost.kernels.fwd_pipelined import smem_plan as pipelined_smem_plan
from cudnn.linear_attention.frost.kernels.seq_bounds import sequence_bounds


def smem_plan(c: FrostFwdConfig):
    """The pipelined forward's shared tensors plus the (sequence, chunk) of the CTA, and the states kernel's
    per-warp store buffers for U where they fit (gmem_vector_io)."""
    return vio.with_warp_buffers(pipelined_smem_plan(c) + [("seq", "i32", (2,), (1,))], c)


class FrostBwdValues(FrostBwdStates):
    """Callable for cute.compile (bwd_abi's argument list): the states kernel's stages on
    one chunk per CTA, its state read from the forward's checkpoint."""

    smem_plan = staticmethod(smem_plan)

    def __init__(self, cfg: FrostBwdConfig):
        if not cfg.checkpoints:
            raise ValueError("FrostBwdValues reads the forward's checkpoints: the config must have checkpoints=True")
        super().__init__(cfg)

    @cute.jit
    def launch_kernel(self, m, T: Int32, N: Int32, scale: Float32, stream: cuda.CUstream):
        self.values_kernel(m.q, m.k, m.v, m.g, m.beta, m.w, m.cu_seqlens, m.ckpt, m.u, N, scale, T,
                           m.dq, m.dk, m.dv, m.dg, m.dbeta, m.dw).launch(
            grid=[T // CHUNK + N, self.cfg.HO, 1], block=[self.threads, 1, 1], stream=stream)

    @cute.kernel
    def values_kernel(self, mq: cute.Tensor, mk: cute.Tensor, mv: cute.Tensor, mg: cute.Tensor,
                      mb: cute.Tensor, mw: cute.Tensor, mcu: cute.Tensor, mckpt: cute.Tensor,
                      mu: cute.Tensor, N: Int32, scale: Float32, T: Int32, mdq: cute.Tensor,
                      mdk: cute.Tensor, mdv: cute.Tensor, mdg: cute.Tensor, mdb: cute.Tensor,
                      mdw: cute.Tensor):
        c = self.cfg
        K = c.K
        tid, _, _ = cute.arch.thread_idx()
        rho, h, _ = cute.arch.block_idx()
        lane = cute.arch.lane_idx()
        wid = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        s = allocate_smem(self.smem_plan(c))
        FrostBwdGrads.find_chunk(self, s, mcu, N, T, rho, tid)
        cute.arch.sync_threads()
        n = s.seq[0]
        if n >= 0:
            bos, eos = sequence_bounds(mcu, n, T)  # inside [0, T] whatever cu_seqlens holds
            j = rho - (bos // CHUNK + n)
            t0 = bos + j * CHUNK
            heads = c.heads_of(h)
            mma = warp_mma()
            thr = mma.get_slice(lane)
            row = checkpoint_row(mcu, n, j, T, N, lane)
            acc_s = cute.make_rmem_tensor(thr.partition_shape_C((SUB, K)), Float32)
            coord_s = thr.partition_C(cute.make_identity_tensor((SUB, K)))
            for e in cutlass.range_constexpr(cute.size(acc_s)):
                jd = coord_s[e]
                acc_s[e] = mckpt[row, h, wid * SUB + jd[0], jd[1]].to(Float32)
            self.before_chunks(s, mq, mk, mv, mg, mb, mw, heads, t0, eos, tid, lane, wid)
            self.stage_rows(s, mq, mk, mv, mg, mb, mw, heads, t0, eos, tid)
            cute.arch.sync_threads()
            self.stage_operands(s, mb, heads, t0, eos, scale, tid)
            cute.arch.sync_threads()
            self.stage_gram(s, mb, heads, t0, eos, scale, thr, lane, wid)
            cute.arch.sync_threads()
            self.solve_u(s, mu, acc_s, heads, t0, eos, thr, lane, wid)
        # as the states kernel does in its place: the gradient rows no sequence covers are
        # zeroed (one warp per head, the last row's CTA) before the grads kernel runs
        if rho == T // CHUNK + N - 1 and wid == 0:
            self.zero_gradient_rows(mcu, T, N, mdq, mdk, mdv, mdg, mdb, mdw, h, lane)

    @cute.jit
    def after_rhs_reads(self, s, heads, t0, eos, lane, wid):
        """One chunk per CTA: no next chunk to prefetch (the pipelined forward would start its v copies)."""
        pass
