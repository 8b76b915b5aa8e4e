"""Span summaries as torch ops (docs/CONTEXT_PARALLEL.md): the affine map of a span.

For each sequence of cu_seqlens (a span) and output head, the span maps the state X_0
entering it (V-major [V, K]) to the state leaving it:

    X_L = X_0 @ transition + final_state(from zero)       (transition [K, K])

`<family>_summary(k, v, gates..., cu_seqlens, initial_state=None, ...)` returns
(final_state [N, HO, V, K] from initial_state (zero when None), transition [N, HO, K, K]).
`<family>_summary_bwd(q, k, g, beta, dO, cu_seqlens, scale=None, d_final_state=None,
output_transition=False, ...)` returns the gradient w.r.t. the entering state of
L = <o, dO> + <X_L, d_final_state> (no v is needed: the map is affine), and with
output_transition the backward transition (transition^T), so that
d_initial_state = d_final_state @ transition^T + d_initial_state(without d_final_state).

States are float32 (float64 for float64 k/q); HO = g.shape[1]. Non-differentiable.
Context parallelism (cudnn.linear_attention.context_parallel) composes them across ranks.
"""
from __future__ import annotations

import math

import torch

import cudnn
from cudnn.linear_attention.ops._summary_family import SummaryFamily
from cudnn.linear_attention.ops._summary_ops import SummaryOps

_Tensor = torch.Tensor
_COMMON_FLAGS = ("use_beta_sigmoid_in_kernel", "allow_neg_eigval")

GDN_SUMMARY = SummaryOps(SummaryFamily(
    name="gated_delta_net", graph_summary=cudnn.pygraph.gdn_summary,
    graph_summary_bwd=cudnn.pygraph.gdn_summary_bwd,
    gate_dims={"g": ("T", "HO"), "beta": ("T", "HO")}, beta_rule="fp32_or_io",
    dt_bias_dims=("HO",), gate_flags=(*_COMMON_FLAGS, "safe_gate")))
KDA_SUMMARY = SummaryOps(SummaryFamily(
    name="kimi_delta_attention", graph_summary=cudnn.pygraph.kda_summary,
    graph_summary_bwd=cudnn.pygraph.kda_summary_bwd,
    gate_dims={"g": ("T", "HO", "K"), "beta": ("T", "HO")}, beta_rule="fp32_or_io",
    dt_bias_dims=("HO", "K"), gate_flags=(*_COMMON_FLAGS, "safe_gate", "gate_lower_bound")))
# GDN-2's summaries also take gate_lower_bound (the spec's op table omits it; its graph
# node has it), so a safe gate with a non-default bound can be summarized.
GDN2_SUMMARY = SummaryOps(SummaryFamily(
    name="gated_delta_net_v2", graph_summary=cudnn.pygraph.gdn2_summary,
    graph_summary_bwd=cudnn.pygraph.gdn2_summary_bwd,
    gate_dims={"g": ("T", "HO", "K"), "beta": ("T", "HO", "K"), "w": ("T", "HO", "V")},
    beta_rule="io", dt_bias_dims=("HO", "K"),
    gate_flags=(*_COMMON_FLAGS, "beta_guard", "safe_gate", "gate_lower_bound")))

SUMMARY_OPS = (GDN_SUMMARY, KDA_SUMMARY, GDN2_SUMMARY)


def _summary(ops: SummaryOps, gates: tuple[_Tensor, ...], k: _Tensor, v: _Tensor,
             cu_seqlens: _Tensor, kwargs: dict) -> tuple[_Tensor, _Tensor]:
    return ops.summary.op(k, v, *gates, cu_seqlens, output_transition=True, **kwargs)


def _summary_bwd(ops: SummaryOps, q: _Tensor, k: _Tensor, g: _Tensor, beta: _Tensor,
                 dO: _Tensor, cu_seqlens: _Tensor, scale: float | None,
                 output_transition: bool, kwargs: dict):
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    d_init, transition = ops.summary_bwd.op(dO, q, k, g, beta, cu_seqlens, scale,
                                            output_transition=bool(output_transition),
                                            **kwargs)
    return (d_init, transition) if output_transition else d_init


def gated_delta_net_summary(k, v, g, beta, cu_seqlens, *, initial_state=None,
                            use_qk_l2norm_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                            allow_neg_eigval=False, safe_gate=False, gate_domain="log",
                            a_log=None, dt_bias=None, batch_invariant=False, plan_name=None):
    """GDN span summary: (final_state [N, HO, V, K], transition [N, HO, K, K]).

    k [T, HK, K], v [T, HV, V], g [T, HO], beta [T, HO] as gated_delta_net takes them;
    initial_state [N, HO, V, K] (float32) or None."""
    return _summary(GDN_SUMMARY, (g, beta), k, v, cu_seqlens, dict(
        initial_state=initial_state, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
        use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
        allow_neg_eigval=allow_neg_eigval, safe_gate=safe_gate, gate_domain=gate_domain,
        a_log=a_log, dt_bias=dt_bias, batch_invariant=batch_invariant, plan_name=plan_name))


def gated_delta_net_summary_bwd(q, k, g, beta, dO, cu_seqlens, *, scale=None,
                                d_final_state=None, output_transition=False,
                                use_qk_l2norm_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                                allow_neg_eigval=False, safe_gate=False, gate_domain="log",
                                a_log=None, dt_bias=None, batch_invariant=False,
                                plan_name=None):
    """GDN state gradient of a span: d_initial_state [N, HO, V, K], or (d_initial_state,
    transition^T) with output_transition. dO [T, HO, V]; d_final_state (float32) or None."""
    return _summary_bwd(GDN_SUMMARY, q, k, g, beta, dO, cu_seqlens, scale, output_transition,
                        dict(d_final_state=d_final_state,
                             use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                             use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                             allow_neg_eigval=allow_neg_eigval, safe_gate=safe_gate,
                             gate_domain=gate_domain, a_log=a_log, dt_bias=dt_bias,
                             batch_invariant=batch_invariant, plan_name=plan_name))


def kimi_delta_attention_summary(k, v, g, beta, cu_seqlens, *, initial_state=None,
                                 use_qk_l2norm_in_kernel=False,
                                 use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
                                 safe_gate=False, gate_lower_bound=None, gate_domain="log",
                                 a_log=None, dt_bias=None, batch_invariant=False,
                                 plan_name=None):
    """KDA span summary (g [T, HO, K]); see gated_delta_net_summary."""
    return _summary(KDA_SUMMARY, (g, beta), k, v, cu_seqlens, dict(
        initial_state=initial_state, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
        use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
        allow_neg_eigval=allow_neg_eigval, safe_gate=safe_gate,
        gate_lower_bound=gate_lower_bound, gate_domain=gate_domain, a_log=a_log,
        dt_bias=dt_bias, batch_invariant=batch_invariant, plan_name=plan_name))


def kimi_delta_attention_summary_bwd(q, k, g, beta, dO, cu_seqlens, *, scale=None,
                                     d_final_state=None, output_transition=False,
                                     use_qk_l2norm_in_kernel=False,
                                     use_beta_sigmoid_in_kernel=False,
                                     allow_neg_eigval=False, safe_gate=False,
                                     gate_lower_bound=None, gate_domain="log", a_log=None,
                                     dt_bias=None, batch_invariant=False, plan_name=None):
    """KDA state gradient of a span; see gated_delta_net_summary_bwd."""
    return _summary_bwd(KDA_SUMMARY, q, k, g, beta, dO, cu_seqlens, scale, output_transition,
                        dict(d_final_state=d_final_state,
                             use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                             use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                             allow_neg_eigval=allow_neg_eigval, safe_gate=safe_gate,
                             gate_lower_bound=gate_lower_bound, gate_domain=gate_domain,
                             a_log=a_log, dt_bias=dt_bias, batch_invariant=batch_invariant,
                             plan_name=plan_name))


def gated_delta_net_v2_summary(k, v, g, beta, w, cu_seqlens, *, initial_state=None,
                               use_qk_l2norm_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                               allow_neg_eigval=False, beta_guard=False, safe_gate=False,
                               gate_lower_bound=None, gate_domain="log", a_log=None,
                               dt_bias=None, batch_invariant=False, plan_name=None):
    """GDN-2 span summary (g, beta [T, HO, K], w [T, HO, V]); see gated_delta_net_summary."""
    return _summary(GDN2_SUMMARY, (g, beta, w), k, v, cu_seqlens, dict(
        initial_state=initial_state, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
        use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
        allow_neg_eigval=allow_neg_eigval, beta_guard=beta_guard, safe_gate=safe_gate,
        gate_lower_bound=gate_lower_bound, gate_domain=gate_domain, a_log=a_log,
        dt_bias=dt_bias, batch_invariant=batch_invariant, plan_name=plan_name))


def gated_delta_net_v2_summary_bwd(q, k, g, beta, dO, cu_seqlens, *, scale=None,
                                   d_final_state=None, output_transition=False,
                                   use_qk_l2norm_in_kernel=False,
                                   use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
                                   beta_guard=False, safe_gate=False, gate_lower_bound=None,
                                   gate_domain="log", a_log=None, dt_bias=None,
                                   batch_invariant=False, plan_name=None):
    """GDN-2 state gradient of a span (no w: the state gradient does not see it)."""
    return _summary_bwd(GDN2_SUMMARY, q, k, g, beta, dO, cu_seqlens, scale, output_transition,
                        dict(d_final_state=d_final_state,
                             use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                             use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                             allow_neg_eigval=allow_neg_eigval, beta_guard=beta_guard,
                             safe_gate=safe_gate, gate_lower_bound=gate_lower_bound,
                             gate_domain=gate_domain, a_log=a_log, dt_bias=dt_bias,
                             batch_invariant=batch_invariant, plan_name=plan_name))
