"""Backward stage 3 (per chunk, per output head): dq, dk, dv, dbeta, dg.

Fuses FLA's chunk_bwd_dqkwg, prepare_wy_repr_bwd and the reverse chunk-local cumsum
(formulas: tests/reference/chunk_bwd.py).  Per chunk, with h = state entering it and
dh = gradient of the state leaving it (backward stages 1-2), E = exp(G),
E_end = exp(G_last - G), T = (I + A)^-1 kept by the recompute pass:
    dq  = scale (dO h^T) E + gram_x(dAqk),    dAqk = scale dO v_new^T (j <= i)
    dk  = (v_new dh^T) E_end + gram_y(dAqk)
    dw  = -dv_new h^T
    dG  = q dq_h - k dk_h + gram_G(dAqk),  last row += sum(k dk_h) + exp(G_last) sum(h dh)
    dT  = dv_new (beta v)^T + dw (beta k E)^T,   dA = -T^T dT T^T (j < i)
    d(beta v) = T^T dv_new,   d(beta k E) = T^T dw,   gram adjoint of dA through (beta k, k)
    dv = beta d(beta v),  dbeta = sum k d(beta k) + sum v d(beta v),  dk += beta d(beta k)
    dg  = reverse cumsum of dG within the chunk
then the l2norm adjoint (dx = (dx_hat - x_hat (x_hat . dx_hat)) / |x|) when enabled.
(gram_x/gram_y/gram_G: the adjoint of the decayed Gram matrix, decay_gram.py.)
Every sum of gate terms runs in fp32.  Grouped heads write per-output-head partial dq/dk
(dv) into fp32 scratch that head_group_sum reduces; ungrouped ones write the outputs.

Grid: (NT_bound, HO).  KDA: TIER 1 serves the chunks the forward recompute left
un-flagged in `reroute`, TIER 2 the flagged ones (blocked Gram adjoint).
"""
import cuda.tile as ct

from .decay_gram import gram_bwd_blocked, gram_bwd_split, split_exps
from .tile_math import L2NORM_EPS, mm_tf32, row_col_index
from .wy_fwd import load_gate_cumsum, load_rows, store_rows

ZERO = ct.PaddingMode.ZERO
BC = 16


def _to_gate(x, KDA: bool):
    """A [., BK] channel term reduced to the gate width (sum over channels for GDN)."""
    if KDA:
        return x
    return ct.sum(x, axis=1, keepdims=True)


def _gram_bwd(dm, x, y, gc, BT: int, BK: int, KDA: bool, TIER: int):
    if KDA:
        if TIER == 1:
            e_left, e_right = split_exps(gc, BT, BK)
            return gram_bwd_split(dm, x, y, e_left, e_right)
        return gram_bwd_blocked(dm, x, y, gc, BT, BC, BK)
    pm = dm * ct.exp(ct.minimum(gc - ct.reshape(gc, (1, BT)), 0.0))
    dx = mm_tf32(pm, y)
    dy = mm_tf32(ct.transpose(pm), x)
    return dx, dy, ct.sum(x * dx - y * dy, axis=1, keepdims=True)


def _state(arr, row, h, BK: int, BV: int):
    t = ct.load(arr, (row, h, 0, 0), shape=(1, 1, BK, BV), padding_mode=ZERO)
    return ct.astype(ct.reshape(t, (BK, BV)), ct.float32)


@ct.kernel(occupancy=1)
def la_bwd_dqkwg_kernel(q, k, v, g, beta, d_out, cu_seqlens, table, reroute, states,
                        dstates, v_new, dv_new, tinv, dq, dk, dv, dg, dbeta, scale: float,
                        GROUP_QK: ct.Constant[int], GROUP_V: ct.Constant[int],
                        BT: ct.Constant[int], BK: ct.Constant[int], BV: ct.Constant[int],
                        KDA: ct.Constant[bool], USE_L2NORM: ct.Constant[bool],
                        TIER: ct.Constant[int]):
    row = ct.bid(0)
    h = ct.bid(1)
    seq = ct.load(table, (row, 0), shape=())
    chunk = ct.load(table, (row, 1), shape=())
    bos = ct.load(cu_seqlens, (seq,), shape=())
    eos = ct.load(cu_seqlens, (seq + 1,), shape=())
    live = chunk * BT < eos - bos
    if KDA:
        flag = ct.load(reroute, (row, h), shape=())
        if TIER == 1:
            live = live & (flag == 0)
        else:
            live = live & (flag != 0)
    if live:
        _bwd_chunk(q, k, v, g, beta, d_out, states, dstates, v_new, dv_new, tinv, dq, dk, dv,
                   dg, dbeta, row, h, chunk, bos, eos, scale, GROUP_QK, GROUP_V, BT, BK, BV,
                   KDA, USE_L2NORM, TIER)


def _bwd_chunk(q, k, v, g, beta, d_out, states, dstates, v_new, dv_new, tinv, dq, dk, dv,
               dg, dbeta, row, h, chunk, bos, eos, scale, GROUP_QK: int, GROUP_V: int,
               BT: int, BK: int, BV: int, KDA: bool, USE_L2NORM: bool, TIER: int):
    qk_head = h // GROUP_QK
    qt = load_rows(q.slice(axis=0, start=bos, stop=eos), chunk, qk_head, BT, BK)
    kt = load_rows(k.slice(axis=0, start=bos, stop=eos), chunk, qk_head, BT, BK)
    if USE_L2NORM:
        rq = ct.rsqrt(ct.sum(qt * qt, axis=1, keepdims=True) + L2NORM_EPS)
        rk = ct.rsqrt(ct.sum(kt * kt, axis=1, keepdims=True) + L2NORM_EPS)
        qt = qt * rq
        kt = kt * rk
    b = ct.astype(ct.load(beta.slice(axis=0, start=bos, stop=eos), (chunk, h), shape=(BT, 1), padding_mode=ZERO),
                  ct.float32)
    gc, g_last = load_gate_cumsum(g.slice(axis=0, start=bos, stop=eos), chunk, h, BT, BK, KDA)
    e_g = ct.exp(gc)
    r, c = row_col_index(BT)

    dot = load_rows(d_out.slice(axis=0, start=bos, stop=eos), chunk, h, BT, BV)
    vn = load_rows(v_new.slice(axis=0, start=bos, stop=eos), chunk, h, BT, BV)
    dvn = load_rows(dv_new.slice(axis=0, start=bos, stop=eos), chunk, h, BT, BV)
    hs = _state(states, row, h, BK, BV)
    dhs = _state(dstates, row, h, BK, BV)

    # output and state hand-off terms (chunk_bwd_dqkwg)
    dq_h = mm_tf32(dot, ct.transpose(hs)) * (e_g * scale)
    d_aqk = ct.where(r >= c, mm_tf32(dot, ct.transpose(vn)) * scale, 0.0)
    dq_x, dk_y, dg_o = _gram_bwd(d_aqk, qt, kt, gc, BT, BK, KDA, TIER)
    dk_h = mm_tf32(vn, ct.transpose(dhs)) * ct.exp(g_last - gc)
    dw = -mm_tf32(dvn, ct.transpose(hs))
    d_q = dq_h + dq_x
    d_k = dk_y + dk_h
    dgt = dg_o + _to_gate(qt * dq_h - kt * dk_h, KDA)
    h_dh = _to_gate(ct.transpose(ct.sum(hs * dhs, axis=1, keepdims=True)), KDA)  # [1, GW]
    last = ct.sum(_to_gate(kt * dk_h, KDA), axis=0, keepdims=True) + ct.exp(g_last) * h_dh
    dgt = dgt + ct.where(r == BT - 1, last, 0.0)

    # WY adjoint (prepare_wy_repr_bwd)
    t_inv = load_rows(tinv.slice(axis=0, start=bos, stop=eos), chunk, h, BT, BT)
    t_inv_t = ct.transpose(t_inv)
    vt = load_rows(v.slice(axis=0, start=bos, stop=eos), chunk, h // GROUP_V, BT, BV)
    kbe = kt * (b * e_g)
    d_t = mm_tf32(dvn, ct.transpose(vt * b)) + mm_tf32(dw, ct.transpose(kbe))
    d_a = ct.where(r > c, -mm_tf32(mm_tf32(t_inv_t, d_t), t_inv_t), 0.0)
    d_bv = mm_tf32(t_inv_t, dvn)
    d_kbe = mm_tf32(t_inv_t, dw)
    dkb_x, dk_a, dg_a = _gram_bwd(d_a, kt * b, kt, gc, BT, BK, KDA, TIER)
    d_kb = d_kbe * e_g + dkb_x
    d_k = d_k + b * d_kb + dk_a
    dgt = dgt + dg_a + _to_gate(kbe * d_kbe, KDA)
    d_beta = ct.sum(kt * d_kb, axis=1, keepdims=True) + ct.sum(vt * d_bv, axis=1, keepdims=True)

    if USE_L2NORM:
        d_q = (d_q - qt * ct.sum(qt * d_q, axis=1, keepdims=True)) * rq
        d_k = (d_k - kt * ct.sum(kt * d_k, axis=1, keepdims=True)) * rk

    store_rows(dq.slice(axis=0, start=bos, stop=eos), chunk, h, d_q, BT, BK)
    store_rows(dk.slice(axis=0, start=bos, stop=eos), chunk, h, d_k, BT, BK)
    store_rows(dv.slice(axis=0, start=bos, stop=eos), chunk, h, b * d_bv, BT, BV)
    dg_rows = ct.cumsum(dgt, axis=0, reverse=True)
    if KDA:
        store_rows(dg.slice(axis=0, start=bos, stop=eos), chunk, h, dg_rows, BT, BK)
    else:
        ct.store(dg.slice(axis=0, start=bos, stop=eos), (chunk, h), tile=ct.astype(dg_rows, dg.dtype))
    ct.store(dbeta.slice(axis=0, start=bos, stop=eos), (chunk, h), tile=ct.astype(d_beta, dbeta.dtype))
