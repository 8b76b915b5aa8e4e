"""Backward stage 3 (per chunk, per output head): the output and state hand-off terms.

FLA's chunk_bwd_dqkwg (formulas: tests/reference/chunk_bwd.py).  Per chunk, with
h = state entering it and dh = gradient of the state leaving it (backward stages 1-2),
E = exp(G), E_end = exp(G_last - G), q and k l2-normalised when requested:
    dq  = scale (dO h^T) E + gram_x(dAqk),    dAqk = scale dO v_new^T (j <= i)
    dk' = (v_new dh^T) E_end + gram_y(dAqk)
    dw  = -dv_new h^T
    dG' = q dq_h - k dk_h + gram_G(dAqk),  last real row += sum(k dk_h) + exp(G_last) sum(h dh)
(gram_*: the adjoint of the decayed Gram matrix, decay_gram.py).  dq is final (l2norm
adjoint applied); dk', dw and dG' go to fp32 scratch for stage 4 (bwd_wy), which adds
the WY terms.  The work is split over launches because tileiras 13.4 fails on the fused
kernel ("Invalid use-def chain in schedule": with both Gram adjoints at K = V = 64, and
with the intra and state terms together when K != V); the fused kernel also spilled
4-11 KB per thread.  PART 1 (the intra-chunk terms) writes dq and starts dk', dG';
PART 2 (the state terms) adds to them and writes dw.

Grid: (NT_bound, HO).  KDA: TIER 1 serves the chunks the forward recompute left
un-flagged in `reroute`, TIER 2 the flagged ones (blocked Gram adjoint).  Two entry points
with one body: GDN's la_bwd_dqkwg_kernel and KDA's la_bwd_dqkwg_kda_kernel differ only in
their compiler hints.
"""
import cuda.tile as ct

from .decay_gram import gram_bwd, to_gate
from .tile_math import L2NORM_EPS, fast_exp, mma_dtype, row_col_index, split_hi_lo
from .tile_io import load_rows, load_rows_raw, load_state_kmajor_raw, store_rows
from .wy_fwd import load_gate_cumsum

BC = 16


def tier_serves(reroute, row, h, KDA: bool, TIER: int):
    """Whether this launch's score tier serves (row, h): KDA tier 1 the chunks the forward
    recompute left unflagged, tier 2 the flagged ones (checked first: one load decides
    for most CTAs of the tier-2 launches).  Rows past the chunk count hold stale flags;
    chunk_live rejects them."""
    if KDA:
        flag = ct.load(reroute, (row, h), shape=())
        if TIER == 1:
            return flag == 0
        return flag != 0
    return True


def chunk_live(table, cu_seqlens, row, BT: int):
    """(live, chunk, bos, eos): whether chunk-table row `row` is a real chunk."""
    seq = ct.load(table, (row, 0), shape=())
    chunk = ct.load(table, (row, 1), shape=())
    bos = ct.load(cu_seqlens, (seq,), shape=())
    eos = ct.load(cu_seqlens, (seq + 1,), shape=())
    return chunk * BT < eos - bos, chunk, bos, eos


def gram_bwd_gdn(dm, x0, sx, y0, sy, gc, dtype, BT: int, BK: int):
    """GDN's decayed-Gram adjoint (dx, dy, dG [BT, 1]) of x = sx * x0, y = sy * y0 (sx, sy:
    [BT, 1] row scales such as beta and l2norm factors) on the tensor-core path of `dtype`
    (the io dtype): x0 and y0 enter unscaled (exact), the scales go onto the decayed
    adjoint, which enters as hi + lo (one bf16 rounding of it, of the l2-normalised keys,
    or of fp16 keys, lifts dg's error to ~1e-2)."""
    pm = dm * ct.exp(ct.minimum(gc - ct.reshape(gc, (1, BT)), 0.0))
    y16 = ct.astype(y0, dtype)
    hi, lo = split_hi_lo(pm * ct.transpose(sy), dtype)
    dx = ct.mma(lo, y16, ct.mma(hi, y16, ct.zeros((BT, BK), dtype=ct.float32)))
    x16 = ct.astype(x0, dtype)
    hi, lo = split_hi_lo(ct.transpose(pm) * ct.transpose(sx), dtype)
    dy = ct.mma(lo, x16, ct.mma(hi, x16, ct.zeros((BT, BK), dtype=ct.float32)))
    return dx, dy, ct.sum((sx * x0) * dx - (sy * y0) * dy, axis=1, keepdims=True)


@ct.kernel(occupancy=1)
def la_bwd_dqkwg_kernel(q, k, g, d_out, cu_seqlens, table, reroute, states, dstates, v_new,
                        dv_new, dq, dk_part, dw, dg_part, scale: float,
                        GROUP_QK: ct.Constant[int], BT: ct.Constant[int], BK: ct.Constant[int],
                        BV: ct.Constant[int], GW: ct.Constant[int], KDA: ct.Constant[bool],
                        USE_L2NORM: ct.Constant[bool], TIER: ct.Constant[int],
                        PART: ct.Constant[int], SLICE_TMA: ct.Constant[bool]):
    """GDN's launch, and fp32-staged (fp16) KDA's (see chunked_bwd)."""
    _bwd_dqkwg(q, k, g, d_out, cu_seqlens, table, reroute, states, dstates, v_new, dv_new, dq,
               dk_part, dw, dg_part, scale, GROUP_QK, BT, BK, BV, GW, KDA, USE_L2NORM, TIER,
               PART, SLICE_TMA)


@ct.kernel(occupancy=1, num_worker_warps=8)
def la_bwd_dqkwg_kda_kernel(q, k, g, d_out, cu_seqlens, table, reroute, states, dstates,
                            v_new, dv_new, dq, dk_part, dw, dg_part, scale: float,
                            GROUP_QK: ct.Constant[int], BT: ct.Constant[int],
                            BK: ct.Constant[int], BV: ct.Constant[int], GW: ct.Constant[int],
                            KDA: ct.Constant[bool], USE_L2NORM: ct.Constant[bool],
                            TIER: ct.Constant[int], PART: ct.Constant[int],
                            SLICE_TMA: ct.Constant[bool]):
    """KDA's launch: the same body with 8 compute warps (plus tileiras' load warps), so a
    [64, 128] fp32 tile costs 32 registers a thread (sm_90, bench shapes: part 1 tier 1
    176 B stack and 3896 SASS instead of 1088 B and 6528 under the default hint)."""
    _bwd_dqkwg(q, k, g, d_out, cu_seqlens, table, reroute, states, dstates, v_new, dv_new, dq,
               dk_part, dw, dg_part, scale, GROUP_QK, BT, BK, BV, GW, KDA, USE_L2NORM, TIER,
               PART, SLICE_TMA)


def _bwd_dqkwg(q, k, g, d_out, cu_seqlens, table, reroute, states, dstates, v_new, dv_new,
               dq, dk_part, dw, dg_part, scale, GROUP_QK: int, BT: int, BK: int, BV: int,
               GW: int, KDA: bool, USE_L2NORM: bool, TIER: int, PART: int,
               SLICE_TMA: bool):
    row = ct.bid(0)
    h = ct.bid(1)
    if tier_serves(reroute, row, h, KDA, TIER):
        live, chunk, bos, eos = chunk_live(table, cu_seqlens, row, BT)
        if live:
            qk_head = h // GROUP_QK
            kr = load_rows(k.slice(axis=0, start=bos, stop=eos), chunk, qk_head, BT, BK, SLICE_TMA)
            rk = ct.full((BT, 1), 1.0, ct.float32)
            if USE_L2NORM:
                rk = ct.rsqrt(ct.sum(kr * kr, axis=1, keepdims=True) + L2NORM_EPS)
            kt = kr * rk
            gc, g_last = load_gate_cumsum(g.slice(axis=0, start=bos, stop=eos), chunk, h, BT, BK,
                                          KDA, SLICE_TMA)
            r, c = row_col_index(BT)
            # states, v_new and dO enter the products as stored (16-bit io; TF32 when staged
            # in fp32): exact operands, without fp32 [BK, BV] copies
            mm_dtype = mma_dtype(states.dtype)
            vn = ct.astype(load_rows_raw(v_new.slice(axis=0, start=bos, stop=eos), chunk, h,
                                         BT, BV, SLICE_TMA), mm_dtype)
            hs = ct.astype(load_state_kmajor_raw(states, row, h, BK, BV), mm_dtype)
            if PART == 1:
                qr = load_rows(q.slice(axis=0, start=bos, stop=eos), chunk, qk_head, BT, BK,
                               SLICE_TMA)
                rq = ct.full((BT, 1), 1.0, ct.float32)
                if USE_L2NORM:
                    rq = ct.rsqrt(ct.sum(qr * qr, axis=1, keepdims=True) + L2NORM_EPS)
                qt = qr * rq
                dot = ct.astype(load_rows_raw(d_out.slice(axis=0, start=bos, stop=eos), chunk, h,
                                              BT, BV, SLICE_TMA), mm_dtype)
                dq_h = ct.mma(dot, ct.transpose(hs), ct.zeros((BT, BK), dtype=ct.float32))
                if not KDA:
                    dq_h = dq_h * (ct.exp(gc) * scale)
                d_aqk = ct.where(r >= c, ct.mma(dot, ct.transpose(vn),
                                                ct.zeros((BT, BT), dtype=ct.float32)) * scale, 0.0)
                if KDA:
                    # q dq_h + gram_G = q dq - k dk_gram: dG costs one product, and the
                    # Gram factors are formed on the SFU where used (decay_gram.gram_bwd)
                    # (E on dq_h after the Gram adjoint: 72 B less stack than before it)
                    dq_x, dk_y = gram_bwd(d_aqk, qt, kt, gc, BT, BC, BK, TIER)
                    d_q = dq_h * (fast_exp(gc) * scale) + dq_x
                    dgt = qt * d_q - kt * dk_y
                else:
                    dq_x, dk_y, dg_x = gram_bwd_gdn(d_aqk, qr, rq, kr, rk, gc, mm_dtype, BT, BK)
                    d_q = dq_h + dq_x
                    dgt = dg_x + to_gate(qt * dq_h, KDA)
                if USE_L2NORM:
                    d_q = (d_q - qt * ct.sum(qt * d_q, axis=1, keepdims=True)) * rq
                store_rows(dq.slice(axis=0, start=bos, stop=eos), chunk, h, d_q, BT, BK, SLICE_TMA)
                store_rows(dk_part.slice(axis=0, start=bos, stop=eos), chunk, h, dk_y, BT, BK,
                           SLICE_TMA)
            else:
                dhs = ct.astype(load_state_kmajor_raw(dstates, row, h, BK, BV), mm_dtype)
                dk_h = ct.mma(vn, ct.transpose(dhs), ct.zeros((BT, BK), dtype=ct.float32))
                if KDA:
                    dk_h = dk_h * fast_exp(g_last - gc)
                else:
                    dk_h = dk_h * ct.exp(g_last - gc)
                dk_rows = load_rows(dk_part.slice(axis=0, start=bos, stop=eos), chunk, h, BT, BK,
                                    SLICE_TMA)
                store_rows(dk_part.slice(axis=0, start=bos, stop=eos), chunk, h, dk_rows + dk_h,
                           BT, BK, SLICE_TMA)
                dvn = load_rows(dv_new.slice(axis=0, start=bos, stop=eos), chunk, h, BT, BV,
                                SLICE_TMA)
                # dv_new (fp32) as hi + lo in the states' dtype: ~16 bits on the 16-bit path
                dvn_hi, dvn_lo = split_hi_lo(dvn, mm_dtype)
                hs_t = ct.transpose(hs)
                d_w = ct.mma(dvn_lo, hs_t,
                             ct.mma(dvn_hi, hs_t, ct.zeros((BT, BK), dtype=ct.float32)))
                store_rows(dw.slice(axis=0, start=bos, stop=eos), chunk, h, -d_w, BT, BK, SLICE_TMA)
                h_dh = to_gate(ct.transpose(ct.sum(ct.astype(hs, ct.float32) *
                                                   ct.astype(dhs, ct.float32),
                                                   axis=1, keepdims=True)), KDA)
                last = ct.sum(to_gate(kt * dk_h, KDA), axis=0, keepdims=True) + \
                    ct.exp(g_last) * h_dh                                            # [1, GW]
                # on the chunk's last REAL row: padded rows do not survive the scratch round
                # trip, and the reverse cumsum hands it to every real row either way
                last_row = ct.minimum(eos - bos - chunk * BT, BT) - 1
                dgt = load_rows(dg_part.slice(axis=0, start=bos, stop=eos), chunk, h, BT, GW,
                                SLICE_TMA) - \
                    to_gate(kt * dk_h, KDA) + ct.where(r == last_row, last, 0.0)
            store_rows(dg_part.slice(axis=0, start=bos, stop=eos), chunk, h, dgt, BT, GW, SLICE_TMA)

