"""FROST recurrent kernel: the delta rule token by token, state in registers (SIMT fp32).

One CTA per (sequence n, output head h, tile of BLOCK_V value rows); four warps, each
owning BLOCK_V / 4 rows of the stored state X [V, K] (V-major, X = S^T). Lane l holds
channels l, l + 32, ... of every row it owns, so each warp-wide load or store of a state
row touches 32 consecutive elements (coalesced without vector loads) and the two
reductions over K per row and token (the erase read e and the output o) are warp
reductions. Per token (docs/LINEAR_ATTENTION.md §3.1-3.3, stored orientation):

    X' = X Diag(alpha)             decay (scalar alpha for GDN)
    e  = X' (b * k)                b = beta (GDN/KDA) or the erase gate row (GDN-2)
    u  = write * v - e             write = beta (GDN/KDA) or w (GDN-2)
    X  = X' + u k^T ;  o = scale * X q

with q, k L2-normalised in the kernel when asked, and the gates taken raw: safe gate
(GDN: -exp(a_log) softplus(g + dt_bias); KDA/GDN-2: lb * sigmoid(exp(a_log) (g + dt_bias))),
linear domain (alpha = g + 1e-10), beta sigmoid (times 2 under allow_neg_eigval).

State rows: sequence n reads row `slot` of initial_state and writes row `slot` of
final_state, slot = state_indices[n] with a pool, else n. A slot outside [0, S) (negative:
a padding entry of a captured batch; >= S: a bad index) skips the sequence: no state row
is read or written, its output rows and checkpoint rows are written as zeros. Two
sequences naming one slot race (the caller owes distinct slots). initial_state and
final_state may be one buffer (overwrite_initial_state): each CTA reads its rows before
it writes them and no other CTA touches them.
Checkpoints (every n tokens): row j of a sequence holds the state before its token j * n;
sequences' rows are packed in order (ceil(L_i / n) rows each), the end state is only in
final_state.

The same source runs on the CPU under engines_frost/tests/simt_emulator.py.
"""
from __future__ import annotations

from types import SimpleNamespace

import cutlass
import cutlass.cute as cute
import cuda.bindings.driver as cuda
from cutlass import Float32, Int32

from cudnn.linear_attention.frost.kernels.decode_config import WARPS, FrostDecodeConfig
from cudnn.linear_attention.frost.kernels.gmem_views import _packed
from cudnn.linear_attention.frost.kernels.launch_abi import cutlass_dtype
from cudnn.linear_attention.frost.kernels.seq_bounds import (sequence_bounds, table_order,
                                                             zero_uncovered_rows)

LANES = 32
LINEAR_GATE_FLOOR = 1e-10


def decode_views(c: FrostDecodeConfig, ptrs, T, N, S):
    """Called while the launcher is traced: packed views of the ABI operands."""
    (p_q, p_k, p_v, p_g, p_beta, p_w, p_cu, p_out, p_h0, p_ht, p_idx, p_alog, p_dtb,
     p_ck) = ptrs
    HO, K, V = c.HO, c.K, c.V
    gk = K if c.gate_per_channel else 1
    bk = K if c.beta_per_channel else 1
    every = c.checkpoint_every if c.checkpoint_every > 0 else 1
    return SimpleNamespace(
        q=_packed(p_q, (T, c.H, K)), k=_packed(p_k, (T, c.HK, K)), v=_packed(p_v, (T, c.HV, V)),
        g=_packed(p_g, (T, HO, gk)), beta=_packed(p_beta, (T, HO, bk)), w=_packed(p_w, (T, HO, V)),
        cu=_packed(p_cu, (N + 1,)), out=_packed(p_out, (T, HO, V)),
        h0=_packed(p_h0, (S, HO, V, K)), ht=_packed(p_ht, (S, HO, V, K)),
        idx=_packed(p_idx, (N,)), a_log=_packed(p_alog, (HO,)), dt_bias=_packed(p_dtb, (HO, gk)),
        ck=_packed(p_ck, (T // every + N, HO, V, K)),
    )


class FrostDecode:
    """Callable for cute.compile: __call__ is the host-side launcher (decode_config's ABI),
    kernel() the device code."""

    def __init__(self, cfg: FrostDecodeConfig):
        self.cfg = cfg
        self.io = cutlass_dtype(cfg.io_dtype)
        self.st = cutlass_dtype(cfg.state_dtype or "float32")
        self.ck = cutlass_dtype(cfg.checkpoint_dtype or cfg.io_dtype)

    @cute.jit
    def __call__(self, p_q: cute.Pointer, p_k: cute.Pointer, p_v: cute.Pointer, p_g: cute.Pointer,
                 p_beta: cute.Pointer, p_w: cute.Pointer, p_cu: cute.Pointer, p_out: cute.Pointer,
                 p_h0: cute.Pointer, p_ht: cute.Pointer, p_idx: cute.Pointer, p_alog: cute.Pointer,
                 p_dtb: cute.Pointer, p_ck: cute.Pointer, T: Int32, N: Int32, S: Int32,
                 scale: Float32, stream: cuda.CUstream):
        c = self.cfg
        m = decode_views(c, (p_q, p_k, p_v, p_g, p_beta, p_w, p_cu, p_out, p_h0, p_ht, p_idx,
                             p_alog, p_dtb, p_ck), T, N, S)
        self.kernel(m.q, m.k, m.v, m.g, m.beta, m.w, m.cu, m.out, m.h0, m.ht, m.idx, m.a_log,
                    m.dt_bias, m.ck, T, N, S, scale).launch(
            grid=[N, c.HO, c.V // c.block_v], block=[WARPS * LANES, 1, 1], stream=stream)

    @cute.kernel
    def kernel(self, mq: cute.Tensor, mk: cute.Tensor, mv: cute.Tensor, mg: cute.Tensor,
               mb: cute.Tensor, mw: cute.Tensor, mcu: cute.Tensor, mo: cute.Tensor,
               mh0: cute.Tensor, mht: cute.Tensor, midx: cute.Tensor, malog: cute.Tensor,
               mdtb: cute.Tensor, mck: cute.Tensor, T: Int32, N: Int32, S: Int32,
               scale: Float32):
        c = self.cfg
        KPL = c.K // LANES
        RPW = c.block_v // WARPS
        tid, _, _ = cute.arch.thread_idx()
        lane = tid % LANES
        warp = tid // LANES
        n, h, vb = cute.arch.block_idx()
        row0 = vb * c.block_v + warp * RPW  # this warp's first value row

        slot = n
        ok = Int32(1)
        if cutlass.const_expr(c.has_pool):
            slot = midx[n]
            if slot < 0:
                ok = Int32(0)
            if slot >= S:
                ok = Int32(0)

        bos, eos = sequence_bounds(mcu, n, T)  # inside [0, T] whatever cu_seqlens holds
        ck_base = Int32(0)
        if cutlass.const_expr(c.checkpoint_every == 1):
            ck_base = bos  # one row per token: the rows are the tokens
        elif cutlass.const_expr(c.checkpoint_every > 1):
            # rows of the earlier sequences, ceil(L_i / every) each: a walk over n entries
            # of cu_seqlens (cached) per CTA, the one cost that grows with the batch
            for i in cutlass.range(n):
                b_i, e_i = sequence_bounds(mcu, i, T)
                ck_base = ck_base + (e_i - b_i + (c.checkpoint_every - 1)) // c.checkpoint_every

        xs = cute.make_rmem_tensor((RPW, KPL), Float32)
        for r in cutlass.range_constexpr(RPW):
            for j in cutlass.range_constexpr(KPL):
                xs[r, j] = Float32(0.0)
        if ok > 0:
            if cutlass.const_expr(c.has_initial_state):
                for r in cutlass.range_constexpr(RPW):
                    for j in cutlass.range_constexpr(KPL):
                        xs[r, j] = mh0[slot, h, row0 + r, j * LANES + lane].to(Float32)
            self.walk(mq, mk, mv, mg, mb, mw, mo, malog, mdtb, mck, xs, bos, eos, ck_base, h,
                      row0, lane, scale)
            if cutlass.const_expr(c.has_final_state):
                for r in cutlass.range_constexpr(RPW):
                    for j in cutlass.range_constexpr(KPL):
                        mht[slot, h, row0 + r, j * LANES + lane] = xs[r, j].to(self.st)
        else:
            self.zero_rows(mo, mck, bos, eos, ck_base, h, row0, lane)
        # warp 0 of the last sequence's CTAs zeroes its output slice of the rows no sequence
        # covers (only a malformed table leaves any: seq_bounds.py)
        if n == N - 1 and warp == 0:
            first, last, ordered = table_order(mcu, N, T, lane)
            zero_uncovered_rows(mcu, N, T, mo, h, vb * c.block_v, c.block_v, first, last,
                                ordered, lane)

    @cute.jit
    def walk(self, mq, mk, mv, mg, mb, mw, mo, malog, mdtb, mck, xs, bos, eos, ck_base, h, row0,
             lane, scale):
        """The recurrence over tokens bos..eos-1 of one sequence, xs the warp's state rows."""
        c = self.cfg
        KPL = c.K // LANES
        RPW = c.block_v // WARPS
        hq = h // (c.HO // c.H)
        hk = h // (c.HO // c.HK)
        hv = h // (c.HO // c.HV)
        kq = cute.make_rmem_tensor((KPL,), Float32)
        kk = cute.make_rmem_tensor((KPL,), Float32)
        kb = cute.make_rmem_tensor((KPL,), Float32)
        alpha = cute.make_rmem_tensor((KPL,), Float32)
        red = cute.make_rmem_tensor((RPW,), Float32)  # per row: erase read, then output
        for t in cutlass.range(bos, eos):
            if cutlass.const_expr(c.checkpoint_every > 0):
                local = t - bos
                crow = ck_base + local // c.checkpoint_every
                # a malformed table's overlapping sequences can count more rows than exist
                if local % c.checkpoint_every == 0 and crow < mck.shape[0]:
                    for r in cutlass.range_constexpr(RPW):
                        for j in cutlass.range_constexpr(KPL):
                            mck[crow, h, row0 + r, j * LANES + lane] = xs[r, j].to(self.ck)
            for j in cutlass.range_constexpr(KPL):
                kq[j] = mq[t, hq, j * LANES + lane].to(Float32)
                kk[j] = mk[t, hk, j * LANES + lane].to(Float32)
            if cutlass.const_expr(c.use_l2norm):
                sq = Float32(0.0)
                sk = Float32(0.0)
                for j in cutlass.range_constexpr(KPL):
                    sq = sq + kq[j] * kq[j]
                    sk = sk + kk[j] * kk[j]
                sq = cute.arch.warp_reduction(sq, lambda a, b: a + b)
                sk = cute.arch.warp_reduction(sk, lambda a, b: a + b)
                rq = cute.math.rsqrt(sq + Float32(1e-6))
                rk = cute.math.rsqrt(sk + Float32(1e-6))
                for j in cutlass.range_constexpr(KPL):
                    kq[j] = kq[j] * rq
                    kk[j] = kk[j] * rk
            # decay and erase gate per channel of this lane (a scalar gate fills every slot)
            beta_t = Float32(0.0)
            if cutlass.const_expr(c.gate_per_channel):
                for j in cutlass.range_constexpr(KPL):
                    alpha[j] = self.decay(mg[t, h, j * LANES + lane], malog, mdtb, h,
                                          j * LANES + lane)
            else:
                a_t = self.decay(mg[t, h, 0], malog, mdtb, h, 0)
                for j in cutlass.range_constexpr(KPL):
                    alpha[j] = a_t
            if cutlass.const_expr(c.beta_per_channel):
                for j in cutlass.range_constexpr(KPL):
                    kb[j] = self.beta_activation(mb[t, h, j * LANES + lane].to(Float32)) * kk[j]
            else:
                beta_t = self.beta_activation(mb[t, h, 0].to(Float32))
                for j in cutlass.range_constexpr(KPL):
                    kb[j] = beta_t * kk[j]
            # Each phase runs over all the warp's rows before the next, so the rows' warp
            # reductions (5 dependent shuffles each) are independent and overlap.
            for r in cutlass.range_constexpr(RPW):  # decay, partial erase read
                e = Float32(0.0)
                for j in cutlass.range_constexpr(KPL):
                    x = xs[r, j] * alpha[j]
                    xs[r, j] = x
                    e = e + x * kb[j]
                red[r] = e
            for r in cutlass.range_constexpr(RPW):
                red[r] = cute.arch.warp_reduction(red[r], lambda a, b: a + b)
            for r in cutlass.range_constexpr(RPW):  # write term, update, partial output
                write = mv[t, hv, row0 + r].to(Float32)
                if cutlass.const_expr(c.beta_per_channel):
                    write = write * mw[t, h, row0 + r].to(Float32)
                else:
                    write = write * beta_t
                u = write - red[r]
                o = Float32(0.0)
                for j in cutlass.range_constexpr(KPL):
                    x = xs[r, j] + u * kk[j]
                    xs[r, j] = x
                    o = o + x * kq[j]
                red[r] = o
            for r in cutlass.range_constexpr(RPW):
                red[r] = cute.arch.warp_reduction(red[r], lambda a, b: a + b)
            for r in cutlass.range_constexpr(RPW):
                if lane == r:
                    mo[t, h, row0 + r] = (red[r] * scale).to(self.io)

    @cute.jit
    def decay(self, graw, malog, mdtb, h, d):
        """alpha = exp(gamma) of one gate element (docs/LINEAR_ATTENTION.md §2)."""
        c = self.cfg
        g = graw.to(Float32)
        alpha = Float32(0.0)
        if cutlass.const_expr(c.linear_gate):
            alpha = g + Float32(LINEAR_GATE_FLOOR)  # exp(ln(g + 1e-10))
        elif cutlass.const_expr(c.safe_gate):
            amp = Float32(1.0)
            if cutlass.const_expr(c.has_a_log):
                amp = cute.math.exp(malog[h].to(Float32))
            z = g
            if cutlass.const_expr(c.has_dt_bias):
                z = g + mdtb[h, d].to(Float32)
            if cutlass.const_expr(c.gate_per_channel):
                sig = Float32(1.0) / (Float32(1.0) + cute.math.exp(-(amp * z)))
                alpha = cute.math.exp(Float32(c.gate_lower_bound) * sig)
            else:  # softplus(z) = max(z, 0) + log1p(exp(-|z|)), finite for every z
                soft = cute.arch.fmax(z, Float32(0.0)) + cute.math.log1p(
                    cute.math.exp(cute.arch.fmin(z, -z)))
                alpha = cute.math.exp(-amp * soft)
        else:
            alpha = cute.math.exp(g)
        return alpha

    @cute.jit
    def beta_activation(self, b):
        c = self.cfg
        out = b
        if cutlass.const_expr(c.beta_sigmoid):
            out = Float32(1.0) / (Float32(1.0) + cute.math.exp(-b))
            if cutlass.const_expr(c.neg_eigval):
                out = out * Float32(2.0)
        return out

    @cute.jit
    def zero_rows(self, mo, mck, bos, eos, ck_base, h, row0, lane):
        """A skipped sequence: zero output rows and checkpoint rows, no state traffic."""
        c = self.cfg
        KPL = c.K // LANES
        RPW = c.block_v // WARPS
        for t in cutlass.range(bos, eos):
            for r in cutlass.range_constexpr(RPW):
                if lane == r:
                    mo[t, h, row0 + r] = Float32(0.0).to(self.io)
            if cutlass.const_expr(c.checkpoint_every > 0):
                local = t - bos
                crow = ck_base + local // c.checkpoint_every
                # a malformed table's overlapping sequences can count more rows than exist
                if local % c.checkpoint_every == 0 and crow < mck.shape[0]:
                    for r in cutlass.range_constexpr(RPW):
                        for j in cutlass.range_constexpr(KPL):
                            mck[crow, h, row0 + r, j * LANES + lane] = Float32(0.0).to(self.ck)
