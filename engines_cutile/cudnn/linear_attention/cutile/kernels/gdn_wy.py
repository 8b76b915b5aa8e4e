"""GDN forward stage 1 (per chunk, per output head): cumulative gate and WY form.

For one chunk of L <= BT tokens of one sequence (rows i, j; k already l2-normalised
when requested; gate g = log alpha):
    G   = cumsum(g)                                  [BT]
    A   = strict_lower(beta_i * exp(G_i - G_j) * k_i.k_j)   [BT, BT]
    T   = (I + A)^-1                                 (tile_math.tril_inverse)
    w   = T @ (beta * exp(G) * k)                    [BT, K]
    u   = T @ (beta * v)                             [BT, V]
so that inside the chunk the delta-rule correction is v_new = u - w @ S0 (S0 = the
state entering the chunk, K x V).  w and u are written in the io dtype into
token-major scratch [T, HO, K] / [T, HO, V] for stage 2 (gdn_chunk).
Padded rows of a partial chunk load as zeros (k = v = beta = g = 0), which makes
their rows and columns of A vanish, so they never leak into real tokens.

Grid: (NT_bound, HO).  Row r of the device chunk table names (sequence, chunk).
Heads: q/k head = h // GROUP_QK, v head = h // GROUP_V (repeat_interleave grouping).
"""
import cuda.tile as ct

from .tile_math import l2_normalize_rows, mm_tf32, row_col_index, tril_inverse

ZERO = ct.PaddingMode.ZERO


@ct.kernel(occupancy=2)
def gdn_wy_fwd_kernel(k, v, g, beta, cu_seqlens, table, w, u,
                      GROUP_QK: ct.Constant[int], GROUP_V: ct.Constant[int],
                      BT: ct.Constant[int], LOG2_BT: ct.Constant[int],
                      BK: ct.Constant[int], BV: ct.Constant[int],
                      USE_L2NORM: ct.Constant[bool]):
    row = ct.bid(0)
    h = ct.bid(1)
    seq = ct.load(table, (row, 0), shape=())
    chunk = ct.load(table, (row, 1), shape=())
    bos = ct.load(cu_seqlens, (seq,), shape=())
    eos = ct.load(cu_seqlens, (seq + 1,), shape=())
    if chunk * BT < eos - bos:
        ks = k.slice(axis=0, start=bos, stop=eos)
        vs = v.slice(axis=0, start=bos, stop=eos)
        gs = g.slice(axis=0, start=bos, stop=eos)
        bs = beta.slice(axis=0, start=bos, stop=eos)
        kh = h // GROUP_QK
        kt = ct.load(ks, (chunk, kh, 0), shape=(BT, 1, BK), padding_mode=ZERO)
        kt = ct.astype(ct.reshape(kt, (BT, BK)), ct.float32)
        if USE_L2NORM:
            kt = l2_normalize_rows(kt)
        b = ct.astype(ct.load(bs, (chunk, h), shape=(BT, 1), padding_mode=ZERO), ct.float32)
        gc = ct.cumsum(ct.astype(ct.load(gs, (chunk, h), shape=(BT, 1), padding_mode=ZERO),
                                 ct.float32), axis=0)                       # [BT, 1]
        r, c = row_col_index(BT)
        decay = ct.exp(gc - ct.reshape(gc, (1, BT)))
        kk = mm_tf32(kt, ct.transpose(kt))
        a = ct.where(r > c, b * decay * kk, 0.0)
        t_inv = tril_inverse(a, BT, LOG2_BT)

        wt = mm_tf32(t_inv, kt * (b * ct.exp(gc)))
        ws = w.slice(axis=0, start=bos, stop=eos)
        ct.store(ws, (chunk, h, 0), tile=ct.reshape(ct.astype(wt, w.dtype), (BT, 1, BK)))

        vh = h // GROUP_V
        vt = ct.load(vs, (chunk, vh, 0), shape=(BT, 1, BV), padding_mode=ZERO)
        vt = ct.astype(ct.reshape(vt, (BT, BV)), ct.float32)
        ut = mm_tf32(t_inv, vt * b)
        us = u.slice(axis=0, start=bos, stop=eos)
        ct.store(us, (chunk, h, 0), tile=ct.reshape(ct.astype(ut, u.dtype), (BT, 1, BV)))
