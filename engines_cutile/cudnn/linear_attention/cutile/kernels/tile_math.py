"""Device helpers shared by the linear-attention cuTile kernels.

Plain functions called from inside `@ct.kernel` bodies (cuTile inlines them).

- `tril_inverse`: (I + A)^-1 for a strictly lower-triangular BT x BT tile A by recursive
  doubling of block inverses: 2 (log2(BT) - 1) bf16 tensor-core products instead of BT
  sequential forward-substitution steps, and numerically stable (products of inverses,
  not powers of A).
- `split_hi_lo`: an fp32 operand as two 16-bit tiles for products that need more than
  their 8 / 11 bits but should stay on the 16-bit tensor-core path (backward gradients).
- `l2_normalize_rows`: x / sqrt(sum(x^2) + 1e-6) per row (the spec's in-kernel l2norm);
  `l2_row_factor` the per-row factor alone (to fold into a product's row / column scale).
"""
import cuda.tile as ct

L2NORM_EPS = 1e-6


def mm_tf32(a, b):
    """a @ b for fp32 tiles on the TF32 tensor-core path, fp32 result."""
    acc = ct.zeros((a.shape[0], b.shape[1]), dtype=ct.float32)
    return ct.mma(ct.astype(a, ct.tfloat32), ct.astype(b, ct.tfloat32), acc)


def fast_exp(x):
    """exp on the SFU (ex2.approx, ~2 ulp): the precise exp costs ~10 instructions per
    element, which dominated KDA's per-channel decay factors."""
    return ct.exp(x, rounding_mode=ct.RoundingMode.APPROX)


def mm_bf16(a, b, acc):
    """acc + a @ b with both operands rounded to bf16 (fp32 accumulate)."""
    return ct.mma(ct.astype(a, ct.bfloat16), ct.astype(b, ct.bfloat16), acc)


def mma_dtype(dtype):
    """Tensor-core operand type for data stored as `dtype`: 16-bit types as they are, fp32
    (staged inputs and scratch) as TF32 - fp32 operands compile to FMA loops (KDA fp16
    backward: ~150k SASS and ~20-37 KB of spill per thread)."""
    if dtype == ct.float32:
        return ct.tfloat32
    return dtype


def split_hi_lo(a, dtype):
    """An fp32 tile as (hi, lo) tiles of `dtype`, hi = a rounded and lo = the remainder
    rounded: for a 16-bit dtype two tensor-core products carry ~2x its significant bits
    (bf16: ~16 instead of 8); for fp32, lo is zero."""
    hi = ct.astype(a, dtype)
    return hi, ct.astype(a - ct.astype(hi, ct.float32), dtype)


def row_col_index(n):
    """Row and column index tiles of shape [n, 1] and [1, n]."""
    idx = ct.arange(n, dtype=ct.int32)
    return ct.expand_dims(idx, axis=1), ct.expand_dims(idx, axis=0)


def tril_inverse(a, BT, LOG2_BT):
    """(I + a)^-1 for a strictly lower-triangular fp32 [BT, BT] tile, by recursive doubling.

    Level l (block size s = 2^l) merges the inverses of each block's two halves:
        T <- T - T @ A_l @ T,   A_l = the part of `a` in a block's lower-left quarter,
    i.e. [[T1, 0], [A21, T2]]^-1 = [[T1, 0], [-T2 A21 T1, T2]] for every block at once.
    Level 1 needs no product (T = I - A_1).  Every product is of inverses and `a`, so the
    rounding error stays at the operands' level even when T's Neumann series has huge
    terms (strongly correlated keys; the Neumann product this replaces lost all accuracy
    there, see engines_cutile/tests/tril_inverse_precision_test.py).  Operands are
    rounded to bf16 (fp32 accumulation and fp32 T): two dependent products per level."""
    r, c = row_col_index(BT)
    inv = ct.where(r == c, 1.0, 0.0) - ct.where(_lower_left_quarter(r, c, 1), a, 0.0)
    for lvl in ct.static_iter(range(2, LOG2_BT + 1)):
        x = mm_bf16(inv, ct.where(_lower_left_quarter(r, c, lvl), a, 0.0),
                    ct.zeros((BT, BT), dtype=ct.float32))
        inv = mm_bf16(-x, inv, inv)
    return inv


def _lower_left_quarter(r, c, lvl: int):
    """Mask of the entries whose row is in the second half and column in the first half
    of the same block of 2^lvl rows: r >> (lvl-1) == c >> (lvl-1) + 1 with the latter even."""
    hi_r = r >> (lvl - 1)
    hi_c = c >> (lvl - 1)
    return hi_r == ct.where((hi_c & 1) == 0, hi_c + 1, -1)


def l2_row_factor(x):
    """[n, 1] fp32 factors 1 / sqrt(sum(x^2) + eps) of a tile's rows (any float dtype)."""
    xf = ct.astype(x, ct.float32)
    return ct.rsqrt(ct.sum(xf * xf, axis=1, keepdims=True) + L2NORM_EPS)


def l2_normalize_rows(x):
    """Rows of an fp32 tile scaled to unit L2 norm (eps inside the square root)."""
    return x * ct.rsqrt(ct.sum(x * x, axis=1, keepdims=True) + L2NORM_EPS)
