"""The opt-in strict check of a cu_seqlens table, on the device.

By default nothing reads cu_seqlens on the host: a call never synchronises, and the GPU
kernels are safe for any table by construction (every sequence's rows are clamped into
[0, T], an inverted range is empty, and output rows no sequence covers are zeroed; see
engines_frost/.../kernels/seq_bounds.py and engines_cutile/.../kernels/seq_bounds.py).
A malformed table then gives defined but meaningless results. Strict mode finds it
instead: `check_cu_seqlens(cu, total_tokens, where)` evaluates the table's rules on its
device (0 = cu[0] <= cu[1] <= ... <= cu[N] = T), synchronises once to read the verdict,
and raises ValueError naming the first bad entry. It is on when a launcher or op is
called with `strict_cu_seqlens=True`, or when the environment variable
CUDNN_STRICT_CU_SEQLENS is set to anything but "" or "0" (`strict_requested`).
torch is imported on first use only.
"""
from __future__ import annotations

import os
from typing import Any

STRICT_ENV = "CUDNN_STRICT_CU_SEQLENS"


def strict_requested(flag: bool | None = None) -> bool:
    """`flag` when given, else whether CUDNN_STRICT_CU_SEQLENS asks for strict mode."""
    if flag is not None:
        return bool(flag)
    return os.environ.get(STRICT_ENV, "") not in ("", "0")


def check_cu_seqlens(cu_seqlens: Any, total_tokens: int, where: str) -> None:
    """ValueError unless cu_seqlens (a 1-D integer torch tensor) runs from 0 to
    total_tokens without decreasing. One synchronisation with its device."""
    import torch

    n = cu_seqlens.numel()
    if cu_seqlens.dim() != 1 or n == 0:
        raise ValueError(f"{where}: cu_seqlens must be a 1-D table of N + 1 >= 1 entries, "
                         f"got shape {list(cu_seqlens.shape)}")
    c = cu_seqlens.to(torch.int64)
    bad = (c < 0) | (c > total_tokens)
    bad[0] |= c[0] != 0
    bad[-1] |= c[-1] != total_tokens
    bad[1:] |= c[1:] < c[:-1]
    if not bool(bad.any()):  # the one synchronisation
        return
    values = c.tolist()
    i = int(torch.nonzero(bad)[0].item())
    raise ValueError(f"{where}: cu_seqlens[{i}] = {values[i]}: {_rule(values, i, total_tokens)} "
                     f"(strict mode: {STRICT_ENV} or strict_cu_seqlens=True; table "
                     f"{_show(values)})")


def _rule(values: list[int], i: int, total: int) -> str:
    x = values[i]
    if x < 0:
        return "a negative boundary"
    if x > total:
        return f"past the token count total_T = {total}"
    if i == 0:
        return "the table must start at 0"
    if x < values[i - 1]:
        return (f"below cu_seqlens[{i - 1}] = {values[i - 1]} (the table must not "
                "decrease)")
    return f"the last entry must equal the token count total_T = {total}"


def _show(values: list[int], limit: int = 12) -> str:
    if len(values) <= limit:
        return str(values)
    return f"[{', '.join(map(str, values[:limit]))}, ... ({len(values)} entries)]"


__all__ = ["STRICT_ENV", "check_cu_seqlens", "strict_requested"]
