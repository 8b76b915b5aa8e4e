"""Kimi Delta Attention (KDA) as torch ops: `kimi_delta_attention`,
`cudnn::kimi_delta_attention_fwd/_bwd`.

Recurrence (docs/LINEAR_ATTENTION.md §3.2), per sequence and output head,
with a per-key-channel decay alpha_t = exp(g_t) in (0, 1]^K and a scalar beta_t:

    S' = Diag(alpha_t) S_{t-1};  u_t = beta_t (v_t - S'^T k_t);  S_t = S' + k_t u_t^T
    o_t = scale * S_t^T q_t

Layout (THD): q [T, H, K], k [T, HK, K], v [T, HV, V], g [T, HO, K], beta [T, HO],
cu_seqlens [N + 1]; HO = max(H, HV). States [N, HO, V, K] (V-major: the transpose of
FLA's [N, H, K, V], which has the same shape when K == V); o [T, HO, V].
"""
from __future__ import annotations

import torch

from cudnn.linear_attention.ops._family import DtypeRule, OpFamily
from cudnn.linear_attention.ops._op_factory import FamilyOps
from cudnn.ops.linear_attention_family import KDA_FAMILY

KDA = OpFamily(
    family=KDA_FAMILY,
    name="kimi_delta_attention",
    gate_dtypes={"beta": DtypeRule.FP32_OR_Q},
    gate_flags=("use_beta_sigmoid_in_kernel", "allow_neg_eigval", "safe_gate",
                "gate_lower_bound", "gate_domain"),
    # KDA kernels work in 16-token sub-chunks (docs/LINEAR_ATTENTION.md §5): coarser checkpoints are reusable.
    checkpoint_chunk=16,
)

OPS = FamilyOps(KDA)


def kimi_delta_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
    cu_seqlens: torch.Tensor, scale: float | None = None,
    initial_state: torch.Tensor | None = None, output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False, batch_invariant: bool = False,
    use_beta_sigmoid_in_kernel: bool = False, allow_neg_eigval: bool = False,
    safe_gate: bool = False, gate_lower_bound: float | None = None, gate_domain: str = "log",
    a_log: torch.Tensor | None = None, dt_bias: torch.Tensor | None = None,
    checkpoint_every_n_tokens: int = 0, checkpoint_dtype: torch.dtype | None = None,
    plan_name: str | None = None, overwrite_initial_state: bool = False,
    state_indices: torch.Tensor | None = None, strict_cu_seqlens: bool = False,
) -> tuple[torch.Tensor, ...]:
    """Kimi delta attention over token-packed sequences; differentiable.

    Arguments as `gated_delta_net`, except:
        g: [T, HO, K] per-channel log-decay; under safe_gate raw logits mapped to
            gate_lower_bound * sigmoid(exp(a_log) * (g + dt_bias)), bound default -5.0.
        dt_bias: [HO, K].
        initial_state: [N, HO, V, K], V-major (transpose FLA's [N, H, K, V] states; the
            shape cannot tell them apart when K == V); final_state likewise.

    Returns:
        (o [T, HO, V], final_state), plus state_checkpoints when checkpoint_every_n_tokens.

    Memory: a call that records autograd keeps, besides its inputs, the states every 64
    tokens for the backward when the engine serving it takes checkpoints (FROST, bf16):
    [T // 64 + N, HO, V, K] in q's dtype, V * K / 32 bytes per token and head (512 B at
    K = V = 128) until the backward runs; it saves the backward's serial recompute
    (torch_ops/README.md, "Training checkpoints").

    Example:
        >>> T, H, K, V = 8, 4, 128, 128
        >>> q, k = (torch.nn.functional.normalize(torch.randn(T, H, K, device="cuda",
        ...         dtype=torch.bfloat16), dim=-1) for _ in range(2))
        >>> v = torch.randn(T, H, V, device="cuda", dtype=torch.bfloat16)
        >>> g = torch.nn.functional.logsigmoid(torch.randn(T, H, K, device="cuda"))
        >>> beta = torch.rand(T, H, device="cuda")
        >>> cu = torch.tensor([0, 5, 8], dtype=torch.int32, device="cuda")
        >>> o, _ = kimi_delta_attention(q, k, v, g, beta, cu)
    """
    # every argument by position in schema order (OPS.forward_signature; not locals(),
    # which dynamo cannot trace): a tuple is the cheapest hand-over on the cached path
    return OPS.forward((
        q, k, v, g, beta, cu_seqlens, scale, initial_state, output_final_state,
        use_qk_l2norm_in_kernel, batch_invariant, use_beta_sigmoid_in_kernel, allow_neg_eigval,
        safe_gate, gate_lower_bound, gate_domain, a_log, dt_bias, checkpoint_every_n_tokens,
        checkpoint_dtype, plan_name, False,  # output_values: only the training path asks
    ), overwrite_initial_state, state_indices, strict_cu_seqlens)
