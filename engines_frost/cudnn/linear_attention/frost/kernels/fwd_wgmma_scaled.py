"""FROST forward, wgmma layer for scalar gates (GDN) without the operand stage: the
product's GDN chain.

compile_kernel.product_decay picks it for every wgmma-layer GDN build (plain, training, output-free;
the H200's kernel time 6 % below the folded chain's, NOTES.md "The scalar-gate forwards on
the H200"); the test and bench tooling builds the folded chain for an A/B (knob
decay="folded", environment FROST_FWD_DECAY) and the variants below (decay="scaled-lead").

With a scalar gate every decay the chain needs is one number per token t, so it can scale
the chain's fp32 results instead of being folded into bf16 copies of q and k:

    R^T = W0^T + S^T KBA^T       = W0^T + (S^T K^T) diag(fr),  fr_t = -beta_t e^Gam_t
    O^T = S^T QA^T + U^T P^T     = (S^T Q^T) diag(fo) + U^T P^T, fo_t = scale e^Gam_t
    S^T <- S^T e^Gam_last + U^T KD = S^T e^Gam_last + (U^T diag(fk)) K, fk_t = e^(Gam_last - Gam_t)

so the wgmma read q-hat and k-hat themselves (the rows stage's bf16 tiles, staged in the
128-byte swizzled layout; the state update reads k-hat as an MN-major B operand, the same
bytes), and the pipelined layer's operand stage (QA, KBA, KD^T: 2 x 16 + 16 KB of bf16 stores and a
transpose per chunk, ~0.9 us of the ~5.7 us GDN chunk) shrinks to the three factor rows
fr, fo, fk (64 threads, one exp each) and e^Gam_last. The chain gains the scaling: R
from X = S^T K^T after its wgmma group retires (one FFMA per value, W0 read as before),
O scaled before P U accumulates onto it (the O group is waited for after the solve,
where it has long finished), and U^T diag(fk) as a second bf16 A operand built from the
solve's fp32 blocks (16 registers). Every factor is <= 1 (Gam is a non-increasing
prefix sum of log gates), as in the folded operands.

The chain's wgmma read q and k while the next chunk's rows are copied in (the pipelined
layer's prefetch, issued once R and O are committed), so q and k are double-buffered: two [C, K] SW128
tiles each, chunk i of a sequence on tile i mod 2 (chunk_tiles). The gate and beta rows
stay single: the factors are made from them before the chain, and the Gram stage, their
other reader, ends before it. Shared memory at K = V = 128: 106 KiB (the wgmma layer's GDN plan:
124 KiB).

ScaledDecayLeadChain (knob decay="scaled-lead") also double-buffers W0, the gates and beta
(GDN: +17 KiB, 124 KiB in all) and copies chunk c + 1's rows at the start of chunk c's
operand stage, as soon as chunk c - 1's readers of those tiles are done (the state
update, retired by settle_state before the barrier that stage follows): the copies get
the operand, Gram and chain stages (~4-5 us) to land instead of the chain alone (~2 us),
where the chunk's closing barrier waited on them (3.5 % of the plain forward's samples,
5.5 % of the training forward's: NOTES.md), and the chain issues no copies at all.

bf16 io only (q and k are staged raw as bf16 into swizzled tiles: io_view keeps the
swizzle), scalar gates only, sm_90a only (the wgmma layer's). Plain, training
(checkpoints, U) and output-free builds: the same switches as the wgmma layer's chain.
"""
from __future__ import annotations

import functools
from types import SimpleNamespace

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Float32
from cutlass.cute.nvgpu import OperandMajorMode, warpgroup

from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.kernels.fwd_mma import CHUNK, NBLK, SUB, SW128, store_values_block, to_a_operand, \
    warp_mma
from cudnn.linear_attention.frost.kernels.fwd_pipelined import FrostFwdPipelined
from cudnn.linear_attention.frost.kernels.fwd_pipelined import smem_plan as pipelined_smem_plan
from cudnn.linear_attention.frost.kernels.fwd_wgmma import (
    WG_ROWS,
    WG_THREADS,
    FrostFwdWgmma,
    assemble_a,
    block_of,
    check_fragment_orders,
    store_output_rows,
    wgmma,
)

#: the pipelined layer's tiles this kernel does not have (the folded operands) or re-plans (q, k, P)
DROPPED = ("q", "k", "qa", "kba", "kdt", "p")
#: rows of the per-token factor tile "fac"
FR, FO, FK = 0, 1, 2


#: the pipelined layer's row tiles ScaledDecayLeadChain double-buffers as well (chunk parity, like q and k)
LEAD_ROWS = ("w0", "g", "beta")


def smem_plan(c: FrostFwdConfig, lead: bool = False):
    """q and k as two [C, K] SW128 tiles each (rows [C i, C i + C) of a [2C, K] tile: chunk
    parity i), P [C, C] SW128, the pipelined layer's remaining tiles, and the factor rows fr, fo, fk [3, C];
    with `lead` the LEAD_ROWS tiles twice as tall the same way."""
    K, C = c.K, CHUNK
    tiles = [("q", "bf16", (2 * C, K), SW128), ("k", "bf16", (2 * C, K), SW128), ("p", "bf16", (C, C), SW128)]
    rest = []
    for name, dtype, shape, stride in pipelined_smem_plan(c):
        if name in DROPPED:
            continue
        if lead and name in LEAD_ROWS:
            shape = (2 * shape[0], *shape[1:])
        rest.append((name, dtype, shape, stride))
    return tiles + rest + [("fac", "f32", (3, C), (C, 1))]


def smem_plan_lead(c: FrostFwdConfig):
    return smem_plan(c, lead=True)


@cute.jit
def write_decay_factors(s_g, s_beta, s_fac, s_alast, scale, tid):
    """The chunk's per-token factors from its scanned scalar gates s_g [C, 1] and beta:
    s_fac[FR, t] = -beta_t e^Gam_t, s_fac[FO, t] = scale e^Gam_t, s_fac[FK, t] =
    e^(Gam_last - Gam_t), and s_alast[0] = e^Gam_last; threads 0 .. C-1, a row each. The
    forward's and the backward chain's (bwd_chain_scaled.py) one home."""
    if tid < CHUNK:
        gam = s_g[tid, 0]
        last = s_g[CHUNK - 1, 0]
        a = cute.arch.exp(gam)
        s_fac[FR, tid] = -(s_beta[tid] * a)
        s_fac[FO, tid] = a * scale
        s_fac[FK, tid] = cute.arch.exp(last - gam)
        if tid == 0:
            s_alast[0] = cute.arch.exp(last)


def wgmma_mn(n: int):
    """The wgmma layer's chain MMA (m64 n k16, A from registers) with B MN-major: the state update reads
    k-hat [t, d] (d contiguous) as B [N = d, K = t]."""
    op = warpgroup.MmaF16BF16Op(BFloat16, Float32, (WG_ROWS, n, 16), warpgroup.OperandSource.RMEM,
                                OperandMajorMode.K, OperandMajorMode.MN)
    return cute.make_tiled_mma(cute.make_mma_atom(op))


class ScaledDecayChain:
    """Mixin over a wgmma-layer class (FrostFwdWgmma or its training launchers): the scalar-gate chain
    with its decays as per-token factors (module docstring). Put first in the bases."""

    smem_plan = staticmethod(smem_plan)
    decay_scaled = True
    RAW_ROWS_SWIZZLED = True  # q and k staged raw into SW128 tiles (bf16 io only)
    #: True: the next chunk's rows are copied at the start of the operand stage into the
    #: other parity's tiles (ScaledDecayLeadChain); False: during the chain, as the wgmma layer
    rows_lead = False

    def __init__(self, cfg: FrostFwdConfig):
        if cfg.gate_per_channel or cfg.io_dtype != "bfloat16":
            raise ValueError(f"{type(self).__name__}: the scaled-decay chain is built for scalar gates and bf16 "
                             f"io, got gate_per_channel={cfg.gate_per_channel}, io {cfg.io_dtype}")
        super().__init__(cfg)

    def chunk_tiles(self, s, t0):
        """s with q and k (and with rows_lead W0, g, beta) the tiles of the chunk starting at
        token t0: chunk parity (t0 - bos) / C mod 2 of the double-height tiles kept in
        s.both. Traced inline."""
        C = CHUNK
        par = ((t0 - s.bos) // C) % 2
        v = SimpleNamespace(**vars(s))
        for name, both in s.both.items():
            if cute.rank(both.layout) == 1:
                setattr(v, name, cute.local_tile(both, (C,), (par,)))
            else:
                setattr(v, name, cute.local_tile(both, (C, both.shape[1]), (par, 0)))
        return v

    # ------------------------------------------ the base and pipelined layers' extension points
    @cute.jit
    def before_chunks(self, s, mq, mk, mv, mg, mb, mw, heads, bos, eos, tid, lane, wid):
        """Keep the [2C, K] tiles and bos (chunk_tiles), zero P above its diagonal blocks,
        then the pipelined layer's first-chunk staging into the parity-0 tiles (its barrier orders both)."""
        s.both = {name: getattr(s, name) for name in ("q", "k", *(LEAD_ROWS if self.rows_lead else ()))}
        s.bos = bos
        FrostFwdWgmma.zero_p_above_diagonal(self, s, tid)
        first = self.chunk_tiles(s, bos)
        FrostFwdPipelined.before_chunks(self, first, mq, mk, mv, mg, mb, mw, heads, bos, eos, tid, lane, wid)
        s.gmem = first.gmem

    @cute.jit
    def prefetch_next_rows(self, s, t0, eos, lane, wid):
        """The pipelined layer's prefetch of the next chunk's rows, into the other parity's q and k tiles
        (rows_lead: none here, copy_next_chunk_rows issued them)."""
        if cutlass.const_expr(not self.rows_lead):
            if t0 + CHUNK < eos:
                self.prefetch_rows(self.chunk_tiles(s, t0 + CHUNK), t0 + CHUNK, eos, wid * 32 + lane)
                cute.arch.cp_async_commit_group()

    @cute.jit
    def after_rhs_reads(self, s, heads, t0, eos, lane, wid):
        """The pipelined layer's copy of the next chunk's v into this warp's W0 columns (rows_lead: none, the
        operand stage copied it into the other W0 tile)."""
        if cutlass.const_expr(not self.rows_lead):
            FrostFwdPipelined.after_rhs_reads(self, s, heads, t0, eos, lane, wid)

    @cute.jit
    def copy_next_chunk_rows(self, s, t0, eos, tid):
        """rows_lead: chunk t0 + C's q, k, gates, beta and v into the other parity's tiles,
        one committed group (the chain's closing cp.async wait retires it)."""
        if t0 + CHUNK < eos:
            nxt = self.chunk_tiles(s, t0 + CHUNK)
            self.prefetch_rows(nxt, t0 + CHUNK, eos, tid)
            self.prefetch_v(nxt, t0 + CHUNK, eos, cute.arch.lane_idx(),
                            cute.arch.make_warp_uniform(cute.arch.warp_idx()))
            cute.arch.cp_async_commit_group()

    @cute.jit
    def stage_rows(self, s, mq, mk, mv, mg, mb, mw, heads, t0, eos, tid):
        """The pipelined layer's rows stage on this chunk's tiles."""
        FrostFwdPipelined.stage_rows(self, self.chunk_tiles(s, t0), mq, mk, mv, mg, mb, mw, heads, t0, eos, tid)

    @cute.jit
    def stage_operands(self, s, mb, heads, t0, eos, scale, tid):
        """What is left of the operand stage: the factor rows fr, fo, fk and e^Gam_last
        (threads 0 .. C-1, a row each), then the wgmma layer's proxy fence, now for the rows stage's
        q-hat and k-hat stores, which the chain's wgmma read. rows_lead: first the copies of
        the next chunk's rows (the other parity's tiles are free: their last reader, the
        previous chunk's state update, retired before this stage's barrier)."""
        if cutlass.const_expr(self.rows_lead):
            self.copy_next_chunk_rows(s, t0, eos, tid)
        self.write_factors(self.chunk_tiles(s, t0), scale, tid)
        cute.arch.fence_proxy("async.shared", space="cta")

    @cute.jit
    def write_factors(self, s, scale, tid):
        """write_decay_factors on s's gate, beta, factor and e^Gam_last tiles."""
        write_decay_factors(s.g, s.beta, s.fac, s.alast, scale, tid)

    @cute.jit
    def stage_gram(self, s, mb, heads, t0, eos, scale, thr, lane, wid):
        """The wgmma layer's Gram stage (the pipelined layer's, then the proxy fence for P) on this chunk's q and k tiles."""
        FrostFwdWgmma.stage_gram(self, self.chunk_tiles(s, t0), mb, heads, t0, eos, scale, thr, lane, wid)

    # ------------------------------------------------------------------ the chain
    @cute.jit
    def chunk_chain(self, s, mo, acc_s, coord_s, heads, t0, eos, thr, lane, wid):
        """The wgmma layer's chain with the decays applied as factors: X = S^T K^T (group 1), S^T Q^T
        (group 2), R = W0 + X diag(fr); the block solve; O scaled by fo, then P U onto it
        (group 3) and the state update with U^T diag(fk) (group 4, retired by settle_state)."""
        s = self.chunk_tiles(s, t0)
        s_w0 = s.w0
        s_mneg = s.mneg
        s_dinv = s.dinv
        s_fac = s.fac
        c = self.cfg
        K, C = c.K, CHUNK
        h = heads[3]
        mma = warp_mma()
        wg_half = wgmma(C)  # X and S^T Q^T: N = C each, B = k-hat / q-hat [t, d] K-major
        wg_st = wgmma_mn(K)  # the state update: N = K, B = k-hat seen as [d, t], MN-major
        check_fragment_orders(wg_half, mma, C)
        check_fragment_orders(wg_st, mma, K)
        wtid = (wid % (WG_THREADS // 32)) * 32 + lane  # thread index inside the warpgroup
        g_half = wg_half.get_slice(wtid)
        g_st = wg_st.get_slice(wtid)
        j0 = wid * SUB
        crd = thr.partition_C(cute.make_identity_tensor((SUB, SUB)))  # (value column j, token t in block)
        per = cute.size(thr.partition_shape_C((SUB, SUB)))
        wo = c.write_output

        # 1. X = S^T K^T (group 1) and S^T Q^T (group 2), neither accumulating onto anything
        acc_x = cute.make_rmem_tensor(g_half.partition_shape_C((WG_ROWS, C)), Float32)
        if cutlass.const_expr(wo):
            acc_o = cute.make_rmem_tensor(g_half.partition_shape_C((WG_ROWS, C)), Float32)
        a_s = to_a_operand(acc_s, g_half.partition_shape_A((WG_ROWS, K)))
        b_k = wg_half.make_fragment_B(g_half.partition_B(s.k))
        if cutlass.const_expr(wo):
            b_q = wg_half.make_fragment_B(g_half.partition_B(s.q))
        warpgroup.fence()
        for kk in cutlass.range_constexpr(K // 16):
            wg_half.set(warpgroup.Field.ACCUMULATE, kk != 0)
            cute.gemm(wg_half, acc_x, a_s[None, None, kk], b_k[None, None, kk], acc_x)
        warpgroup.commit_group()
        if cutlass.const_expr(wo):
            for kk in cutlass.range_constexpr(K // 16):
                wg_half.set(warpgroup.Field.ACCUMULATE, kk != 0)
                cute.gemm(wg_half, acc_o, a_s[None, None, kk], b_q[None, None, kk], acc_o)
            warpgroup.commit_group()
        # the next chunk's rows go to the other q / k tiles while X and S^T Q^T run
        self.prefetch_next_rows(s, t0, eos, lane, wid)
        warpgroup.wait_group(1 if wo else 0)  # X is complete; S^T Q^T may still run

        # 2. R = W0 + X diag(fr) in place; this warp's W0 columns are then free for v
        for bi in cutlass.range_constexpr(NBLK):
            for e in cutlass.range_constexpr(per):
                jt = crd[e]
                t = bi * SUB + jt[1]
                acc_x[bi * per + e] = s_w0[t, j0 + jt[0]].to(Float32) + s_fac[FR, t] * acc_x[bi * per + e]
        self.after_rhs_reads(s, heads, t0, eos, lane, wid)

        # 3. block solve U_i = Dinv_i (R_i - sum_{j<i} M_ij U_j) per warp (the base layer's), and the state
        # update's A operand U^T diag(fk) from the same fp32 blocks
        a_u = []
        a_k = []
        for bi in cutlass.range_constexpr(NBLK):
            r = block_of(acc_x, bi, thr.partition_shape_C((SUB, SUB)))
            u = self.solve_block(mma, thr, lane, r, a_u, s_mneg, s_dinv, bi)
            if cutlass.const_expr(c.write_values):
                store_values_block(s.values, u, crd, t0 + bi * SUB, eos, h, j0)
            for e in cutlass.range_constexpr(per):
                u[e] = u[e] * s_fac[FK, bi * SUB + crd[e][1]]
            a_k.append(to_a_operand(u, thr.partition_shape_A((SUB, SUB))))

        self.finish_chain(s, mo, acc_s, coord_s, acc_o if wo else None, a_u, a_k, h, t0, eos, thr, lane, wid)

    def finish_chain(self, s, mo, acc_s, coord_s, acc_o, a_u, a_k, h, t0, eos, thr, lane, wid):
        """The chain's last two steps from U's per-block bf16 A operands, a_u (U^T) and a_k
        (U^T diag(fk)), and the S^T Q^T accumulator acc_o (None without the output), its
        group still in flight: O scaled by fo, O += U^T P^T (group 3), the state update
        (group 4), the output rows. A plain method, traced inline; the full-inverse chain
        (fwd_ws_wy.py) ends the same way."""
        s_fac = s.fac
        c = self.cfg
        K, C = c.K, CHUNK
        wg_half = wgmma(C)
        wg_st = wgmma_mn(K)
        wtid = (wid % (WG_THREADS // 32)) * 32 + lane
        g_half = wg_half.get_slice(wtid)
        g_st = wg_st.get_slice(wtid)
        j0 = wid * SUB
        crd = thr.partition_C(cute.make_identity_tensor((SUB, SUB)))
        per = cute.size(thr.partition_shape_C((SUB, SUB)))
        wo = c.write_output

        # 4. O = (S^T Q^T) diag(fo), then O += U^T P^T (group 3); S^T <- S^T e^Gam_last +
        # (U^T diag(fk)) K (group 4, into the state registers)
        if wo:
            warpgroup.wait_group(0)
            for bi in range(NBLK):
                for e in range(per):
                    acc_o[bi * per + e] = acc_o[bi * per + e] * s_fac[FO, bi * SUB + crd[e][1]]
        a_uw = assemble_a(a_u, g_st.partition_shape_A((WG_ROWS, C)))
        a_kw = assemble_a(a_k, g_st.partition_shape_A((WG_ROWS, C)))
        for e in range(cute.size(acc_s)):
            acc_s[e] = acc_s[e] * self.state_decay(s, coord_s[e][1])
        acc_w = cute.make_tensor(acc_s.iterator, cute.make_layout(g_st.partition_shape_C((WG_ROWS, K))))
        k_dt = cute.make_tensor(s.k.iterator, cute.select(s.k.layout, mode=[1, 0]))  # [d, t]
        b_kd = wg_st.make_fragment_B(g_st.partition_B(k_dt))
        if wo:
            b_p = wg_half.make_fragment_B(g_half.partition_B(s.p))
        wg_half.set(warpgroup.Field.ACCUMULATE, True)
        wg_st.set(warpgroup.Field.ACCUMULATE, True)
        warpgroup.fence()
        if wo:
            for kk in range(C // 16):
                cute.gemm(wg_half, acc_o, a_uw[None, None, kk], b_p[None, None, kk], acc_o)
            warpgroup.commit_group()
        for kk in range(C // 16):
            cute.gemm(wg_st, acc_w, a_kw[None, None, kk], b_kd[None, None, kk], acc_w)
        warpgroup.commit_group()
        if wo:
            warpgroup.wait_group(1)  # groups retire in order: O is complete, the state may still run

        # 5. the output rows (the wgmma layer's stores: one 2-byte store per value)
        if wo:
            store_output_rows(mo, acc_o, crd, t0, eos, h, j0)
        if self.STATE_FINAL_AT_CHAIN_END:
            warpgroup.wait_group(0)


class ScaledDecayLeadChain(ScaledDecayChain):
    """ScaledDecayChain with W0, the gates and beta double-buffered too, and the next
    chunk's rows copied at the start of the operand stage (module docstring)."""

    smem_plan = staticmethod(smem_plan_lead)
    rows_lead = True


@functools.cache
def scaled_decay_class(base):
    """`base` (a wgmma-layer class: FrostFwdWgmma or one of its training launchers) with the scaled
    decays: one class per base, so one compile per config."""
    return type(f"{base.__name__}ScaledDecay", (ScaledDecayChain, base), {})
