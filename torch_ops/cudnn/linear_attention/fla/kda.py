"""FLA 0.6's Kimi delta attention ops over this library's kernels: `chunk_kda` and
`fused_recurrent_kda`.

Same names, signatures, defaults, layouts, results and argument errors as `fla.ops.kda`
(see _arguments.py for what is refused and why). Both run
`cudnn.linear_attention.ops.kimi_delta_attention` and both are differentiable (FLA's
recurrent form records no autograd).

Layout: q, k [B, T, H, K]; v [B, T, HV, V], HV a multiple of H; g [B, T, HV, K];
beta [B, T, HV]; with `cu_seqlens` [N + 1], B = 1. States [N, HV, K, V] (FLA's S), or
[N, HV, V, K] with `state_v_first=True`; final_state is float32, None unless
output_final_state.
"""
from __future__ import annotations

from typing import Any

import torch

from cudnn.linear_attention import ops
from cudnn.linear_attention.fla import _arguments as args
from cudnn.linear_attention.fla._gates import beta_activation, channel_gate
from cudnn.linear_attention.fla._run import run_op


def check_lower_bound(fn: str, safe_gate: bool, use_gate_in_kernel: bool,
                      lower_bound: float | None) -> None:
    """FLA's safe gate fused in kernel needs a lower bound in [-5, 0)."""
    if not (safe_gate and use_gate_in_kernel):
        return
    if lower_bound is None:
        raise ValueError(f"{fn}: argument 'lower_bound': expected a float in [-5, 0) when "
                         "safe_gate=True and use_gate_in_kernel=True; got None")
    if not -5 <= lower_bound < 0:
        raise ValueError(f"{fn}: argument 'lower_bound': expected a float in [-5, 0); "
                         f"got {lower_bound}")


def kernel_gate_params(fn: str, kwargs: dict, use_gate_in_kernel: bool,
                       lower_bound: float | None, heads: str) -> tuple[Any, Any]:
    """(A_log, dt_bias) from FLA's keywords when the gate is computed in the kernel (None,
    None otherwise); A_log [heads] is required unless a lower bound replaces it."""
    if not use_gate_in_kernel:
        return None, None
    A_log, dt_bias = kwargs.get("A_log"), kwargs.get("dt_bias")
    if A_log is None and lower_bound is None:
        raise ValueError(f"{fn}: argument 'A_log': expected a tensor [{heads}] when "
                         "use_gate_in_kernel=True and lower_bound is None; got None")
    return A_log, dt_bias


def _check_shapes(fn: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
                  beta: torch.Tensor) -> None:
    """chunk_kda's shape rules (FLA asserts them, so AssertionError)."""
    B, T, H, K = q.shape
    HV = v.shape[2]
    rules = (("k", k.shape == q.shape, f"the shape of q {list(q.shape)}", list(k.shape)),
             ("v", HV % H == 0, f"value heads HV divisible by H = {H}", f"HV = {HV}"),
             ("g", tuple(g.shape) == (B, T, HV, K), f"[B, T, HV, K] = {[B, T, HV, K]}",
              list(g.shape)),
             ("beta", tuple(beta.shape) == (B, T, HV), f"[B, T, HV] = {[B, T, HV]}",
              list(beta.shape)))
    for name, ok, expected, given in rules:
        if not ok:
            raise AssertionError(f"{fn}: argument '{name}': expected {expected}; got {given}")


def chunk_kda(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
    scale: float | None = None, initial_state: torch.Tensor | None = None,
    output_final_state: bool = False, use_qk_l2norm_in_kernel: bool = False,
    use_gate_in_kernel: bool = False, use_beta_sigmoid_in_kernel: bool = False,
    allow_neg_eigval: bool = False, safe_gate: bool = False,
    lower_bound: float | None = None, disable_recompute: bool = False,
    return_intermediate_states: bool = False, state_v_first: bool = False,
    cu_seqlens: torch.LongTensor | None = None, cu_seqlens_cpu: torch.LongTensor | None = None,
    cp_context: Any = None, use_graph: bool = False, max_num_seqs: int | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Kimi delta attention, chunked form (FLA's `chunk_kda`).

    Args:
        q, k: [B, T, H, K]. v: [B, T, HV, V], HV a multiple of H.
        g: [B, T, HV, K] log-decay; raw input when use_gate_in_kernel, then the decay is
            -exp(A_log) * softplus(g + dt_bias), or lower_bound * sigmoid(exp(A_log) *
            (g + dt_bias)) when lower_bound is set (A_log may then be None); keywords
            `A_log` [HV] and `dt_bias` [HV * K].
        beta: [B, T, HV]; logits when use_beta_sigmoid_in_kernel (x2 if allow_neg_eigval).
        initial_state: float32 [N, HV, K, V] ([N, HV, V, K] if state_v_first).
        safe_gate: with use_gate_in_kernel, requires lower_bound in [-5, 0); otherwise a
            hint with no effect here. disable_recompute, cu_seqlens_cpu, use_graph:
            accepted, no effect. return_intermediate_states, cp_context: refused.
        kwargs `chunk_size` (32 or 64; tiling only), `transpose_state_layout`.

    Returns:
        o [B, T, HV, V] in q's dtype, and final_state [N, HV, K, V] float32 or None.
    """
    fn = "chunk_kda"
    state_v_first = args.state_v_first_from(fn, state_v_first, kwargs)
    args.refuse_head_first(fn, kwargs, always=False)
    args.refuse_unserved(fn, cp_context=cp_context,
                         return_intermediate_states=return_intermediate_states)
    args.check_packed(fn, q, cu_seqlens, initial_state)
    args.require_float32_state(fn, initial_state)
    A_log, dt_bias = kernel_gate_params(fn, kwargs, use_gate_in_kernel, lower_bound, "HV")
    args.check_chunk_size(fn, kwargs, (32, 64))
    check_lower_bound(fn, safe_gate, use_gate_in_kernel, lower_bound)
    args.check_neg_eigval(fn, allow_neg_eigval, use_beta_sigmoid_in_kernel)
    _check_shapes(fn, q, k, v, g, beta)
    args.check_graph_sequences(fn, cu_seqlens, use_graph, max_num_seqs)
    if use_gate_in_kernel:
        g = channel_gate(g, A_log, dt_bias, lower_bound)
    beta = beta_activation(beta, use_beta_sigmoid_in_kernel, allow_neg_eigval)
    return run_op(ops.kimi_delta_attention, q, k, v, (g, beta), scale=scale,
                  initial_state=initial_state, output_final_state=output_final_state,
                  use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                  state_v_first=state_v_first, cu_seqlens=cu_seqlens)


def fused_recurrent_kda(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
    A_log: torch.Tensor | None = None, dt_bias: torch.Tensor | None = None,
    scale: float | None = None, initial_state: torch.Tensor = None,
    output_final_state: bool = False, use_qk_l2norm_in_kernel: bool = False,
    use_gate_in_kernel: bool = False, use_beta_sigmoid_in_kernel: bool = False,
    allow_neg_eigval: bool = False, lower_bound: float | None = None,
    state_v_first: bool = False, cu_seqlens: torch.LongTensor | None = None, **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Kimi delta attention, token-by-token form (FLA's `fused_recurrent_kda`); the same
    recurrence as `chunk_kda`, differentiable here.

    Args as `chunk_kda`, with A_log [HV] and dt_bias [HV * K] as arguments (used only
    when use_gate_in_kernel; a missing A_log then counts as A_log = 1, as in FLA's
    kernel); initial_state in any float dtype; a beta per value channel is refused.

    Returns:
        o [B, T, HV, V] in q's dtype, and final_state [N, HV, K, V] float32 or None.
    """
    fn = "fused_recurrent_kda"
    state_v_first = args.state_v_first_from(fn, state_v_first, kwargs)
    args.refuse_head_first(fn, kwargs, always=False)
    args.check_packed(fn, q, cu_seqlens, initial_state)
    args.check_neg_eigval(fn, allow_neg_eigval, use_beta_sigmoid_in_kernel)
    args.refuse_value_beta(fn, beta, v)
    if use_gate_in_kernel:
        g = channel_gate(g, A_log, dt_bias, lower_bound)
    beta = beta_activation(beta, use_beta_sigmoid_in_kernel, allow_neg_eigval)
    return run_op(ops.kimi_delta_attention, q, k, v, (g, beta), scale=scale,
                  initial_state=initial_state, output_final_state=output_final_state,
                  use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                  state_v_first=state_v_first, cu_seqlens=cu_seqlens)
