"""One drop-in call: FLA-layout tensors in, the linear-attention op, FLA-layout results out.

`run_op(op, q, k, v, gates, ...)` takes q/k/v [B, T, H(V), D] and the family's activated
gates ([B, T, HV] or [B, T, HV, K|V]), runs the op on the THD views with cu_seqlens (the
caller's, or [0, T, ..., B T] for a dense batch), and returns (o [B, T, HV, V] in q's dtype,
final_state float32 in FLA's state layout, or None). The op converts gate, index and
state dtypes to what its engine reads (ops/_dtype_normalise.py).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from cudnn.linear_attention.fla import _layout


def run_op(op: Callable[..., tuple[torch.Tensor, ...]], q: torch.Tensor, k: torch.Tensor,
           v: torch.Tensor, gates: Sequence[torch.Tensor], *, scale: float | None,
           initial_state: torch.Tensor | None, output_final_state: bool,
           use_qk_l2norm_in_kernel: bool, state_v_first: bool,
           cu_seqlens: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    batch, length = q.shape[0], q.shape[1]
    if cu_seqlens is None:
        cu_seqlens = _layout.dense_cu_seqlens(batch, length, q.device)
    kwargs: dict[str, Any] = dict(
        scale=scale, initial_state=_layout.state_to_ops(initial_state, state_v_first),
        output_final_state=output_final_state,
        use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)
    o, final = op(_layout.tokens(q), _layout.tokens(k), _layout.tokens(v),
                  *(_layout.tokens(t) for t in gates), cu_seqlens, **kwargs)
    o = _layout.batched(o, batch, length)
    if not output_final_state:
        return o, None
    return o, _layout.state_from_ops(final, state_v_first)
