"""FROST backward, kernel 2, scalar gates, with the decays as per-token factors.

The product's GDN chain for bf16 inputs (FrostBwdConfig.chain_scaled, bwd.product_choice;
at K = V = 128 the four-role chain built on it; NOTES_bwd.md "The scalar-gate chain
without its operand stage", and "... on the H200": the chain kernel -12 %); it is the
wgmma chain with the update in flight (bwd_chain_wgmma.py, chain_async) in every other
respect.

The wgmma chain's operand stage writes three decay-folded bf16 tiles per chunk, QA^T and
-KBA^T [K, C] element by element (transposed 2-byte stores) and KD [C, K]. With a scalar
gate each decay is one number per token t, as in the forward (fwd_wgmma_scaled.py), so:

    dU^T  = dO^T P + (dS^T K^T) diag(fk)                    fk_t = e^(Gam_last - Gam_t)
    dS^T <- dS^T e^Gam_last + (dO^T diag(fo)) Q + (dR^T diag(fr)) K
                                                             fo_t = scale e^Gam_t,
                                                             fr_t = -beta_t e^Gam_t

The wgmma read q-hat and k-hat as the rows stage leaves them (SW128 tiles; the update reads
them as MN-major B operands [d, t]); the operand stage is the factor rows
(fwd_wgmma_scaled.write_decay_factors). dU^T is two groups, dS^T K^T first (scaled by fk in
the accumulator once it retires), then dO^T P onto it: the wgmma chain runs at 249
registers, with no room for a second accumulator. dO^T diag(fo) is made from the dO^T
fragment in registers (one bf16 rounding of dO fo, where the folded chain rounded q fo),
dR^T diag(fr) from the back substitution's fp32 blocks (chain_dr's col_scale). The dR
rows stored for the grads kernel are unscaled, as before. q and k are double-buffered by
chunk parity ((t0 / C) mod 2 alternates from chunk to chunk): the previous chunk's rows
are copied in while this chunk's update reads q-hat and k-hat.

bf16 io, scalar gates, sm_90a.
"""
from __future__ import annotations

from types import SimpleNamespace

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32
from cutlass.cute.nvgpu import warpgroup

from cudnn.linear_attention.frost.kernels import gmem_vector_io as vio
from cudnn.linear_attention.frost.kernels.bwd_chain import FrostBwdChain, _base_plan
from cudnn.linear_attention.frost.kernels.bwd_chain_wgmma import FrostBwdChainWgmma, check_block_order
from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.fwd_mma import CHUNK, NBLK, SUB, SW128, to_a_operand, warp_mma
from cudnn.linear_attention.frost.kernels.fwd_wgmma import (
    WG_ROWS,
    WG_THREADS,
    assemble_a,
    block_of,
    check_fragment_orders,
    wgmma,
)
from cudnn.linear_attention.frost.kernels.fwd_wgmma_scaled import FK, FO, FR, wgmma_mn, write_decay_factors

#: the wgmma chain's tiles this kernel replaces (the folded operands) or re-plans (q, k, P^T)
DROPPED = ("q", "k", "pt", "kd", "qat", "kbat")


def smem_plan(c: FrostFwdConfig):
    """q and k as [2C, K] SW128 tiles (chunk parity b: rows [C b, C b + C)), P^T [C, C]
    SW128, the serial chain's remaining tensors, the factor rows [3, C], then the per-warp
    dR buffers where they fit."""
    K, C = c.K, CHUNK
    tiles = [("q", "bf16", (2 * C, K), SW128), ("k", "bf16", (2 * C, K), SW128), ("pt", "bf16", (C, C), SW128)]
    rest = [entry for entry in _base_plan(c) if entry[0] not in DROPPED]
    return vio.with_warp_buffers(tiles + rest + [("fac", "f32", (3, C), (C, 1))], c)


class FrostBwdChainScaled(FrostBwdChainWgmma):
    """Callable for cute.compile (bwd_abi's argument list), as FrostBwdChainWgmma."""

    smem_plan = staticmethod(smem_plan)
    RAW_ROWS_SWIZZLED = True  # q and k staged raw into SW128 tiles (bf16 io only)

    def __init__(self, cfg: FrostBwdConfig):
        if not cfg.chain_scaled:
            raise ValueError("FrostBwdChainScaled: a chain config with chain_scaled set")
        if cfg.fwd.gate_per_channel or cfg.fwd.io_dtype != "bfloat16":
            raise ValueError(f"FrostBwdChainScaled: scalar gates and bf16 io, got gate_per_channel="
                             f"{cfg.fwd.gate_per_channel}, io {cfg.fwd.io_dtype}")
        super().__init__(cfg)
        self.staged = vio.has_warp_buffers(smem_plan(cfg.fwd))

    def chunk_tiles(self, s, t0):
        """s with q and k the tiles of the chunk starting at t0 (parity (t0 / C) mod 2 of the
        [2C, K] tiles kept in s.q2, s.k2). Traced inline."""
        K, C = self.cfg.K, CHUNK
        par = (t0 // C) % 2
        v = SimpleNamespace(**vars(s))
        v.q = cute.local_tile(s.q2, (C, K), (par, 0))
        v.k = cute.local_tile(s.k2, (C, K), (par, 0))
        return v

    # ------------------------------------------------------------------ staging
    @cute.jit
    def before_chunks(self, s, tid):
        """Keep the [2C, K] tiles (chunk_tiles), then the wgmma chain's P^T zeroing."""
        s.q2 = s.q
        s.k2 = s.k
        FrostBwdChainWgmma.before_chunks(self, s, tid)

    @cute.jit
    def prefetch_chunk(self, s, t0, eos, tid):
        FrostBwdChain.prefetch_chunk(self, self.chunk_tiles(s, t0), t0, eos, tid)

    @cute.jit
    def stage_rows(self, s, mq, mk, mv, mg, mb, mw, heads, t0, eos, tid):
        FrostBwdChain.stage_rows(self, self.chunk_tiles(s, t0), mq, mk, mv, mg, mb, mw, heads, t0, eos, tid)

    @cute.jit
    def stage_gram(self, s, mb, heads, t0, eos, scale, thr, lane, wid):
        """The wgmma chain's Gram stage (its proxy fence also covers the rows stage's q-hat
        and k-hat stores of the same threads, which the wgmma read) on this chunk's tiles."""
        FrostBwdChainWgmma.stage_gram(self, self.chunk_tiles(s, t0), mb, heads, t0, eos, scale, thr, lane, wid)

    @cute.jit
    def stage_operands(self, s, mb, heads, t0, eos, scale, tid):
        """The factor rows and e^Gam_last (read with generic loads: no proxy fence)."""
        write_decay_factors(s.g, s.beta, s.fac, s.alast, scale, tid)

    # ------------------------------------------------------------------ chain
    @cute.jit
    def chain(self, s, mdr, acc_ds, coord, heads, t0, eos, thr, lane, wid):
        """dU^T (dS^T K^T scaled, then dO^T P onto it), dR^T per warp, the dS^T update with
        the scaled A operands and q-hat, k-hat as its B (module docstring)."""
        s = self.chunk_tiles(s, t0)
        s_fac = s.fac
        K, C = self.cfg.K, CHUNK
        mma = warp_mma()
        wg_du = wgmma(C)  # dU^T: N = C, B = k-hat [t, d] and P^T, K-major
        wg_st = wgmma_mn(K)  # the dS^T update: N = K, B = q-hat, k-hat seen as [d, t]
        check_fragment_orders(wg_du, mma, C)
        check_fragment_orders(wg_st, mma, K)
        check_block_order(wg_du, mma, C)
        check_block_order(wg_st, mma, K)
        wtid = (wid % (WG_THREADS // 32)) * 32 + lane
        g_du = wg_du.get_slice(wtid)
        g_st = wg_st.get_slice(wtid)
        per = cute.size(thr.partition_shape_C((SUB, SUB)))
        crd = thr.partition_C(cute.make_identity_tensor((SUB, SUB)))  # (value row j, token in block)

        # 1. dS^T K^T (group 1; dS^T's decay and the dO^T fragment load meanwhile), scaled by
        # fk per token, then dO^T P onto it (group 2)
        acc_du = cute.make_rmem_tensor(g_du.partition_shape_C((WG_ROWS, C)), Float32)
        a_ds = to_a_operand(acc_ds, g_du.partition_shape_A((WG_ROWS, K)))
        b_k = wg_du.make_fragment_B(g_du.partition_B(s.k))
        warpgroup.fence()
        for kk in cutlass.range_constexpr(K // 16):
            wg_du.set(warpgroup.Field.ACCUMULATE, kk != 0)
            cute.gemm(wg_du, acc_du, a_ds[None, None, kk], b_k[None, None, kk], acc_du)
        warpgroup.commit_group()
        self.chain_decay(s, acc_ds, coord)
        a_do = self.chain_do(s, thr, lane, wid)
        a_dow = assemble_a([a_do[None, None, kk] for kk in range(NBLK)], g_st.partition_shape_A((WG_ROWS, C)))
        warpgroup.wait_group(0)
        for bi in cutlass.range_constexpr(NBLK):
            for e in cutlass.range_constexpr(per):
                acc_du[bi * per + e] = acc_du[bi * per + e] * s_fac[FK, bi * SUB + crd[e][1]]
        b_p = wg_du.make_fragment_B(g_du.partition_B(s.pt))
        wg_du.set(warpgroup.Field.ACCUMULATE, True)
        warpgroup.fence()
        for kk in cutlass.range_constexpr(C // 16):
            cute.gemm(wg_du, acc_du, a_dow[None, None, kk], b_p[None, None, kk], acc_du)
        warpgroup.commit_group()
        # dO^T diag(fo), the update's first A operand, while dO^T P runs (a new tensor: the
        # group still reads a_dow)
        crd_a = thr.partition_A(cute.make_identity_tensor((SUB, C)))
        a_dof = cute.make_rmem_tensor(a_do.shape, BFloat16)
        for e in cutlass.range_constexpr(cute.size(a_do)):
            a_dof[e] = (a_do[e].to(Float32) * s_fac[FO, crd_a[e][1]]).to(BFloat16)
        a_dofw = assemble_a([a_dof[None, None, kk] for kk in range(NBLK)], g_st.partition_shape_A((WG_ROWS, C)))
        warpgroup.wait_group(0)

        # 2. dR^T per warp (mma.sync), and dR^T diag(fr) for the update
        du_blocks = [block_of(acc_du, bi, thr.partition_shape_C((SUB, SUB))) for bi in range(NBLK)]
        _, a_drs = self.chain_dr(s, mdr, du_blocks, heads, t0, eos, thr, lane, wid, False,
                                 col_scale=s_fac[FR, None])
        a_drw = assemble_a(a_drs, g_st.partition_shape_A((WG_ROWS, C)))

        # 3. dS^T += (dO^T diag(fo)) Q + (dR^T diag(fr)) K, into the dS^T registers
        acc_w = cute.make_tensor(acc_ds.iterator, cute.make_layout(g_st.partition_shape_C((WG_ROWS, K))))
        q_dt = cute.make_tensor(s.q.iterator, cute.select(s.q.layout, mode=[1, 0]))  # [d, t]
        k_dt = cute.make_tensor(s.k.iterator, cute.select(s.k.layout, mode=[1, 0]))
        b_q = wg_st.make_fragment_B(g_st.partition_B(q_dt))
        b_kt = wg_st.make_fragment_B(g_st.partition_B(k_dt))
        wg_st.set(warpgroup.Field.ACCUMULATE, True)
        warpgroup.fence()
        for bi in cutlass.range_constexpr(NBLK):
            cute.gemm(wg_st, acc_w, a_dofw[None, None, bi], b_q[None, None, bi], acc_w)
            cute.gemm(wg_st, acc_w, a_drw[None, None, bi], b_kt[None, None, bi], acc_w)
        warpgroup.commit_group()
        if cutlass.const_expr(self.staged):
            self.flush_dr(s, mdr, heads, t0, eos, lane, wid)
        if cutlass.const_expr(not self.bcfg.chain_async):
            warpgroup.wait_group(0)
