"""FLA's layouts to the ops' and back: [B, T, H, D] tensors to THD, states [N, H, K, V] to
the ops' V-major [N, H, V, K].

Tokens: FLA takes [B, T, H, D]; with `cu_seqlens` B must be 1 and the T tokens hold the
packed sequences. The ops take the same tokens as [B * T, H, D] (a view when the tensor is
dense) plus cu_seqlens, which for a dense batch of B sequences of T tokens is
[0, T, 2T, ..., B T].

States: FLA keeps S as [K, V] per (sequence, head) unless `state_v_first=True`; the ops keep
X = S^T, [V, K]. When K == V the two have the same shape, so a state passed the wrong way
round is not caught by any shape check and gives wrong numbers: this module is the one
place that transposes, and it always does unless the caller said `state_v_first=True`.
Transposed states are made contiguous (the kernels read dense states); gradients flow
back through the transpose.
"""
from __future__ import annotations

import torch


def tokens(x: torch.Tensor) -> torch.Tensor:
    """[B, T, ...] -> [B * T, ...] (a view for dense tensors)."""
    return x.reshape(x.shape[0] * x.shape[1], *x.shape[2:])


def batched(x: torch.Tensor, batch: int, length: int) -> torch.Tensor:
    """[B * T, ...] -> [B, T, ...]."""
    return x.reshape(batch, length, *x.shape[1:])


def dense_cu_seqlens(batch: int, length: int, device: torch.device) -> torch.Tensor:
    """[0, T, 2T, ..., B T] (int32: what the engines read, no conversion needed)."""
    if length == 0:
        return torch.zeros(batch + 1, dtype=torch.int32, device=device)
    return torch.arange(0, batch * length + 1, length, dtype=torch.int32, device=device)


def state_to_ops(state: torch.Tensor | None, state_v_first: bool) -> torch.Tensor | None:
    """An FLA state ([N, H, K, V], or [N, H, V, K] when state_v_first) as the ops' [N, H, V, K]."""
    if state is None or state_v_first:
        return state
    return state.transpose(-1, -2).contiguous()


def state_from_ops(state: torch.Tensor, state_v_first: bool) -> torch.Tensor:
    """The ops' final state [N, H, V, K] as FLA returns it: float32, [N, H, K, V] unless
    state_v_first."""
    state = state.float()
    if state_v_first:
        return state
    return state.transpose(-1, -2).contiguous()
