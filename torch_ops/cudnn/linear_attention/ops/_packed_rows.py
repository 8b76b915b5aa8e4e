"""Packed rows for one op call: the kernels read dense [T, heads, dim] rows (FROST checks
`is_contiguous`, cuTile loads whole rows), while callers hand in views: transformers'
Qwen3-Next / Kimi Linear layers pass slices of a fused projection (outer strides larger
than the row) and transposed convolution outputs (innermost stride T). flash-linear-
attention accepts both, so the ops do too: every tensor argument that is not contiguous
is copied once with `Tensor.contiguous()`, which autograd differentiates (the gradient
comes back in the caller's layout); a contiguous one is passed as it is, without a copy.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def packed_rows(args: tuple[Any, ...], positions: Sequence[int]) -> tuple[Any, ...]:
    """`args` with each tensor at `positions` contiguous (the same tuple when all are)."""
    out = None
    for i in positions:
        t = args[i]
        if isinstance(t, torch.Tensor) and not t.is_contiguous():
            if out is None:
                out = list(args)
            out[i] = t.contiguous()
    return args if out is None else tuple(out)
