"""Forward stage 1 (per chunk, per output head): gates, WY form, scores (decayed q/k).

For one chunk of L <= BT tokens (q, k l2-normalised when requested; G = cumsum of the
log-gate: a [BT, 1] column for GDN, [BT, K] per key channel for KDA):
    D[i, j] = exp(G_i - G_j)          (GDN; KDA: per channel, see intra_scores)
    A   = strict_lower(beta_i * sum_c k_i k_j D)      [BT, BT]
    T   = (I + A)^-1                                  (tile_math.tril_inverse)
    w   = T @ (beta * exp(G) * k)                     [BT, K]
    u   = T @ (beta * v)                              [BT, V]
    P   = lower_incl(scale * sum_c q_i k_j D)         [BT, BT]
    qg  = scale * q * exp(G),   kd = k * exp(G_last - G),   decay = exp(G_last)
so that stage 2 (chunk_fwd) is pure matmuls: v_new = u - w @ S, o = qg @ S + P @ v_new,
S' = decay^T * S + kd^T @ v_new.  Everything goes to token-major scratch in the io dtype
([T, HO, K | V | BT]) except `decay` (fp32, one row per chunk-table row).  Padded rows
of a partial chunk load as zeros (k = v = beta = g = 0): their rows and columns of A
and P vanish and they never reach real tokens.

GDN's forward (ROW_SCALES) writes no qg / kd: a GDN decay is one scalar per row, so
stage 2 applies it, with the l2norm factors, as row scales of q @ S and of v_new
(chunk_fwd ROW_SCALES), from q_row = scale r_q exp(G) and k_row = r_k exp(G_last - G)
([T, HO] fp32 each) and `decay`.  KDA and the backward's recompute write qg and kd.
The GDN path (`_wy_chunk_gdn`) also folds every decay and l2norm factor into row /
column scales of plain q k^T, k k^T products and of T, so the tensor cores read q, k
and v exactly as loaded and only T-derived operands are rounded.

With STORE_TINV (backward recompute) T itself is kept too ([T, HO, BT] fp32).
KDA chunks whose gate range is too wide for the one-matmul score split (intra_scores,
tier 1) are flagged in `reroute` and skipped by the TIER = 1 launch; a second launch
compiled with TIER = 2 handles exactly those chunks with the blocked, exact scores.

Grid: (NT_bound, HO); row r of the device chunk table names (sequence, chunk).
Heads: q/k head = h // GROUP_QK, v head = h // GROUP_V (repeat_interleave grouping).
"""
import cuda.tile as ct

from .decay_gram import MAX_SPLIT_EXP, blocked_scores, split_reach
from .tile_io import ZERO, load_rows, load_rows_raw, store_rows
from .tile_math import (fast_exp, l2_normalize_rows, l2_row_factor, mm_bf16, row_col_index,
                        tril_inverse)
BC = 16   # KDA score blocks when one reference row does not fit the gate range


def load_gate_cumsum(g, chunk, h, BT: int, BK: int, KDA: bool, SLICE_TMA: bool):
    """Chunk-local cumulative log-gate [BT, GW] and its total [1, GW] (GW = 1 or BK)."""
    if KDA:
        # scanned along the second axis of the transpose: ~750 fewer instructions than a
        # scan over the rows of the [BT, BK] tile (tileiras 13.4)
        gt = load_rows(g, chunk, h, BT, BK, SLICE_TMA)
        gc = ct.transpose(ct.cumsum(ct.transpose(gt), axis=1))
        return gc, ct.sum(gt, axis=0, keepdims=True)
    gt = ct.astype(ct.load(g, (chunk, h), shape=(BT, 1), padding_mode=ZERO,
                           allow_tma=SLICE_TMA), ct.float32)
    return ct.cumsum(gt, axis=0), ct.sum(gt, axis=0, keepdims=True)


@ct.kernel(occupancy=2)
def la_wy_fwd_kernel(q, k, v, g, beta, cu_seqlens, table, w, u, p, qg, kd, decay, reroute,
                     tinv, q_row, k_row, scale: float,
                     GROUP_QK: ct.Constant[int], GROUP_V: ct.Constant[int],
                     BT: ct.Constant[int], LOG2_BT: ct.Constant[int],
                     BK: ct.Constant[int], BV: ct.Constant[int], GW: ct.Constant[int],
                     KDA: ct.Constant[bool], USE_L2NORM: ct.Constant[bool],
                     TIER: ct.Constant[int], STORE_TINV: ct.Constant[bool],
                     ROW_SCALES: ct.Constant[bool], SLICE_TMA: ct.Constant[bool]):
    row = ct.bid(0)
    h = ct.bid(1)
    served = True
    if TIER == 2:   # most CTAs of this launch exit after this one load (tier 1 served them)
        served = ct.load(reroute, (row, h), shape=()) != 0
    if served:
        seq = ct.load(table, (row, 0), shape=())
        chunk = ct.load(table, (row, 1), shape=())
        bos = ct.load(cu_seqlens, (seq,), shape=())
        eos = ct.load(cu_seqlens, (seq + 1,), shape=())
        live = chunk * BT < eos - bos
        if live:
            if KDA:
                _wy_chunk_kda(q, k, v, g, beta, w, u, p, qg, kd, decay, reroute, tinv, row, h,
                              chunk, bos, eos, scale, GROUP_QK, GROUP_V, BT, LOG2_BT, BK, BV, GW,
                              USE_L2NORM, TIER, STORE_TINV, SLICE_TMA)
            else:
                _wy_chunk_gdn(q, k, v, g, beta, w, u, p, qg, kd, decay, tinv, q_row, k_row, row,
                              h, chunk, bos, eos, scale, GROUP_QK, GROUP_V, BT, LOG2_BT, BK, BV,
                              USE_L2NORM, STORE_TINV, ROW_SCALES, SLICE_TMA)


def load_column(arr, chunk, h, BT: int, SLICE_TMA: bool):
    """[BT, 1] fp32 column of a sequence-sliced [T, HO] array (beta, row factors; zero past
    the end)."""
    return ct.astype(ct.load(arr, (chunk, h), shape=(BT, 1), padding_mode=ZERO,
                             allow_tma=SLICE_TMA), ct.float32)


def _wy_chunk_gdn(q, k, v, g, beta, w, u, p, qg, kd, decay, tinv, q_row, k_row, row, h, chunk,
                  bos, eos, scale, GROUP_QK: int, GROUP_V: int, BT: int, LOG2_BT: int, BK: int,
                  BV: int, USE_L2NORM: bool, STORE_TINV: bool, ROW_SCALES: bool,
                  SLICE_TMA: bool):
    """GDN chunk: with r = l2norm row factors (1 without l2norm) and d = exp(G_i - G_j),
    A = b r_i (k k^T) r_j d,  P = scale r_i (q k^T) r_j d,  w = (T (b r exp(G))^T) @ k,
    u = (T b^T) @ v  (column-scaled T, rounded once to the io dtype)."""
    qk_head = h // GROUP_QK
    gc, g_last = load_gate_cumsum(g.slice(axis=0, start=bos, stop=eos), chunk, h, BT, BK,
                                  False, SLICE_TMA)
    b = load_column(beta.slice(axis=0, start=bos, stop=eos), chunk, h, BT, SLICE_TMA)
    kr = load_rows_raw(k.slice(axis=0, start=bos, stop=eos), chunk, qk_head, BT, BK, SLICE_TMA)
    qr = load_rows_raw(q.slice(axis=0, start=bos, stop=eos), chunk, qk_head, BT, BK, SLICE_TMA)
    r, c = row_col_index(BT)
    col = fast_exp(ct.minimum(gc - ct.reshape(gc, (1, BT)), 0.0))        # d, then * r_j
    row_q = scale
    row_k = b
    if USE_L2NORM:
        rk = l2_row_factor(kr)
        rq = l2_row_factor(qr)
        col = col * ct.reshape(rk, (1, BT))
        row_q = rq * scale
        row_k = b * rk
    kr_t = ct.transpose(kr)
    qk = ct.mma(qr, kr_t, ct.zeros((BT, BT), dtype=ct.float32))
    store_rows(p.slice(axis=0, start=bos, stop=eos), chunk, h,
               ct.where(r >= c, qk * col * row_q, 0.0), BT, BT, SLICE_TMA)
    kk = ct.mma(kr, kr_t, ct.zeros((BT, BT), dtype=ct.float32))
    t_inv = tril_inverse(ct.where(r > c, kk * col * row_k, 0.0), BT, LOG2_BT)
    if STORE_TINV:   # the backward reuses T instead of inverting again
        store_rows(tinv.slice(axis=0, start=bos, stop=eos), chunk, h, t_inv, BT, BT, SLICE_TMA)
    e_g = fast_exp(gc)
    w_col = ct.reshape(row_k * e_g, (1, BT))
    store_rows(w.slice(axis=0, start=bos, stop=eos), chunk, h,
               ct.mma(ct.astype(t_inv * w_col, k.dtype), kr,
                      ct.zeros((BT, BK), dtype=ct.float32)), BT, BK, SLICE_TMA)
    vr = load_rows_raw(v.slice(axis=0, start=bos, stop=eos), chunk, h // GROUP_V, BT, BV, SLICE_TMA)
    store_rows(u.slice(axis=0, start=bos, stop=eos), chunk, h,
               ct.mma(ct.astype(t_inv * ct.reshape(b, (1, BT)), v.dtype), vr,
                      ct.zeros((BT, BV), dtype=ct.float32)), BT, BV, SLICE_TMA)
    q_scale = e_g * scale
    k_scale = fast_exp(g_last - gc)
    if USE_L2NORM:
        q_scale = q_scale * rq
        k_scale = k_scale * rk
    if ROW_SCALES:
        ct.store(q_row.slice(axis=0, start=bos, stop=eos), (chunk, h), tile=q_scale,
                 allow_tma=SLICE_TMA)
        ct.store(k_row.slice(axis=0, start=bos, stop=eos), (chunk, h), tile=k_scale,
                 allow_tma=SLICE_TMA)
    else:
        store_rows(qg.slice(axis=0, start=bos, stop=eos), chunk, h,
                   ct.astype(qr, ct.float32) * q_scale, BT, BK, SLICE_TMA)
        store_rows(kd.slice(axis=0, start=bos, stop=eos), chunk, h,
                   ct.astype(kr, ct.float32) * k_scale, BT, BK, SLICE_TMA)
    ct.store(decay, (row, h, 0), tile=ct.reshape(fast_exp(g_last), (1, 1, 1)))


def _wy_chunk_kda(q, k, v, g, beta, w, u, p, qg, kd, decay, reroute, tinv, row, h, chunk,
                  bos, eos, scale, GROUP_QK: int, GROUP_V: int, BT: int, LOG2_BT: int, BK: int,
                  BV: int, GW: int, USE_L2NORM: bool, TIER: int, STORE_TINV: bool,
                  SLICE_TMA: bool):
    """KDA chunk: per-channel decays, so q and k are scaled element-wise before the scores
    (decay_gram.py tiers); always writes qg, kd and decay.

    Tier 1 takes every exponential from the split factors around the middle row m:
    qg = (q e^(G-G_m)) e^(G_m), kd = (k e^(G_m-G)) e^(G_last-G_m), k e^G likewise, so a
    chunk costs two [BT, BK] exponentials; the Gram operands and the w / u products go to
    the tensor cores in bf16 (T column-scaled by beta)."""
    gc, g_last = load_gate_cumsum(g.slice(axis=0, start=bos, stop=eos), chunk, h, BT, BK, True,
                                  SLICE_TMA)
    fits = True
    if TIER == 1:
        fits = split_reach(gc, BT, BK) <= MAX_SPLIT_EXP
        ct.store(reroute, (row, h), tile=ct.where(fits, 0, 1))
    if fits:
        qk_head = h // GROUP_QK
        kt = load_rows(k.slice(axis=0, start=bos, stop=eos), chunk, qk_head, BT, BK, SLICE_TMA)
        qt = load_rows(q.slice(axis=0, start=bos, stop=eos), chunk, qk_head, BT, BK, SLICE_TMA)
        if USE_L2NORM:
            kt = l2_normalize_rows(kt)
            qt = l2_normalize_rows(qt)
        qt = qt * scale
        b = load_column(beta.slice(axis=0, start=bos, stop=eos), chunk, h, BT, SLICE_TMA)
        r, c = row_col_index(BT)
        qgs = qg.slice(axis=0, start=bos, stop=eos)
        kds = kd.slice(axis=0, start=bos, stop=eos)
        if TIER == 1:
            g_mid = ct.extract(gc, (BT // 2, 0), shape=(1, BK))
            e_left = fast_exp(gc - g_mid)
            q_left = qt * e_left
            # q's products first so q dies early (register pressure: [BT, BK] fp32 tiles)
            store_rows(qgs, chunk, h, q_left * fast_exp(g_mid), BT, BK, SLICE_TMA)
            k_right = kt * fast_exp(g_mid - gc)
            store_rows(kds, chunk, h, k_right * fast_exp(g_last - g_mid), BT, BK, SLICE_TMA)
            k_left = kt * e_left
            k_exp = k_left * fast_exp(g_mid)                                    # k e^G
            right_t = ct.transpose(ct.astype(k_right, ct.bfloat16))
            qk = ct.mma(ct.astype(q_left, ct.bfloat16), right_t,
                        ct.zeros((BT, BT), dtype=ct.float32))
            kk = ct.mma(ct.astype(k_left, ct.bfloat16), right_t,
                        ct.zeros((BT, BT), dtype=ct.float32))
        else:
            store_rows(qgs, chunk, h, qt * fast_exp(gc), BT, BK, SLICE_TMA)
            store_rows(kds, chunk, h, kt * fast_exp(g_last - gc), BT, BK, SLICE_TMA)
            k_exp = kt * fast_exp(gc)
            qk = blocked_scores(qt, kt, gc, BT, BC, BK)
            kk = blocked_scores(kt, kt, gc, BT, BC, BK)
        store_rows(p.slice(axis=0, start=bos, stop=eos), chunk, h,
                   ct.where(r >= c, qk, 0.0), BT, BT, SLICE_TMA)
        ct.store(decay, (row, h, 0), tile=ct.reshape(fast_exp(g_last), (1, 1, GW)))

        t_inv = tril_inverse(ct.where(r > c, b * kk, 0.0), BT, LOG2_BT)
        if STORE_TINV:   # the backward reuses T instead of inverting again
            store_rows(tinv.slice(axis=0, start=bos, stop=eos), chunk, h, t_inv, BT, BT, SLICE_TMA)
        t_beta = t_inv * ct.reshape(b, (1, BT))
        store_rows(w.slice(axis=0, start=bos, stop=eos), chunk, h,
                   mm_bf16(t_beta, k_exp, ct.zeros((BT, BK), dtype=ct.float32)), BT, BK, SLICE_TMA)
        vt = load_rows_raw(v.slice(axis=0, start=bos, stop=eos), chunk, h // GROUP_V, BT, BV,
                           SLICE_TMA)
        store_rows(u.slice(axis=0, start=bos, stop=eos), chunk, h,
                   mm_bf16(t_beta, vt, ct.zeros((BT, BV), dtype=ct.float32)), BT, BV, SLICE_TMA)
