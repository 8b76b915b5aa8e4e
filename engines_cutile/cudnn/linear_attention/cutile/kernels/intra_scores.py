"""Intra-chunk scores with a per-key-channel decay (KDA), computed safely.

    S[i, j] = sum_c x[i, c] * k[j, c] * exp(G[i, c] - G[j, c])      for j <= i

(G = cumulative log-decay, non-increasing along the chunk).  Splitting exp(G_i - G_j)
around one reference row r per block of BC rows turns S into tensor-core matmuls:
    S[I, :] = (x_I * exp(G_I - G_r)) @ (k * exp(G_r - G))^T
Left exponents are <= 0.  Right exponents are <= 0 for every column before the block
and bounded by the block's gate range R = max_c (G[r, c] - G[r + BC - 1, c]) inside it
(columns after the block are masked).  While R <= MAX_SPLIT_RANGE the factors stay
finite in fp32 (e^80 ~ 5.5e34) and the split is exact; a block with a larger range (a
gate below about -5 per token on some channel) recomputes its diagonal BC x BC block
column by column, which is exact for any gate values.
"""
import cuda.tile as ct

from .tile_math import mm_tf32, row_col_index

MAX_SPLIT_RANGE = 80.0


def channel_decay_scores(x, k, gc, BT: int, BC: int, BK: int):
    """[BT, BT] fp32 tile of S (entries above the diagonal are unspecified)."""
    out = ct.zeros((BT, BT), dtype=ct.float32)
    for blk in ct.static_iter(range(BT // BC)):
        gb = ct.extract(gc, (blk, 0), shape=(BC, BK))
        g_ref = ct.extract(gb, (0, 0), shape=(1, BK))
        left = ct.extract(x, (blk, 0), shape=(BC, BK)) * ct.exp(gb - g_ref)
        right = k * ct.exp(ct.minimum(g_ref - gc, MAX_SPLIT_RANGE))
        rows = mm_tf32(left, ct.transpose(right))                       # [BC, BT]
        g_range = ct.max(g_ref - ct.extract(gb, (BC - 1, 0), shape=(1, BK)))
        if g_range > MAX_SPLIT_RANGE:
            rows = ct.insert(rows, (0, blk), _diagonal_block_exact(
                ct.extract(x, (blk, 0), shape=(BC, BK)),
                ct.extract(k, (blk, 0), shape=(BC, BK)), gb, BC, BK))
        out = ct.insert(out, (blk, 0), rows)
    return out


def _diagonal_block_exact(xb, kb, gb, BC: int, BK: int):
    """S restricted to one diagonal BC x BC block, one column per loop step.

    Column j needs row j of k and G; it is selected with a masked reduction because
    tile indices must be compile-time constants (a dynamic loop keeps the code small).
    """
    r, c = row_col_index(BC)
    acc = ct.zeros((BC, BC), dtype=ct.float32)
    for j in range(BC):
        pick = r == j
        k_j = ct.sum(ct.where(pick, kb, 0.0), axis=0, keepdims=True)          # [1, BK]
        g_j = ct.sum(ct.where(pick, gb, 0.0), axis=0, keepdims=True)
        col = ct.sum(xb * k_j * ct.exp(ct.minimum(gb - g_j, 0.0)), axis=1, keepdims=True)
        acc = ct.where(c == j, col, acc)
    return acc
