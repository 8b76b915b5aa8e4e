"""Forward stage 2: the inter-chunk state recurrence fused with the outputs.

One CTA owns one (sequence, output head, V block) and walks its chunks in order with
the state S (K x BV, fp32) on chip.  With stage-1 scratch w, u, P and the chunk's
cumulative gate G (recomputed here: one scan), q pre-scaled:
    v_new = u - w @ S                                       [BT, BV]
    o     = (q * exp(G)) @ S + P @ v_new
    S     = exp(G_last)^T * S + (k * exp(G_last - G))^T @ v_new
exp(G_last) is a scalar (GDN) or a per-key-channel column (KDA); every exponent is
<= 0, so no gate value can overflow.  The state enters from `initial_state` (or
zeros) and leaves into `final_state`, both V-major [N, HO, V, K].  Fusing the output
into the recurrence avoids writing and re-reading one K x V state per chunk (268 MB
in bf16 at 8 x 4096 tokens, 16 heads, K = V = 128).

Grid: (N, HO, ceil(V / BV)).
"""
import cuda.tile as ct

from .tile_math import l2_normalize_rows
from .wy_fwd import load_gate_cumsum, load_rows

ZERO = ct.PaddingMode.ZERO


@ct.kernel(occupancy=2)
def la_chunk_fwd_kernel(q, k, w, u, p, g, cu_seqlens, initial_state, final_state, o,
                        scale: float,
                        GROUP_QK: ct.Constant[int], BT: ct.Constant[int],
                        BK: ct.Constant[int], BV: ct.Constant[int],
                        KDA: ct.Constant[bool], USE_L2NORM: ct.Constant[bool],
                        HAS_INITIAL: ct.Constant[bool], STORE_FINAL: ct.Constant[bool]):
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
        ps = p.slice(axis=0, start=bos, stop=eos)
        gs = g.slice(axis=0, start=bos, stop=eos)
        os_ = o.slice(axis=0, start=bos, stop=eos)
        qk_head = h // GROUP_QK
        for chunk in range(ct.cdiv(eos - bos, BT)):
            qt = load_rows(qs, chunk, qk_head, BT, BK)
            kt = load_rows(ks, chunk, qk_head, BT, BK)
            if USE_L2NORM:
                qt = l2_normalize_rows(qt)
                kt = l2_normalize_rows(kt)
            gc, g_last = load_gate_cumsum(gs, chunk, h, BT, BK, KDA)
            wt = ct.reshape(ct.load(ws, (chunk, h, 0), shape=(BT, 1, BK), padding_mode=ZERO),
                            (BT, BK))
            pt = ct.reshape(ct.load(ps, (chunk, h, 0), shape=(BT, 1, BT), padding_mode=ZERO),
                            (BT, BT))
            ut = ct.astype(ct.reshape(ct.load(us, (chunk, h, vb), shape=(BT, 1, BV),
                                              padding_mode=ZERO), (BT, BV)), ct.float32)

            s_lo = ct.astype(state, ct.bfloat16)
            v_new = ut - ct.mma(ct.astype(wt, ct.bfloat16), s_lo,
                                ct.zeros((BT, BV), dtype=ct.float32))
            v_lo = ct.astype(v_new, ct.bfloat16)
            out = ct.mma(ct.astype(qt * (ct.exp(gc) * scale), ct.bfloat16), s_lo,
                         ct.zeros((BT, BV), dtype=ct.float32))
            out = ct.mma(ct.astype(pt, ct.bfloat16), v_lo, out)
            ct.store(os_, (chunk, h, vb), tile=ct.reshape(ct.astype(out, o.dtype), (BT, 1, BV)))

            k_dec = ct.astype(kt * ct.exp(g_last - gc), ct.bfloat16)
            state = state * ct.transpose(ct.exp(g_last)) + ct.mma(
                ct.transpose(k_dec), v_lo, ct.zeros((BK, BV), dtype=ct.float32))

    if STORE_FINAL:
        st = ct.reshape(ct.transpose(state), (1, 1, BV, BK))
        ct.store(final_state, (n, h, vb, 0), tile=ct.astype(st, final_state.dtype))
