"""Precision of the WY inverse T = (I + A)^-1 (kernels/tile_math.tril_inverse) on the CPU.

A = strict_lower(beta_i (k_i . k_j) exp(G_i - G_j)) of one 64-row chunk.  With keys that
share a common direction (cosine rho between rows), slow decay and beta near 1, the
Neumann series of A has terms of size C(63, 31) ~ 1e18 that cancel, so the product form
(I - A)(I + A^2)(I + A^4)... loses every digit once its operands are rounded (TF32 or
bf16); the recursive doubling the kernel uses multiplies only inverses and A, so its
error stays at the bf16 operand level.  The kernel's own function runs on the tile
emulator (bf16 operands, fp32 accumulation); the float64 inverse is the reference.
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tile_emulator import bfloat16, emulated_kernels, tfloat32, astype  # noqa: E402

BT = 64


def chunk_a(rho: float, beta_min: float, gate_scale: float, seed: int, K: int = 128):
    rng = np.random.default_rng(seed)
    common = rng.standard_normal(K)
    k = rho * common + np.sqrt(1 - rho ** 2) * rng.standard_normal((BT, K))
    k = astype(k / np.linalg.norm(k, axis=1, keepdims=True), bfloat16).astype(np.float64)
    beta = rng.uniform(beta_min, 1.0, BT)
    G = np.cumsum(-gate_scale * rng.uniform(0, 1, BT))
    decay = np.exp(np.minimum(G[:, None] - G[None, :], 0.0))
    return np.tril(beta[:, None] * (k @ k.T) * decay, -1)


def kernel_inverse(a: np.ndarray) -> np.ndarray:
    with emulated_kernels() as kern:
        return kern.tile_math.tril_inverse(a.astype(np.float32), BT, 6).astype(np.float64)


def neumann_product(a: np.ndarray, operand_dtype) -> np.ndarray:
    """The product form the kernel used before (emulated: rounded operands, fp32 sums)."""
    def mm(x, y):
        return (astype(x, operand_dtype).astype(np.float64) @
                astype(y, operand_dtype).astype(np.float64)).astype(np.float32)
    neg = -a.astype(np.float32)
    inv, power = np.eye(BT, dtype=np.float32) + neg, neg
    for _ in range(5):
        power = mm(power, power)
        inv = inv + mm(inv, power)
    return inv.astype(np.float64)


def rel(x, ref):
    return np.linalg.norm(x - ref) / np.linalg.norm(ref)


CHUNKS = [  # (rho, beta_min, gate scale): independent keys .. identical keys, no decay
    (0.0, 0.0, 0.7), (0.3, 0.5, 0.3), (0.6, 0.5, 0.1), (0.8, 0.8, 0.05), (0.9, 0.9, 0.01),
    (0.97, 0.95, 0.0), (1.0, 1.0, 0.0)]


@pytest.mark.parametrize("rho, beta_min, gate_scale", CHUNKS)
def test_kernel_inverse_keeps_bf16_accuracy(rho, beta_min, gate_scale):
    for seed in range(2):
        a = chunk_a(rho, beta_min, gate_scale, seed)
        ref = np.linalg.inv(np.eye(BT) + a)
        err = rel(kernel_inverse(a), ref)
        # bf16 operands: 2^-9 per rounding, a few roundings per level, cancellation-free
        assert err <= 1.2e-2, f"rho={rho} seed={seed}: rel. error {err:.2e}"
        if rho == 0.0:
            assert err <= 1e-3


def test_neumann_product_fails_where_doubling_does_not():
    """Why the kernel changed algorithm: the product form's error on correlated keys."""
    a = chunk_a(0.8, 0.8, 0.05, seed=0)
    ref = np.linalg.inv(np.eye(BT) + a)
    assert rel(neumann_product(a, tfloat32), ref) > 1.0
    assert rel(kernel_inverse(a), ref) < 1e-2


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
