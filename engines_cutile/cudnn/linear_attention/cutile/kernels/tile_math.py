"""Device helpers shared by the linear-attention cuTile kernels.

Plain functions called from inside `@ct.kernel` bodies (cuTile inlines them).

- `tril_inverse`: (I + A)^-1 for a strictly lower-triangular BT x BT tile A.  A is
  nilpotent, so (I - N)^-1 = (I + N)(I + N^2)(I + N^4)...(I + N^(BT/2)) with N = -A:
  log2(BT) squarings and products on the tensor cores (TF32) instead of BT sequential
  forward-substitution steps.
- `l2_normalize_rows`: x / sqrt(sum(x^2) + 1e-6) per row (the spec's in-kernel l2norm).
"""
import cuda.tile as ct

L2NORM_EPS = 1e-6


def mm_tf32(a, b):
    """a @ b for fp32 tiles on the TF32 tensor-core path, fp32 result."""
    acc = ct.zeros((a.shape[0], b.shape[1]), dtype=ct.float32)
    return ct.mma(ct.astype(a, ct.tfloat32), ct.astype(b, ct.tfloat32), acc)


def mm_bf16(a, b, acc):
    """acc + a @ b with both operands rounded to bf16 (fp32 accumulate)."""
    return ct.mma(ct.astype(a, ct.bfloat16), ct.astype(b, ct.bfloat16), acc)


def row_col_index(n):
    """Row and column index tiles of shape [n, 1] and [1, n]."""
    idx = ct.arange(n, dtype=ct.int32)
    return ct.expand_dims(idx, axis=1), ct.expand_dims(idx, axis=0)


def tril_inverse(a, BT, LOG2_BT):
    """(I + a)^-1 for a strictly lower-triangular fp32 [BT, BT] tile."""
    r, c = row_col_index(BT)
    neg = -a
    inv = ct.where(r == c, 1.0, 0.0) + neg
    power = neg
    for _ in range(LOG2_BT - 1):
        power = mm_tf32(power, power)
        inv = inv + mm_tf32(inv, power)
    return inv


def l2_normalize_rows(x):
    """Rows of an fp32 tile scaled to unit L2 norm (eps inside the square root)."""
    return x * ct.rsqrt(ct.sum(x * x, axis=1, keepdims=True) + L2NORM_EPS)
