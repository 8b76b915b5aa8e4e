"""Forward stage 1 (per chunk, per output head): gates, WY form and intra-chunk scores.

For one chunk of L <= BT tokens (q scaled; q, k l2-normalised when requested;
G = cumsum of the log-gate, a [BT, 1] column for GDN, [BT, K] per channel for KDA):
    D[i, j] = exp(G_i - G_j)                 (GDN)   | per channel (KDA, intra_scores)
    A   = strict_lower(beta_i * sum_c k_i k_j D)      [BT, BT]
    T   = (I + A)^-1                                  (tile_math.tril_inverse)
    w   = T @ (beta * exp(G) * k)                     [BT, K]
    u   = T @ (beta * v)                              [BT, V]
    P   = lower_incl(sum_c q_i k_j D)                 [BT, BT]
Inside the chunk the delta-rule correction is then v_new = u - w @ S0 (S0 = state
entering the chunk) and the intra-chunk output is P @ v_new (stage 2, chunk_fwd).
w, u and P go to token-major scratch ([T, HO, K], [T, HO, V], [T, HO, BT]) in the io
dtype.  Padded rows of a partial chunk load as zeros (k = v = beta = g = 0), so their
rows and columns of A and P vanish and never reach real tokens.

Grid: (NT_bound, HO); row r of the device chunk table names (sequence, chunk).
Heads: q/k head = h // GROUP_QK, v head = h // GROUP_V (repeat_interleave grouping).
"""
import cuda.tile as ct

from .intra_scores import channel_decay_scores
from .tile_math import l2_normalize_rows, mm_tf32, row_col_index, tril_inverse

ZERO = ct.PaddingMode.ZERO
BC = 16   # KDA sub-block rows (intra_scores)


def load_rows(arr, chunk, head, BT: int, BD: int):
    """[BT, BD] fp32 tile of rows `chunk*BT ..` of a token-major [T, H, D] slice."""
    t = ct.load(arr, (chunk, head, 0), shape=(BT, 1, BD), padding_mode=ZERO)
    return ct.astype(ct.reshape(t, (BT, BD)), ct.float32)


def load_gate_cumsum(g, chunk, h, BT: int, BK: int, KDA: bool):
    """Chunk-local cumulative log-gate: [BT, 1] (GDN) or [BT, BK] (KDA), fp32."""
    if KDA:
        gt = load_rows(g, chunk, h, BT, BK)
    else:
        gt = ct.astype(ct.load(g, (chunk, h), shape=(BT, 1), padding_mode=ZERO), ct.float32)
    return ct.cumsum(gt, axis=0), ct.sum(gt, axis=0, keepdims=True)


def store_rows(arr, chunk, head, tile, BT: int, BD: int):
    ct.store(arr, (chunk, head, 0), tile=ct.reshape(ct.astype(tile, arr.dtype), (BT, 1, BD)))


@ct.kernel(occupancy=2)
def la_wy_fwd_kernel(q, k, v, g, beta, cu_seqlens, table, w, u, p, scale: float,
                     GROUP_QK: ct.Constant[int], GROUP_V: ct.Constant[int],
                     BT: ct.Constant[int], LOG2_BT: ct.Constant[int],
                     BK: ct.Constant[int], BV: ct.Constant[int],
                     KDA: ct.Constant[bool], USE_L2NORM: ct.Constant[bool]):
    row = ct.bid(0)
    h = ct.bid(1)
    seq = ct.load(table, (row, 0), shape=())
    chunk = ct.load(table, (row, 1), shape=())
    bos = ct.load(cu_seqlens, (seq,), shape=())
    eos = ct.load(cu_seqlens, (seq + 1,), shape=())
    if chunk * BT < eos - bos:
        qk_head = h // GROUP_QK
        kt = load_rows(k.slice(axis=0, start=bos, stop=eos), chunk, qk_head, BT, BK)
        qt = load_rows(q.slice(axis=0, start=bos, stop=eos), chunk, qk_head, BT, BK)
        if USE_L2NORM:
            kt = l2_normalize_rows(kt)
            qt = l2_normalize_rows(qt)
        qt = qt * scale
        b = ct.astype(ct.load(beta.slice(axis=0, start=bos, stop=eos), (chunk, h),
                              shape=(BT, 1), padding_mode=ZERO), ct.float32)
        gc, _ = load_gate_cumsum(g.slice(axis=0, start=bos, stop=eos), chunk, h, BT, BK, KDA)

        r, c = row_col_index(BT)
        if KDA:
            kk = channel_decay_scores(kt, kt, gc, BT, BC, BK)
            qk = channel_decay_scores(qt, kt, gc, BT, BC, BK)
        else:
            decay = ct.exp(ct.minimum(gc - ct.reshape(gc, (1, BT)), 0.0))
            kk = mm_tf32(kt, ct.transpose(kt)) * decay
            qk = mm_tf32(qt, ct.transpose(kt)) * decay
        a = ct.where(r > c, b * kk, 0.0)
        t_inv = tril_inverse(a, BT, LOG2_BT)
        store_rows(p.slice(axis=0, start=bos, stop=eos), chunk, h,
                   ct.where(r >= c, qk, 0.0), BT, BT)
        store_rows(w.slice(axis=0, start=bos, stop=eos), chunk, h,
                   mm_tf32(t_inv, kt * (b * ct.exp(gc))), BT, BK)
        vt = load_rows(v.slice(axis=0, start=bos, stop=eos), chunk, h // GROUP_V, BT, BV)
        store_rows(u.slice(axis=0, start=bos, stop=eos), chunk, h, mm_tf32(t_inv, vt * b),
                   BT, BV)
