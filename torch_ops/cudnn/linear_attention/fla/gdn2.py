"""FLA 0.6's Gated DeltaNet-2 ops over this library's kernels: `chunk_gdn2` and
`fused_recurrent_gdn2`.

Same names, signatures, defaults, layouts, results and argument errors as `fla.ops.gdn2`
(see _arguments.py for what is refused and why). Both run
`cudnn.linear_attention.ops.gated_delta_net_v2` (whose `beta` is FLA's erase gate `b`)
and both are differentiable (FLA's recurrent form is inference-only).

Layout: q, k, g, b [B, T, H, K]; v, w [B, T, H, V] (the recurrent form also takes
HV = a multiple of H value heads, with g, b, w at HV heads); with `cu_seqlens` [N + 1],
B = 1. States [N, H, K, V] (FLA's S), or [N, H, V, K] with `state_v_first=True`;
final_state is float32, None unless output_final_state.
"""
from __future__ import annotations

from typing import Any

import torch

from cudnn.linear_attention import ops
from cudnn.linear_attention.fla import _arguments as args
from cudnn.linear_attention.fla._gates import channel_gate
from cudnn.linear_attention.fla._run import run_op
from cudnn.linear_attention.fla.kda import check_lower_bound, kernel_gate_params


def _require(fn: str, name: str, ok: bool, expected: str, given: Any) -> None:
    """FLA asserts these shape rules, so AssertionError."""
    if not ok:
        raise AssertionError(f"{fn}: argument '{name}': expected {expected}; got {given}")


def chunk_gdn2(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, b: torch.Tensor,
    w: torch.Tensor, scale: float | None = None, initial_state: torch.Tensor | None = None,
    output_final_state: bool = False, use_qk_l2norm_in_kernel: bool = False,
    use_gate_in_kernel: bool = False, cu_seqlens: torch.LongTensor | None = None,
    cu_seqlens_cpu: torch.LongTensor | None = None, safe_gate: bool = False,
    lower_bound: float | None = None, disable_recompute: bool = False,
    return_intermediate_states: bool = False, state_v_first: bool = False,
    cp_context: Any = None, **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Gated DeltaNet-2, chunked form (FLA's `chunk_gdn2`).

    Args:
        q, k, g: [B, T, H, K]; g the log-decay, or raw input when use_gate_in_kernel
            (the KDA gate: keywords `A_log` [H], `dt_bias` [H * K], lower_bound).
        b: [B, T, H, K] erase gate. v, w: [B, T, H, V]; w the write gate.
        initial_state: float32 [N, H, K, V] ([N, H, V, K] if state_v_first).
        safe_gate, lower_bound, disable_recompute, cu_seqlens_cpu,
        return_intermediate_states, cp_context, `chunk_size` (64 only), as `chunk_kda`.

    Returns:
        o [B, T, H, V] in q's dtype, and final_state [N, H, K, V] float32 or None.
    """
    fn = "chunk_gdn2"
    state_v_first = args.state_v_first_from(fn, state_v_first, kwargs)
    args.refuse_head_first(fn, kwargs, always=False)
    args.refuse_unserved(fn, cp_context=cp_context,
                         return_intermediate_states=return_intermediate_states)
    args.check_packed(fn, q, cu_seqlens, initial_state)
    args.require_float32_state(fn, initial_state)
    A_log, dt_bias = kernel_gate_params(fn, kwargs, use_gate_in_kernel, lower_bound, "H")
    args.check_chunk_size(fn, kwargs, (64,))
    check_lower_bound(fn, safe_gate, use_gate_in_kernel, lower_bound)
    _require(fn, "k", q.shape == k.shape == g.shape, f"q, k and g of one shape {list(q.shape)}",
             f"k {list(k.shape)}, g {list(g.shape)}")
    _require(fn, "b", b.shape == q.shape, f"the shape of q {list(q.shape)}", list(b.shape))
    _require(fn, "w", w.shape == v.shape, f"the shape of v {list(v.shape)}", list(w.shape))
    _require(fn, "v", tuple(v.shape[:3]) == tuple(q.shape[:3]),
             f"[B, T, H, V] with q's B, T, H = {list(q.shape[:3])}", list(v.shape))
    if use_gate_in_kernel:
        g = channel_gate(g, A_log, dt_bias, lower_bound)
    return run_op(ops.gated_delta_net_v2, q, k, v, (g, b, w), scale=scale,
                  initial_state=initial_state, output_final_state=output_final_state,
                  use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                  state_v_first=state_v_first, cu_seqlens=cu_seqlens)


def fused_recurrent_gdn2(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, b: torch.Tensor,
    w: torch.Tensor, A_log: torch.Tensor | None = None, dt_bias: torch.Tensor | None = None,
    scale: float | None = None, initial_state: torch.Tensor | None = None,
    output_final_state: bool = False, use_qk_l2norm_in_kernel: bool = False,
    use_gate_in_kernel: bool = False, lower_bound: float | None = None,
    state_v_first: bool = False, cu_seqlens: torch.LongTensor | None = None, **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Gated DeltaNet-2, token-by-token form (FLA's `fused_recurrent_gdn2`); the same
    recurrence as `chunk_gdn2`, differentiable here. v, w [B, T, HV, V] and g, b
    [B, T, HV, K] with HV a multiple of H; A_log [HV], dt_bias [HV * K] used only when
    use_gate_in_kernel; initial_state in any float dtype.

    Returns:
        o [B, T, HV, V] in q's dtype, and final_state [N, HV, K, V] float32 or None.
    """
    fn = "fused_recurrent_gdn2"
    state_v_first = args.state_v_first_from(fn, state_v_first, kwargs)
    args.refuse_head_first(fn, kwargs, always=False)
    args.check_packed(fn, q, cu_seqlens, initial_state)
    expected_b = (*v.shape[:3], k.shape[-1])
    _require(fn, "b", tuple(b.shape) == expected_b, f"[B, T, HV, K] = {list(expected_b)}",
             list(b.shape))
    _require(fn, "w", w.shape == v.shape, f"the shape of v {list(v.shape)}", list(w.shape))
    if use_gate_in_kernel:
        g = channel_gate(g, A_log, dt_bias, lower_bound)
    return run_op(ops.gated_delta_net_v2, q, k, v, (g, b, w), scale=scale,
                  initial_state=initial_state, output_final_state=output_final_state,
                  use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                  state_v_first=state_v_first, cu_seqlens=cu_seqlens)
