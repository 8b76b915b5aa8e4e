"""GDN (gated delta rule) float64 references: token-by-token and chunked, forward and backward.

Spec docs/LINEAR_ATTENTION.md §3.1, per sequence and output head, FLA orientation
S [K, V], scalar decay alpha_t = exp(gamma_t), scalar beta_t:

    S' = alpha_t S_{t-1};  u_t = beta_t (v_t - S'^T k_t);  S_t = S' + k_t u_t^T;  o_t = scale S_t^T q_t

Shapes (THD): q [T, H, K], k [T, HK, K], v [T, HV, V], g [T, HO], beta [T, HO],
cu_seqlens [N+1], initial_state [N, HO, V, K] (V-major), a_log [HO], dt_bias [HO];
HO = max(H, HV), HK in {H, HV}. Returns o [T, HO, V] and final_state [N, HO, V, K] (None
unless output_final_state), float64. The *_bwd functions return LinearAttentionGrads
for upstream dO [T, HO, V] and optional d_final_state [N, HO, V, K].

naive_recurrent_* is the ground truth (its backward is autograd through it; memory grows
with T, keep it to small problems). naive_chunk_* is the chunked algebra the GPU kernels
follow (chunk_fwd.py / chunk_bwd.py), with an explicit backward that scales to long inputs.
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


def naive_recurrent_gdn(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, cu_seqlens: Tensor, *,
    scale: float | None = None, initial_state: Tensor | None = None, output_final_state: bool = False,
    use_qk_l2norm: bool = False, use_beta_sigmoid: bool = False, allow_neg_eigval: bool = False,
    safe_gate: bool = False, gate_domain: str = "log", a_log: Tensor | None = None,
    dt_bias: Tensor | None = None,
) -> tuple[Tensor, Tensor | None]:
    opts = Options(
        scale=scale, use_qk_l2norm=use_qk_l2norm, use_beta_sigmoid=use_beta_sigmoid,
        allow_neg_eigval=allow_neg_eigval, safe_gate=safe_gate, gate_domain=gate_domain,
    )
    x = Primals(q, k, v, g, beta, cu_seqlens, initial_state=initial_state, a_log=a_log, dt_bias=dt_bias)
    return run_recurrent("naive_recurrent_gdn", Family.GDN, opts, x, output_final_state)


def naive_recurrent_gdn_bwd(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, cu_seqlens: Tensor, dO: Tensor, *,
    d_final_state: Tensor | None = None, scale: float | None = None, initial_state: Tensor | None = None,
    use_qk_l2norm: bool = False, use_beta_sigmoid: bool = False, allow_neg_eigval: bool = False,
    safe_gate: bool = False, gate_domain: str = "log", a_log: Tensor | None = None,
    dt_bias: Tensor | None = None,
) -> LinearAttentionGrads:
    opts = Options(
        scale=scale, use_qk_l2norm=use_qk_l2norm, use_beta_sigmoid=use_beta_sigmoid,
        allow_neg_eigval=allow_neg_eigval, safe_gate=safe_gate, gate_domain=gate_domain,
    )
    x = Primals(q, k, v, g, beta, cu_seqlens, initial_state=initial_state, a_log=a_log, dt_bias=dt_bias)
    return recurrent_grads("naive_recurrent_gdn_bwd", Family.GDN, opts, x, dO, d_final_state)


def naive_chunk_gdn(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, cu_seqlens: Tensor, *,
    scale: float | None = None, initial_state: Tensor | None = None, output_final_state: bool = False,
    use_qk_l2norm: bool = False, use_beta_sigmoid: bool = False, allow_neg_eigval: bool = False,
    safe_gate: bool = False, gate_domain: str = "log", a_log: Tensor | None = None,
    dt_bias: Tensor | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> tuple[Tensor, Tensor | None]:
    opts = Options(
        scale=scale, use_qk_l2norm=use_qk_l2norm, use_beta_sigmoid=use_beta_sigmoid,
        allow_neg_eigval=allow_neg_eigval, safe_gate=safe_gate, gate_domain=gate_domain,
    )
    x = Primals(q, k, v, g, beta, cu_seqlens, initial_state=initial_state, a_log=a_log, dt_bias=dt_bias)
    return run_chunked("naive_chunk_gdn", Family.GDN, opts, x, output_final_state, chunk_size)


def naive_chunk_gdn_bwd(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, cu_seqlens: Tensor, dO: Tensor, *,
    d_final_state: Tensor | None = None, scale: float | None = None, initial_state: Tensor | None = None,
    use_qk_l2norm: bool = False, use_beta_sigmoid: bool = False, allow_neg_eigval: bool = False,
    safe_gate: bool = False, gate_domain: str = "log", a_log: Tensor | None = None,
    dt_bias: Tensor | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> LinearAttentionGrads:
    opts = Options(
        scale=scale, use_qk_l2norm=use_qk_l2norm, use_beta_sigmoid=use_beta_sigmoid,
        allow_neg_eigval=allow_neg_eigval, safe_gate=safe_gate, gate_domain=gate_domain,
    )
    x = Primals(q, k, v, g, beta, cu_seqlens, initial_state=initial_state, a_log=a_log, dt_bias=dt_bias)
    return chunked_grads("naive_chunk_gdn_bwd", Family.GDN, opts, x, dO, d_final_state, chunk_size)
