"""FLA 0.6's gated delta rule ops over this library's kernels: `chunk_gated_delta_rule`
(alias `chunk_gdn`) and `fused_recurrent_gated_delta_rule` (alias `fused_recurrent_gdn`).

Same names, signatures, defaults, layouts, results and argument errors as
`fla.ops.gated_delta_rule` (see _arguments.py for what is refused and why). Both run
`cudnn.linear_attention.ops.gated_delta_net` (KDA's op when the recurrent form is given a
per-key decay `gk`) and both are differentiable (FLA's recurrent form has no backward).

Layout: q, k [B, T, H, K]; v [B, T, HV, V] with HV a multiple of H (value heads grouped
over consecutive q/k heads); g, beta [B, T, HV]; with `cu_seqlens` [N + 1], B = 1 and
the rows are N packed sequences. States [N, HV, K, V] (FLA's S), or [N, HV, V, K] with
`state_v_first=True`; final_state is float32, None unless output_final_state.
"""
from __future__ import annotations

from typing import Any

import torch

from cudnn.linear_attention import ops
from cudnn.linear_attention.fla import _arguments as args
from cudnn.linear_attention.fla._gates import beta_activation, gdn_gate
from cudnn.linear_attention.fla._run import run_op


def _check_heads(fn: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if q.shape[2] != k.shape[2]:
        raise ValueError(f"{fn}: argument 'k': expected the heads of q (H = {q.shape[2]}); "
                         f"got {k.shape[2]}")
    if v.shape[2] % q.shape[2]:
        raise ValueError(f"{fn}: argument 'v': expected value heads HV divisible by the "
                         f"q/k heads H = {q.shape[2]} (grouped value attention); "
                         f"got HV = {v.shape[2]}")


def chunk_gated_delta_rule(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
    scale: float | None = None, initial_state: torch.Tensor | None = None,
    output_final_state: bool = False, use_qk_l2norm_in_kernel: bool = False,
    use_beta_sigmoid_in_kernel: bool = False, allow_neg_eigval: bool = False,
    state_v_first: bool = False, cu_seqlens: torch.LongTensor | None = None,
    cu_seqlens_cpu: torch.LongTensor | None = None,
    chunk_indices: torch.LongTensor | None = None, cp_context: Any = None, **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Gated delta rule, chunked form (FLA's `chunk_gated_delta_rule`).

    Args:
        q, k: [B, T, H, K]. v: [B, T, HV, V], HV a multiple of H.
        g: [B, T, HV] log-decay; raw input when `use_gate_in_kernel=True` (keyword), then
            the decay is -exp(A_log) * softplus(g + dt_bias), `A_log` [HV] required,
            `dt_bias` [HV] optional (keywords).
        beta: [B, T, HV]; logits when use_beta_sigmoid_in_kernel (x2 if allow_neg_eigval).
        scale: default 1/sqrt(K).
        initial_state: [N, HV, K, V] (FLA's orientation; [N, HV, V, K] if state_v_first).
        cu_seqlens: [N + 1] boundaries of the packed sequences (B = 1); int32 or int64.
        cu_seqlens_cpu, chunk_indices: accepted, unused (the engines index on the device).
        cp_context: refused (NotImplementedError). kwargs `chunk_size` (16, 32 or 64;
            tiling only), `transpose_state_layout` (deprecated name of state_v_first);
            `head_first` is refused as in FLA.

    Returns:
        o [B, T, HV, V] in q's dtype, and final_state [N, HV, K, V] float32 or None.
    """
    fn = "chunk_gated_delta_rule"
    state_v_first = args.state_v_first_from(fn, state_v_first, kwargs)
    _check_heads(fn, q, k, v)
    args.refuse_head_first(fn, kwargs, always=True)
    args.check_chunk_size(fn, kwargs, (16, 32, 64))
    args.refuse_unserved(fn, cp_context=cp_context)
    args.check_packed(fn, q, cu_seqlens, initial_state)
    if kwargs.get("use_gate_in_kernel", False):
        if kwargs.get("A_log") is None:
            raise AssertionError(f"{fn}: argument 'A_log': expected a tensor [HV] when "
                                 "use_gate_in_kernel=True; got None")
        g = gdn_gate(g, kwargs["A_log"], kwargs.get("dt_bias"))
    args.check_neg_eigval(fn, allow_neg_eigval, use_beta_sigmoid_in_kernel)
    beta = beta_activation(beta, use_beta_sigmoid_in_kernel, allow_neg_eigval)
    return run_op(ops.gated_delta_net, q, k, v, (g, beta), scale=scale,
                  initial_state=initial_state, output_final_state=output_final_state,
                  use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                  state_v_first=state_v_first, cu_seqlens=cu_seqlens)


def fused_recurrent_gated_delta_rule(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor | None = None,
    gk: torch.Tensor | None = None, gv: torch.Tensor | None = None,
    beta: torch.Tensor | None = None, scale: float = None, initial_state: torch.Tensor = None,
    output_final_state: bool = False, use_qk_l2norm_in_kernel: bool = False,
    use_gate_in_kernel: bool = False, A_log: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None, use_beta_sigmoid_in_kernel: bool = False,
    allow_neg_eigval: bool = False, state_v_first: bool = False,
    cu_seqlens: torch.LongTensor | None = None, **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Gated delta rule, token-by-token form (FLA's `fused_recurrent_gated_delta_rule`):
    the same recurrence as the chunked form, differentiable here.

    Args as `chunk_gated_delta_rule`, plus:
        g: [B, T, HV] or None (no scalar decay).
        gk: [B, T, HV, K] decay per key channel (then the call runs KDA's op, with
            g added to every channel), or None.
        gv: decay per value channel: refused (NotImplementedError).
        beta: [B, T, HV], or None for ones; a beta per value channel is refused.
        use_gate_in_kernel, A_log [HV], dt_bias [HV]: the fused GDN gate on g.

    Returns:
        o [B, T, HV, V] in q's dtype, and final_state [N, HV, K, V] float32 or None.
    """
    fn = "fused_recurrent_gated_delta_rule"
    state_v_first = args.state_v_first_from(fn, state_v_first, kwargs)
    args.refuse_head_first(fn, kwargs, always=False)
    args.check_packed(fn, q, cu_seqlens, initial_state)
    args.refuse_unserved(fn, gv=gv)
    if beta is None:
        beta = q.new_ones((*v.shape[:3],), dtype=torch.float32)
    args.refuse_value_beta(fn, beta, v)
    if use_gate_in_kernel:
        if A_log is None:
            raise ValueError(f"{fn}: argument 'A_log': expected a tensor [HV] when "
                             "use_gate_in_kernel=True; got None")
        if g is None:
            raise ValueError(f"{fn}: argument 'g': expected the raw gate input [B, T, HV] "
                             "when use_gate_in_kernel=True; got None")
        g = gdn_gate(g, A_log, dt_bias)
    args.check_neg_eigval(fn, allow_neg_eigval, use_beta_sigmoid_in_kernel)
    beta = beta_activation(beta, use_beta_sigmoid_in_kernel, allow_neg_eigval)
    if gk is not None:  # a decay per key channel: KDA's recurrence (decays multiply)
        decay = gk.float() if g is None else gk.float() + g.float().unsqueeze(-1)
        op = ops.kimi_delta_attention
    else:
        decay = v.new_zeros(v.shape[:3], dtype=torch.float32) if g is None else g
        op = ops.gated_delta_net
    return run_op(op, q, k, v, (decay, beta), scale=scale, initial_state=initial_state,
                  output_final_state=output_final_state,
                  use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                  state_v_first=state_v_first, cu_seqlens=cu_seqlens)


chunk_gdn = chunk_gated_delta_rule
fused_recurrent_gdn = fused_recurrent_gated_delta_rule
