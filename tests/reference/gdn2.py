"""GDN-2 float64 references: token-by-token forward and its autograd backward.

Spec docs/LINEAR_ATTENTION.md §3.3: per-channel decay alpha_t in (0, 1]^K,
channel-wise erase gate b_t in R^K (the beta port, after the optional sigmoid) and write
gate w_t in R^V (used as given), FLA orientation S [K, V]:

    S' = Diag(alpha_t) S_{t-1};  u_t = w_t * v_t - S'^T (b_t * k_t);  S_t = S' + k_t u_t^T
    o_t = scale S_t^T q_t

Shapes as KDA (kda.py) except beta [T, HO, K] and the extra w [T, HO, V]. beta_guard
(docs/LINEAR_ATTENTION.md §3.4) is not modelled here.
"""
from __future__ import annotations

import torch

from tests.reference.delta_rule import LinearAttentionGrads, Primals, recurrent_grads, run_recurrent
from tests.reference.preprocess import Family, Options

Tensor = torch.Tensor


def naive_recurrent_gdn2(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, w: Tensor, cu_seqlens: Tensor, *,
    scale: float | None = None, initial_state: Tensor | None = None, output_final_state: bool = False,
    use_qk_l2norm: bool = False, use_beta_sigmoid: bool = False, allow_neg_eigval: bool = False,
    safe_gate: bool = False, gate_domain: str = "log", gate_lower_bound: float | None = None,
    a_log: Tensor | None = None, dt_bias: Tensor | None = None,
) -> tuple[Tensor, Tensor | None]:
    opts = Options(
        scale=scale, use_qk_l2norm=use_qk_l2norm, use_beta_sigmoid=use_beta_sigmoid,
        allow_neg_eigval=allow_neg_eigval, safe_gate=safe_gate, gate_domain=gate_domain,
        gate_lower_bound=gate_lower_bound,
    )
    x = Primals(q, k, v, g, beta, cu_seqlens, w=w, initial_state=initial_state, a_log=a_log, dt_bias=dt_bias)
    return run_recurrent("naive_recurrent_gdn2", Family.GDN2, opts, x, output_final_state)


def naive_recurrent_gdn2_bwd(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, w: Tensor, cu_seqlens: Tensor, dO: Tensor, *,
    d_final_state: Tensor | None = None, scale: float | None = None, initial_state: Tensor | None = None,
    use_qk_l2norm: bool = False, use_beta_sigmoid: bool = False, allow_neg_eigval: bool = False,
    safe_gate: bool = False, gate_domain: str = "log", gate_lower_bound: float | None = None,
    a_log: Tensor | None = None, dt_bias: Tensor | None = None,
) -> LinearAttentionGrads:
    opts = Options(
        scale=scale, use_qk_l2norm=use_qk_l2norm, use_beta_sigmoid=use_beta_sigmoid,
        allow_neg_eigval=allow_neg_eigval, safe_gate=safe_gate, gate_domain=gate_domain,
        gate_lower_bound=gate_lower_bound,
    )
    x = Primals(q, k, v, g, beta, cu_seqlens, w=w, initial_state=initial_state, a_log=a_log, dt_bias=dt_bias)
    return recurrent_grads("naive_recurrent_gdn2_bwd", Family.GDN2, opts, x, dO, d_final_state)
