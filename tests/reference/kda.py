"""KDA (Kimi delta attention) float64 references: token-by-token and chunked, forward and backward.

Spec docs/LINEAR_ATTENTION.md §3.2: GDN with a per-key-channel decay
alpha_t = exp(gamma_t) in (0, 1]^K (FLA orientation S [K, V], rows over K):

    S' = Diag(alpha_t) S_{t-1};  u_t = beta_t (v_t - S'^T k_t);  S_t = S' + k_t u_t^T;  o_t = scale S_t^T q_t

Shapes as GDN (gdn.py) except g [T, HO, K] and dt_bias [HO, K]; the safe gate is
gamma = lb * sigmoid(exp(a_log) (g + dt_bias)) with lb = gate_lower_bound (default -5).
"""
from __future__ import annotations

import torch

from tests.reference.delta_rule import (
    DEFAULT_CHUNK_SIZE,
    LinearAttentionGrads,
    Primals,
    chunked_grads,
    recurrent_grads,
    run_chunked,
    run_recurrent,
)
from tests.reference.preprocess import Family, Options

Tensor = torch.Tensor


def naive_recurrent_kda(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, cu_seqlens: Tensor, *,
    scale: float | None = None, initial_state: Tensor | None = None, output_final_state: bool = False,
    use_qk_l2norm: bool = False, use_beta_sigmoid: bool = False, allow_neg_eigval: bool = False,
    safe_gate: bool = False, gate_lower_bound: float | None = None, gate_domain: str = "log",
    a_log: Tensor | None = None, dt_bias: Tensor | None = None,
) -> tuple[Tensor, Tensor | None]:
    opts = Options(
        scale=scale, use_qk_l2norm=use_qk_l2norm, use_beta_sigmoid=use_beta_sigmoid,
        allow_neg_eigval=allow_neg_eigval, safe_gate=safe_gate, gate_domain=gate_domain,
        gate_lower_bound=gate_lower_bound,
    )
    x = Primals(q, k, v, g, beta, cu_seqlens, initial_state=initial_state, a_log=a_log, dt_bias=dt_bias)
    return run_recurrent("naive_recurrent_kda", Family.KDA, opts, x, output_final_state)


def naive_recurrent_kda_bwd(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, cu_seqlens: Tensor, dO: Tensor, *,
    d_final_state: Tensor | None = None, scale: float | None = None, initial_state: Tensor | None = None,
    use_qk_l2norm: bool = False, use_beta_sigmoid: bool = False, allow_neg_eigval: bool = False,
    safe_gate: bool = False, gate_lower_bound: float | None = None, gate_domain: str = "log",
    a_log: Tensor | None = None, dt_bias: Tensor | None = None,
) -> LinearAttentionGrads:
    opts = Options(
        scale=scale, use_qk_l2norm=use_qk_l2norm, use_beta_sigmoid=use_beta_sigmoid,
        allow_neg_eigval=allow_neg_eigval, safe_gate=safe_gate, gate_domain=gate_domain,
        gate_lower_bound=gate_lower_bound,
    )
    x = Primals(q, k, v, g, beta, cu_seqlens, initial_state=initial_state, a_log=a_log, dt_bias=dt_bias)
    return recurrent_grads("naive_recurrent_kda_bwd", Family.KDA, opts, x, dO, d_final_state)


def naive_chunk_kda(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, cu_seqlens: Tensor, *,
    scale: float | None = None, initial_state: Tensor | None = None, output_final_state: bool = False,
    use_qk_l2norm: bool = False, use_beta_sigmoid: bool = False, allow_neg_eigval: bool = False,
    safe_gate: bool = False, gate_lower_bound: float | None = None, gate_domain: str = "log",
    a_log: Tensor | None = None, dt_bias: Tensor | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> tuple[Tensor, Tensor | None]:
    opts = Options(
        scale=scale, use_qk_l2norm=use_qk_l2norm, use_beta_sigmoid=use_beta_sigmoid,
        allow_neg_eigval=allow_neg_eigval, safe_gate=safe_gate, gate_domain=gate_domain,
        gate_lower_bound=gate_lower_bound,
    )
    x = Primals(q, k, v, g, beta, cu_seqlens, initial_state=initial_state, a_log=a_log, dt_bias=dt_bias)
    return run_chunked("naive_chunk_kda", Family.KDA, opts, x, output_final_state, chunk_size)


def naive_chunk_kda_bwd(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, cu_seqlens: Tensor, dO: Tensor, *,
    d_final_state: Tensor | None = None, scale: float | None = None, initial_state: Tensor | None = None,
    use_qk_l2norm: bool = False, use_beta_sigmoid: bool = False, allow_neg_eigval: bool = False,
    safe_gate: bool = False, gate_lower_bound: float | None = None, gate_domain: str = "log",
    a_log: Tensor | None = None, dt_bias: Tensor | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> LinearAttentionGrads:
    opts = Options(
        scale=scale, use_qk_l2norm=use_qk_l2norm, use_beta_sigmoid=use_beta_sigmoid,
        allow_neg_eigval=allow_neg_eigval, safe_gate=safe_gate, gate_domain=gate_domain,
        gate_lower_bound=gate_lower_bound,
    )
    x = Primals(q, k, v, g, beta, cu_seqlens, initial_state=initial_state, a_log=a_log, dt_bias=dt_bias)
    return chunked_grads("naive_chunk_kda_bwd", Family.KDA, opts, x, dO, d_final_state, chunk_size)
