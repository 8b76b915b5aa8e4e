"""Relative-error comparison used by every numerics test against the float64 references.

rel_err(actual, expected) = ||actual - expected||_2 / ||expected||_2 over the whole tensor,
computed in float64 (0 when both are empty or both are exactly zero).
"""
from __future__ import annotations

import torch


def rel_err(actual: torch.Tensor, expected: torch.Tensor) -> float:
    if actual.shape != expected.shape:
        raise ValueError(f"rel_err: shapes differ: {list(actual.shape)} vs expected {list(expected.shape)}")
    a = actual.detach().to(device="cpu", dtype=torch.float64)
    e = expected.detach().to(device="cpu", dtype=torch.float64)
    diff = torch.linalg.vector_norm(a - e).item()
    ref = torch.linalg.vector_norm(e).item()
    if ref == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return diff / ref


def assert_rel_close(name: str, actual: torch.Tensor, expected: torch.Tensor, bound: float) -> None:
    """Raises AssertionError naming the tensor when rel_err exceeds bound (or is not finite)."""
    err = rel_err(actual, expected)
    if not err <= bound:  # also catches nan
        raise AssertionError(f"{name}: relative error {err:.3e} exceeds {bound:.1e} (shape {list(expected.shape)})")
