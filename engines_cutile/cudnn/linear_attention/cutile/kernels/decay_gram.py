"""The decayed intra-chunk Gram matrix with a per-key-channel decay (KDA) and its adjoint.

    S[i, j] = sum_c x[i, c] * k[j, c] * exp(G[i, c] - G[j, c])      for j <= i
    adjoint for dS (masked):  dx_ic = sum_j dS_ij k_jc E_ijc,  dk_jc = sum_i dS_ij x_ic E_ijc,
                              dG = x * dx - k * dk           (E_ijc = exp(G_ic - G_jc))

(G = cumulative log-decay, non-increasing along the chunk).  Splitting exp(G_i - G_j)
around a reference row m turns S into one tensor-core matmul,
    S = (x * exp(G - G_m)) @ (k * exp(G_m - G))^T,
exact as long as no factor overflows fp32 (|G - G_m| <= MAX_SPLIT_EXP, e^80 ~ 5.5e34).
Tiers, cheapest first:
1. reference = the chunk's middle row: valid while `split_reach(G)` <= 80, i.e. the
   chunk's per-channel gate range stays within 2 * 80 nats (average log-gate above
   -2.5 per token).  Callers check this per chunk and route the rest to tier 2/3, which
   lives in a separately compiled kernel variant so the common path keeps few registers;
2. one reference per block of BC rows (the block's first row): left exponents <= 0,
   right exponents <= 0 before the block and bounded by the block's own range inside it;
3. a block whose own range exceeds 80 nats recomputes its diagonal BC x BC block column
   by column (exact for any gate values).
Entries above the diagonal are garbage (possibly inf); callers mask them with `where`.
"""
import cuda.tile as ct

from .tile_math import fast_exp, mm_tf32, row_col_index

MAX_SPLIT_EXP = 80.0


def split_reach(gc, BT: int, BK: int):
    """Largest |G - G_mid| over the chunk (scalar); tier 1 needs it <= MAX_SPLIT_EXP."""
    g_mid = ct.extract(gc, (BT // 2, 0), shape=(1, BK))
    return ct.max(ct.maximum(ct.extract(gc, (0, 0), shape=(1, BK)) - g_mid,
                             g_mid - ct.extract(gc, (BT - 1, 0), shape=(1, BK))))


def blocked_scores(x, k, gc, BT: int, BC: int, BK: int):
    """Tiers 2 and 3: one reference row per block of BC rows."""
    out = ct.zeros((BT, BT), dtype=ct.float32)
    for blk in ct.static_iter(range(BT // BC)):
        gb = ct.extract(gc, (blk, 0), shape=(BC, BK))
        g_ref = ct.extract(gb, (0, 0), shape=(1, BK))
        left = ct.extract(x, (blk, 0), shape=(BC, BK)) * ct.exp(gb - g_ref)
        right = k * ct.exp(ct.minimum(g_ref - gc, MAX_SPLIT_EXP))
        rows = mm_tf32(left, ct.transpose(right))                       # [BC, BT]
        g_range = ct.max(g_ref - ct.extract(gb, (BC - 1, 0), shape=(1, BK)))
        if g_range > MAX_SPLIT_EXP:
            rows = ct.insert(rows, (0, blk), _diagonal_block_exact(
                ct.extract(x, (blk, 0), shape=(BC, BK)),
                ct.extract(k, (blk, 0), shape=(BC, BK)), gb, BC))
        out = ct.insert(out, (blk, 0), rows)
    return out


def _diagonal_block_exact(xb, kb, gb, BC: int):
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


def gram_bwd_blocked(dm, x, y, gc, BT: int, BC: int, BK: int):
    """Tier-2 adjoint: row block I of dx around its first row, column block J of dy
    around its last row, so every factor exponent is <= 0 outside the diagonal block and
    bounded by the block's gate range inside it.  Exact while every block's range is
    <= MAX_SPLIT_EXP; a wider block poisons its rows with NaN (loud, never silently
    wrong) - per-token log-gates >= -5 (KDA's safe-gate bound) always fit."""
    dx = ct.zeros((BT, BK), dtype=ct.float32)
    dy = ct.zeros((BT, BK), dtype=ct.float32)
    for blk in ct.static_iter(range(BT // BC)):
        gb = ct.extract(gc, (blk, 0), shape=(BC, BK))
        g_first = ct.extract(gb, (0, 0), shape=(1, BK))
        g_end = ct.extract(gb, (BC - 1, 0), shape=(1, BK))
        dm_rows = ct.extract(dm, (blk, 0), shape=(BC, BT))
        dx_b = mm_tf32(dm_rows, y * ct.exp(ct.minimum(g_first - gc, MAX_SPLIT_EXP))) * \
            ct.exp(gb - g_first)
        dm_cols = ct.extract(dm, (0, blk), shape=(BT, BC))
        dy_b = mm_tf32(ct.transpose(dm_cols), x * ct.exp(ct.minimum(gc - g_end, MAX_SPLIT_EXP))) * \
            ct.exp(g_end - gb)
        poison = ct.max(g_first - g_end) > MAX_SPLIT_EXP
        dx = ct.insert(dx, (blk, 0), ct.where(poison, float("nan"), dx_b))
        dy = ct.insert(dy, (blk, 0), ct.where(poison, float("nan"), dy_b))
    return dx, dy


def to_gate(x, KDA: bool):
    """A [., BK] channel term reduced to the gate width (summed over channels for GDN)."""
    if KDA:
        return x
    return ct.sum(x, axis=1, keepdims=True)


def gram_bwd(dm, x, y, gc, BT: int, BC: int, BK: int, TIER: int):
    """(dx, dy) of the decayed Gram matrix for a masked dS; callers fold dG = x dx - y dy
    into their own dG terms (one product instead of two more live [BT, BK] tiles).
    Tier 1 forms its factors on the SFU where they are used rather than keeping e^(G-G_m)
    and e^(G_m-G); TF32 products (io-dtype operands with dS as hi + lo cost the same,
    6760 vs 6816 SASS in the WY adjoint, and lifted the emulated dg error by ~4 %)."""
    if TIER == 1:
        g_mid = ct.extract(gc, (BT // 2, 0), shape=(1, BK))
        dx = mm_tf32(dm, y * fast_exp(g_mid - gc)) * fast_exp(gc - g_mid)
        dy = mm_tf32(ct.transpose(dm), x * fast_exp(gc - g_mid)) * fast_exp(g_mid - gc)
        return dx, dy
    return gram_bwd_blocked(dm, x, y, gc, BT, BC, BK)
