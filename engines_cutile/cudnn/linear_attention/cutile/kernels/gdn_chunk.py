"""GDN forward stage 2: the inter-chunk state recurrence fused with the outputs.

One CTA owns one (sequence, output head, V block) and walks its chunks in order,
keeping the state S (K x BV, fp32) on chip.  For a chunk with stage-1 outputs w, u
and G = cumsum(g) (recomputed here, it is one scan):
    v_new = u - w @ S                                        [BT, BV]
    o     = (q * exp(G)) @ S + (causal_incl(exp(G_i - G_j)) * (q @ k^T)) @ v_new
    S     = exp(G_last) * S + (k * exp(G_last - G))^T @ v_new
with q pre-multiplied by `scale`.  Every exponent is <= 0 (gates are log-decays), so
nothing overflows whatever the gate values.  The state enters from `initial_state`
(or zeros) and leaves into `final_state`; both are stored V-major [N, HO, V, K].
Fusing the output into the recurrence saves writing and re-reading one K x V state per
chunk (8 x 4096 tokens, 16 heads, K = V = 128: 268 MB in bf16).

Grid: (N, HO, ceil(V / BV)).
"""
import cuda.tile as ct

from .tile_math import l2_normalize_rows, mm_bf16, row_col_index

ZERO = ct.PaddingMode.ZERO


@ct.kernel(occupancy=2)
def gdn_chunk_fwd_kernel(q, k, w, u, g, cu_seqlens, initial_state, final_state, o,
                         scale: float,
                         GROUP_QK: ct.Constant[int], BT: ct.Constant[int],
                         BK: ct.Constant[int], BV: ct.Constant[int],
                         USE_L2NORM: ct.Constant[bool], HAS_INITIAL: ct.Constant[bool],
                         STORE_FINAL: ct.Constant[bool]):
    n = ct.bid(0)
    h = ct.bid(1)
    vb = ct.bid(2)
    bos = ct.load(cu_seqlens, (n,), shape=())
    eos = ct.load(cu_seqlens, (n + 1,), shape=())
    if HAS_INITIAL:
        s0 = ct.load(initial_state, (n, h, vb, 0), shape=(1, 1, BV, BK), padding_mode=ZERO)
        state = ct.transpose(ct.astype(ct.reshape(s0, (BV, BK)), ct.float32))
    else:
        state = ct.zeros((BK, BV), dtype=ct.float32)

    if eos > bos:
        qs = q.slice(axis=0, start=bos, stop=eos)
        ks = k.slice(axis=0, start=bos, stop=eos)
        ws = w.slice(axis=0, start=bos, stop=eos)
        us = u.slice(axis=0, start=bos, stop=eos)
        gs = g.slice(axis=0, start=bos, stop=eos)
        os_ = o.slice(axis=0, start=bos, stop=eos)
        qh = h // GROUP_QK
        r, c = row_col_index(BT)
        causal = r >= c
        for chunk in range(ct.cdiv(eos - bos, BT)):
            qt = ct.astype(ct.reshape(ct.load(qs, (chunk, qh, 0), shape=(BT, 1, BK),
                                              padding_mode=ZERO), (BT, BK)), ct.float32)
            kt = ct.astype(ct.reshape(ct.load(ks, (chunk, qh, 0), shape=(BT, 1, BK),
                                              padding_mode=ZERO), (BT, BK)), ct.float32)
            if USE_L2NORM:
                qt = l2_normalize_rows(qt)
                kt = l2_normalize_rows(kt)
            qt = qt * scale
            gt = ct.astype(ct.load(gs, (chunk, h), shape=(BT, 1), padding_mode=ZERO), ct.float32)
            gc = ct.cumsum(gt, axis=0)                                   # [BT, 1]
            g_last = ct.sum(gt, axis=0, keepdims=True)                   # [1, 1]
            wt = ct.reshape(ct.load(ws, (chunk, h, 0), shape=(BT, 1, BK), padding_mode=ZERO),
                            (BT, BK))
            ut = ct.astype(ct.reshape(ct.load(us, (chunk, h, vb), shape=(BT, 1, BV),
                                              padding_mode=ZERO), (BT, BV)), ct.float32)

            s_lo = ct.astype(state, ct.bfloat16)
            v_new = ut - ct.mma(ct.astype(wt, ct.bfloat16), s_lo,
                                ct.zeros((BT, BV), dtype=ct.float32))
            v_lo = ct.astype(v_new, ct.bfloat16)

            out = ct.mma(ct.astype(qt * ct.exp(gc), ct.bfloat16), s_lo,
                         ct.zeros((BT, BV), dtype=ct.float32))
            qk = mm_bf16(qt, ct.transpose(kt), ct.zeros((BT, BT), dtype=ct.float32))
            p = ct.where(causal, qk * ct.exp(gc - ct.reshape(gc, (1, BT))), 0.0)
            out = ct.mma(ct.astype(p, ct.bfloat16), v_lo, out)
            ct.store(os_, (chunk, h, vb), tile=ct.reshape(ct.astype(out, o.dtype), (BT, 1, BV)))

            k_dec = ct.astype(kt * ct.exp(g_last - gc), ct.bfloat16)
            state = state * ct.exp(g_last) + ct.mma(ct.transpose(k_dec), v_lo,
                                                    ct.zeros((BK, BV), dtype=ct.float32))

    if STORE_FINAL:
        st = ct.reshape(ct.transpose(state), (1, 1, BV, BK))
        ct.store(final_state, (n, h, vb, 0), tile=ct.astype(st, final_state.dtype))
