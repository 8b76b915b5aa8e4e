"""FROST recurrent kernel: the delta rule token by token, state in registers (SIMT fp32).

One CTA per (sequence n, output head h, tile of BLOCK_V value rows); four warps, each
owning BLOCK_V / 4 rows of the stored state X [V, K] (V-major, X = S^T). Lane l holds
channels l, l + 32, ... of every row it owns, so each warp-wide load or store of a state
row touches 32 consecutive elements (coalesced without vector loads); under the config's
contiguous_channels it holds channels l * KPL ... l * KPL + KPL - 1 instead (KPL = K / 32),
which a lane moves as one vector (16 B for an fp32 row at K = 128: load_channels /
store_channels). Every sum over K (the row sums, k . q, the norms) adds all lanes' channels
and the update pairs each state element with its own channel's k and alpha, so only the
K-indexed loads and stores depend on the map. The sums over K per row and token are warp
reductions. Per token (docs/LINEAR_ATTENTION.md §3.1-3.3, stored orientation), computed
against the state X before the token:

    e  = X (alpha * b * k)         b = beta (GDN/KDA) or the erase gate row (GDN-2)
    p  = X (alpha * q)             alpha: the decay (scalar for GDN)
    u  = write * v - e             write = beta (GDN/KDA) or w (GDN-2)
    o  = scale * (p + u (k . q))   = scale * X_new q
    X_new = X Diag(alpha) + u k^T

so one pass over the state gives both sums and one reduction serves both (the serial
path of a token is one reduction deep, NOTES_decode.md), with q, k L2-normalised in
the kernel when asked, and the gates taken raw: safe gate
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


def log2_int(x: int) -> int:
    return x.bit_length() - 1


def reduced_index(lane, rpw: int):
    """Which of the 2 x rpw sums of FrostDecode.reduce_rows `lane` ends with: at step k a
    lane whose bit 4 - k is set keeps the upper half of the entries it still carries,
    which adds rpw >> k to its entry. Entries below rpw (the erase reads) end in lanes
    0-15, the output sums in lanes 16-31, entry i + rpw in the lanes of entry i plus 16."""
    idx = lane * 0
    for k in range(log2_int(2 * rpw)):  # unrolled while the kernel is traced
        idx = idx + (lane // (16 >> k)) % 2 * (rpw >> k)
    return idx


def min_ctas_per_sm(c: FrostDecodeConfig) -> int:
    """The residency ptxas is held to (its register cap; the caps below are the lowest
    residency at which no family needs a stack frame). 5 CTAs per SM (96 registers) at
    BLOCK_V = 32, where batches fill the GPU and 5 x 16 KiB of state loads in flight per
    SM is still well above what the bandwidth needs; at 6 (80 registers) the token loop
    spills. At BLOCK_V = 16 (grids below two CTAs per SM) residency does not bind, but
    left free ptxas still spills a pointer around the loop: 6 (80 registers) for KDA and
    GDN-2, 5 for GDN. At BLOCK_V = 64 (16 rows a warp: 64 state registers a thread at
    K = 128) 3 (168 registers; at 4, 128 registers, GDN needs a stack frame)."""
    if c.block_v == 64:
        return 3
    if c.block_v == 32 or c.family == "gdn":
        return 5
    return 6


def lane_of_sum(entry: int, rpw: int) -> int:
    """The lowest lane that ends reduce_rows with `entry` (host-side inverse of
    reduced_index)."""
    lane = 0
    for k in range(log2_int(2 * rpw)):
        if entry & (rpw >> k):
            lane |= 16 >> k
    return lane


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
        launch = self.kernel(m.q, m.k, m.v, m.g, m.beta, m.w, m.cu, m.out, m.h0, m.ht, m.idx,
                             m.a_log, m.dt_bias, m.ck, T, N, S, scale)
        # an explicit carveout (no shared memory: all of it to L1, which the prefetches
        # fill) also spares the DSL a device query, so the kernel cross-compiles without
        # a GPU
        launch.launch(grid=[N, c.HO, c.V // c.block_v], block=[WARPS * LANES, 1, 1],
                      stream=stream, min_blocks_per_mp=min_ctas_per_sm(c),
                      preferred_smem_carveout=0)

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
                    if cutlass.const_expr(c.contiguous_channels):
                        self.load_channels(self.warp_row(mh0[slot, h, None, None], row0, r),
                                           lane, xs[r, None])
                    else:
                        for j in cutlass.range_constexpr(KPL):
                            xs[r, j] = mh0[slot, h, row0 + r, j * LANES + lane].to(Float32)
            self.walk(mq, mk, mv, mg, mb, mw, mo, malog, mdtb, mck, xs, bos, eos, ck_base, h,
                      row0, lane, scale)
            if cutlass.const_expr(c.has_final_state):
                for r in cutlass.range_constexpr(RPW):
                    if cutlass.const_expr(c.contiguous_channels):
                        self.store_channels(xs[r, None],
                                            self.warp_row(mht[slot, h, None, None], row0, r),
                                            lane)
                    else:
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
        """The recurrence over tokens bos..eos-1 of one sequence, xs the warp's state rows.

        Per token one pass over the rows gives both partial sums against the state before
        the token, X: e = X (alpha b k) and p = X (alpha q) (the decay folded into the
        vectors), one transposed reduction leaves each lane one of the 2 x RPW sums, the
        erase-read lanes form u = write * v - e and pass it on, and o = p + u (k . q); the
        update X = X Diag(alpha) + u k^T closes the token. The next token's operands are
        loaded during this token and prepared (norms, gates, k . q) at its end, in the
        same straight-line block; ptxas issues those loads late (next to the update), so
        token t + 2's lines are prefetched into L1 one token earlier
        (NOTES_decode.md)."""
        c = self.cfg
        KPL = c.K // LANES
        RPW = c.block_v // WARPS
        hq = h // (c.HO // c.H)
        hk = h // (c.HO // c.HK)
        hv = h // (c.HO // c.HV)
        # raw operands of the token loaded ahead (lane's channels; v, w of the lane's row)
        rq = cute.make_rmem_tensor((KPL,), Float32)
        rk = cute.make_rmem_tensor((KPL,), Float32)
        rg = cute.make_rmem_tensor((KPL,), Float32)
        rb = cute.make_rmem_tensor((KPL,), Float32)
        rvw = cute.make_rmem_tensor((2,), Float32)
        # the token's prepared vectors: alpha b k, alpha q, k, alpha; [k . q, write * v]
        ka = cute.make_rmem_tensor((KPL,), Float32)
        qa = cute.make_rmem_tensor((KPL,), Float32)
        kk = cute.make_rmem_tensor((KPL,), Float32)
        alpha = cute.make_rmem_tensor((KPL,), Float32)
        sc = cute.make_rmem_tensor((2,), Float32)
        red = cute.make_rmem_tensor((2 * RPW,), Float32)  # partial e of rows, then p of rows
        ur = cute.make_rmem_tensor((RPW,), Float32)
        # loop invariants of the gates: exp(a_log) and the lane's dt_bias channels
        gates = cute.make_rmem_tensor((KPL + 1,), Float32)
        gates[KPL] = Float32(1.0)
        if cutlass.const_expr(c.safe_gate and c.has_a_log):
            gates[KPL] = cute.math.exp(malog[h].to(Float32))
        for j in cutlass.range_constexpr(KPL):
            gates[j] = Float32(0.0)
            if cutlass.const_expr(c.safe_gate and c.has_dt_bias):
                if cutlass.const_expr(c.gate_per_channel and not c.contiguous_channels):
                    gates[j] = mdtb[h, j * LANES + lane].to(Float32)
                elif cutlass.const_expr(not c.gate_per_channel):
                    gates[j] = mdtb[h, 0].to(Float32)
        if cutlass.const_expr(c.safe_gate and c.has_dt_bias and c.gate_per_channel
                              and c.contiguous_channels):
            self.load_channels(mdtb[h, None], lane, gates)  # entries 0 .. KPL - 1
        idx = reduced_index(lane, RPW)  # which of the 2 x RPW sums this lane ends with
        own = idx % RPW                 # its row (erase read below 16, output from 16 up)
        for t in cutlass.range(bos, eos):
            if t == bos:
                self.load_token(mq, mk, mv, mg, mb, mw, rq, rk, rg, rb, rvw, t, h, hq, hk, hv,
                                row0 + own, lane)
                self.prepare(rq, rk, rg, rb, rvw, gates, ka, qa, kk, alpha, sc)
            if cutlass.const_expr(c.checkpoint_every > 0):
                local = t - bos
                crow = ck_base + local // c.checkpoint_every
                # a malformed table's overlapping sequences can count more rows than exist
                if local % c.checkpoint_every == 0 and crow < mck.shape[0]:
                    for r in cutlass.range_constexpr(RPW):
                        if cutlass.const_expr(c.contiguous_channels):
                            self.store_channels(xs[r, None],
                                                self.warp_row(mck[crow, h, None, None], row0, r),
                                                lane)
                        else:
                            for j in cutlass.range_constexpr(KPL):
                                mck[crow, h, row0 + r, j * LANES + lane] = xs[r, j].to(self.ck)
            # the next token (the last one again at the end: a redundant, in-bounds load)
            self.load_token(mq, mk, mv, mg, mb, mw, rq, rk, rg, rb, rvw,
                            cutlass.min(t + 1, eos - 1), h, hq, hk, hv, row0 + own, lane)
            # token t + 2's lines into L1 (a hint, no registers held): its loads, issued
            # during token t + 1 where ptxas places them, then wait on L1 rather than L2
            self.prefetch_token(mq, mk, mv, mg, mb, mw, cutlass.min(t + 2, eos - 1), h, hq,
                                hk, hv, row0, lane)
            for r in cutlass.range_constexpr(RPW):
                e = Float32(0.0)
                p = Float32(0.0)
                for j in cutlass.range_constexpr(KPL):
                    e = e + xs[r, j] * ka[j]
                    p = p + xs[r, j] * qa[j]
                red[r] = e
                red[RPW + r] = p
            s = self.reduce_rows(red, lane)
            u = sc[1] - s                                        # lanes 0-15: row own's u
            u_out = cute.arch.shuffle_sync_bfly(u, offset=16)    # lanes 16-31: their row's u
            o = (s + u_out * sc[0]) * scale
            for r in cutlass.range_constexpr(RPW):
                ur[r] = cute.arch.shuffle_sync(u, offset=lane_of_sum(r, RPW))
            for r in cutlass.range_constexpr(RPW):
                for j in cutlass.range_constexpr(KPL):
                    xs[r, j] = xs[r, j] * alpha[j] + ur[r] * kk[j]
            self.prepare(rq, rk, rg, rb, rvw, gates, ka, qa, kk, alpha, sc)
            if lane >= 16 and lane % (LANES // (2 * RPW)) == 0:
                mo[t, h, row0 + own] = o.to(self.io)

    @cute.jit
    def load_token(self, mq, mk, mv, mg, mb, mw, rq, rk, rg, rb, rvw, t, h, hq, hk, hv, row,
                   lane):
        """Token t's raw operands for this lane: its channels of q, k, gate, beta, and v (and
        GDN-2's write gate w) of `row`."""
        c = self.cfg
        KPL = c.K // LANES
        if cutlass.const_expr(c.contiguous_channels):
            self.load_channels(mq[t, hq, None], lane, rq)
            self.load_channels(mk[t, hk, None], lane, rk)
            if cutlass.const_expr(c.gate_per_channel):
                self.load_channels(mg[t, h, None], lane, rg)
            if cutlass.const_expr(c.beta_per_channel):
                self.load_channels(mb[t, h, None], lane, rb)
        else:
            for j in cutlass.range_constexpr(KPL):
                rq[j] = mq[t, hq, j * LANES + lane].to(Float32)
                rk[j] = mk[t, hk, j * LANES + lane].to(Float32)
                if cutlass.const_expr(c.gate_per_channel):
                    rg[j] = mg[t, h, j * LANES + lane].to(Float32)
                if cutlass.const_expr(c.beta_per_channel):
                    rb[j] = mb[t, h, j * LANES + lane].to(Float32)
        if cutlass.const_expr(not c.gate_per_channel):
            rg[0] = mg[t, h, 0].to(Float32)
        if cutlass.const_expr(not c.beta_per_channel):
            rb[0] = mb[t, h, 0].to(Float32)
        rvw[0] = mv[t, hv, row].to(Float32)
        rvw[1] = Float32(1.0)
        if cutlass.const_expr(c.beta_per_channel):
            rvw[1] = mw[t, h, row].to(Float32)

    def warp_row(self, head, row0, r):
        """Row row0 + r (r < RPW, row0 the warp's first) of a head's [V, K] state view, through
        the warp's [RPW, K] tile: its base address is formed once and row r sits a constant
        r * K elements past it, an immediate offset of the vector access (indexed row by
        row, ptxas kept one 32-bit row index per row live across the token loop and, for
        GDN at 96 registers, spilled one)."""
        c = self.cfg
        RPW = c.block_v // WARPS
        return cute.local_tile(head, (RPW, c.K), (row0 // RPW, 0))[r, None]

    @cute.jit
    def load_channels(self, row, lane, dst):
        """contiguous_channels: dst[j] = channel lane * KPL + j of `row` (a K-long view) as
        Float32, all KPL in one vector copy (the operand's pointer is aligned to it:
        decode_config.decode_operand_alignment)."""
        c = self.cfg
        KPL = c.K // LANES
        frag = cute.make_rmem_tensor((KPL,), row.element_type)
        cute.autovec_copy(cute.local_tile(row, (KPL,), (lane,)), frag)
        for j in cutlass.range_constexpr(KPL):
            dst[j] = frag[j].to(Float32)

    @cute.jit
    def store_channels(self, src, row, lane):
        """contiguous_channels: src[0 .. KPL - 1] into channels lane * KPL ... of `row`,
        converted to its element type, in one vector copy."""
        c = self.cfg
        KPL = c.K // LANES
        frag = cute.make_rmem_tensor((KPL,), row.element_type)
        for j in cutlass.range_constexpr(KPL):
            frag[j] = src[j].to(row.element_type)
        cute.autovec_copy(frag, cute.local_tile(row, (KPL,), (lane,)))

    @cute.jit
    def prefetch_token(self, mq, mk, mv, mg, mb, mw, t, h, hq, hk, hv, row0, lane):
        """L1 prefetches of token t's operand lines: lanes 4 elements apart cover a q / k
        row (bf16: 2 lines) and a per-channel gate row (fp32: 4 lines); v, w, scalar gates
        and beta are one line each."""
        c = self.cfg
        cute.arch.prefetch((mq[t, hq, None].iterator + lane * 4 % c.K).llvm_ptr)
        cute.arch.prefetch((mk[t, hk, None].iterator + lane * 4 % c.K).llvm_ptr)
        cute.arch.prefetch((mv[t, hv, None].iterator + row0).llvm_ptr)
        if cutlass.const_expr(c.gate_per_channel):
            cute.arch.prefetch((mg[t, h, None].iterator + lane * 4 % c.K).llvm_ptr)
        else:
            cute.arch.prefetch(mg[t, h, None].iterator.llvm_ptr)
        if cutlass.const_expr(c.beta_per_channel):
            cute.arch.prefetch((mb[t, h, None].iterator + lane * 4 % c.K).llvm_ptr)
            cute.arch.prefetch((mw[t, h, None].iterator + row0).llvm_ptr)
        else:
            cute.arch.prefetch(mb[t, h, None].iterator.llvm_ptr)

    @cute.jit
    def prepare(self, rq, rk, rg, rb, rvw, gates, ka, qa, kk, alpha, sc):
        """The loaded token's vectors: L2 norms, decay alpha, erase direction alpha b k,
        alpha q, the scalar k . q and the lane row's write term."""
        c = self.cfg
        KPL = c.K // LANES
        sq = Float32(0.0)
        sk = Float32(0.0)
        sqk = Float32(0.0)
        for j in cutlass.range_constexpr(KPL):
            sqk = sqk + rq[j] * rk[j]
            if cutlass.const_expr(c.use_l2norm):
                sq = sq + rq[j] * rq[j]
                sk = sk + rk[j] * rk[j]
        sqk = cute.arch.warp_reduction(sqk, lambda a, b: a + b)
        rnq = Float32(1.0)
        rnk = Float32(1.0)
        if cutlass.const_expr(c.use_l2norm):
            sq = cute.arch.warp_reduction(sq, lambda a, b: a + b)
            sk = cute.arch.warp_reduction(sk, lambda a, b: a + b)
            rnq = cute.math.rsqrt(sq + Float32(1e-6))
            rnk = cute.math.rsqrt(sk + Float32(1e-6))
        sc[0] = sqk * rnq * rnk
        beta_t = Float32(0.0)
        if cutlass.const_expr(not c.beta_per_channel):
            beta_t = self.beta_activation(rb[0])
            sc[1] = rvw[0] * beta_t
        else:
            sc[1] = rvw[0] * rvw[1]
        a_t = Float32(0.0)
        if cutlass.const_expr(not c.gate_per_channel):
            a_t = self.decay(rg[0], gates[KPL], gates[0])
        for j in cutlass.range_constexpr(KPL):
            a_j = a_t
            if cutlass.const_expr(c.gate_per_channel):
                a_j = self.decay(rg[j], gates[KPL], gates[j])
            b_j = beta_t
            if cutlass.const_expr(c.beta_per_channel):
                b_j = self.beta_activation(rb[j])
            k_j = rk[j] * rnk
            alpha[j] = a_j
            kk[j] = k_j
            ka[j] = a_j * (b_j * k_j)
            qa[j] = a_j * (rq[j] * rnq)

    @cute.jit
    def reduce_rows(self, red, lane):
        """Sums each of red's 2 x RPW entries over the warp; lane l returns the sum of entry
        reduced_index(l). Each butterfly step halves the entries a lane carries: the lane
        keeps one half and sends the other to its partner (RPW + RPW / 2 + ... shuffles),
        then the one entry left is summed over the remaining lanes (plain butterfly):
        2 x RPW shuffles instead of 2 x RPW x 5."""
        c = self.cfg
        RPW = c.block_v // WARPS
        steps = log2_int(2 * RPW)
        for k in cutlass.range_constexpr(steps):
            span = 16 >> k
            half = RPW >> k
            if (lane // span) % 2 == 1:  # keep the upper half, send the lower
                for i in cutlass.range_constexpr(half):
                    tmp = red[i]
                    red[i] = red[i + half]
                    red[i + half] = tmp
            for i in cutlass.range_constexpr(half):
                red[i] = red[i] + cute.arch.shuffle_sync_bfly(red[i + half], offset=span)
        total = red[0]
        for k in cutlass.range_constexpr(steps, 5):
            total = total + cute.arch.shuffle_sync_bfly(total, offset=16 >> k)
        return total

    @cute.jit
    def decay(self, g, amp, dtb):
        """alpha = exp(gamma) of one raw gate element g (docs/LINEAR_ATTENTION.md §2); amp =
        exp(a_log), dtb = its dt_bias channel."""
        c = self.cfg
        alpha = Float32(0.0)
        if cutlass.const_expr(c.linear_gate):
            alpha = g + Float32(LINEAR_GATE_FLOOR)  # exp(ln(g + 1e-10))
        elif cutlass.const_expr(c.safe_gate):
            z = g
            if cutlass.const_expr(c.has_dt_bias):
                z = g + dtb
            if cutlass.const_expr(c.gate_per_channel):
                # MUFU reciprocal (~1 ulp) of a denominator >= 1: no IEEE-division slow
                # path, whose branch would split the token's straight-line block
                sig = cute.arch.rcp_approx(Float32(1.0) + cute.math.exp(-(amp * z)))
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
            out = cute.arch.rcp_approx(Float32(1.0) + cute.math.exp(-b))  # as in decay()
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
                    if cutlass.const_expr(c.contiguous_channels):
                        zeros = cute.make_rmem_tensor((KPL,), Float32)
                        for j in cutlass.range_constexpr(KPL):
                            zeros[j] = Float32(0.0)
                        for r in cutlass.range_constexpr(RPW):
                            self.store_channels(zeros,
                                                self.warp_row(mck[crow, h, None, None], row0, r),
                                                lane)
                    else:
                        for r in cutlass.range_constexpr(RPW):
                            for j in cutlass.range_constexpr(KPL):
                                mck[crow, h, row0 + r, j * LANES + lane] = Float32(0.0).to(self.ck)
