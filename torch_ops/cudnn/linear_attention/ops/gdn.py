"""Gated DeltaNet (GDN) as torch ops: `gated_delta_net`, `cudnn::gated_delta_net_fwd/_bwd`.

Recurrence (docs/LINEAR_ATTENTION.md §3.1), per sequence and output head,
with a scalar decay alpha_t = exp(g_t) and a scalar beta_t:

    S' = alpha_t S_{t-1};  u_t = beta_t (v_t - S'^T k_t);  S_t = S' + k_t u_t^T
    o_t = scale * S_t^T q_t

Layout (THD, token-packed varlen): q [T, H, K], k [T, HK, K], v [T, HV, V], g [T, HO],
beta [T, HO], cu_seqlens [N + 1]; HO = max(H, HV), HK in {H, HV}. States are stored
V-major, [N, HO, V, K]: the transpose of FLA's [N, H, K, V] (same shape when K == V, so
only the numbers would show a state passed the wrong way round). o is [T, HO, V] in q's
dtype.
"""
from __future__ import annotations

import torch

from cudnn.linear_attention.ops._family import DtypeRule, OpFamily
from cudnn.linear_attention.ops._op_factory import FamilyOps
from cudnn.ops.linear_attention_family import GDN_FAMILY

GDN = OpFamily(
    family=GDN_FAMILY,
    name="gated_delta_net",
    gate_dtypes={"beta": DtypeRule.FP32_OR_Q},
    gate_flags=("use_beta_sigmoid_in_kernel", "allow_neg_eigval", "safe_gate", "gate_domain"),
    # GDN kernels work in 64-token chunks (docs/LINEAR_ATTENTION.md §5): coarser checkpoints are reusable.
    checkpoint_chunk=64,
)

OPS = FamilyOps(GDN)


def gated_delta_net(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
    cu_seqlens: torch.Tensor, scale: float | None = None,
    initial_state: torch.Tensor | None = None, output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False, batch_invariant: bool = False,
    use_beta_sigmoid_in_kernel: bool = False, allow_neg_eigval: bool = False,
    safe_gate: bool = False, gate_domain: str = "log", a_log: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None, checkpoint_every_n_tokens: int = 0,
    checkpoint_dtype: torch.dtype | None = None, plan_name: str | None = None,
    overwrite_initial_state: bool = False, state_indices: torch.Tensor | None = None,
    strict_cu_seqlens: bool = False,
) -> tuple[torch.Tensor, ...]:
    """Gated delta rule over token-packed sequences; differentiable.

    Args:
        q, k, v: [T, H, K], [T, HK, K], [T, HV, V]; one dtype (float16 or bfloat16 for
            the GPU engines).
        g: [T, HO] log-decay (gate_domain="log"), decay in (0, 1] ("linear"), or raw
            logits under safe_gate (-exp(a_log) * softplus(g + dt_bias)); any float dtype.
        beta: [T, HO], any float dtype; logits under use_beta_sigmoid_in_kernel.
        cu_seqlens: [N + 1] int32/int64 sequence boundaries (0, ..., T).
        (g, beta, a_log, dt_bias, cu_seqlens and initial_state are converted, once, to the
        dtypes the planned engine reads; gradients come back in each one's own dtype.)
        scale: readout scale, default 1/sqrt(K).
        initial_state: [N, HO, V, K] or None (zeros). V-major: the transpose of FLA's
            [N, H, K, V]; when K == V the shape cannot tell the two apart, so transpose an
            FLA state first (cudnn.linear_attention.fla does). float32, bfloat16 or
            float16 (converted to what the engine reads).
        output_final_state: also return the final states [N, HO, V, K] (V-major, in
            initial_state's dtype, else float32); otherwise a zero-size tensor.
        checkpoint_every_n_tokens, checkpoint_dtype: also return the state every n tokens
            of each sequence ([rows, HO, V, K], q's dtype unless checkpoint_dtype).
        plan_name: run this plan (an engine name from graph.explain_plans()).
        strict_cu_seqlens: check cu_seqlens on its device before running (0 = cu[0] <=
            ... <= cu[N] = T; ValueError naming the first bad entry; one synchronisation;
            eager calls). Without it nothing reads the table on the host and any table is
            memory-safe: rows no sequence covers come back zero. The environment variable
            CUDNN_STRICT_CU_SEQLENS=1 turns the check on in every engine launch.

    Returns:
        (o [T, HO, V], final_state), plus state_checkpoints when checkpoint_every_n_tokens.

    Memory: a call that records autograd keeps, besides its inputs, the states every 64
    tokens for the backward when the engine serving it takes checkpoints (FROST, bf16):
    [T // 64 + N, HO, V, K] in q's dtype, V * K / 32 bytes per token and head (512 B at
    K = V = 128) until the backward runs; it saves the backward's serial recompute
    (torch_ops/README.md, "Training checkpoints").

    Example (2 sequences of 5 and 3 tokens):
        >>> T, H, K, V = 8, 4, 128, 128
        >>> q, k = (torch.nn.functional.normalize(torch.randn(T, H, K, device="cuda",
        ...         dtype=torch.bfloat16), dim=-1) for _ in range(2))
        >>> v = torch.randn(T, H, V, device="cuda", dtype=torch.bfloat16)
        >>> g = torch.nn.functional.logsigmoid(torch.randn(T, H, device="cuda"))
        >>> beta = torch.rand(T, H, device="cuda")
        >>> cu = torch.tensor([0, 5, 8], dtype=torch.int32, device="cuda")
        >>> o, final = gated_delta_net(q, k, v, g, beta, cu, output_final_state=True)
    """
    # every argument by position in schema order (OPS.forward_signature; not locals(),
    # which dynamo cannot trace): a tuple is the cheapest hand-over on the cached path
    return OPS.forward((
        q, k, v, g, beta, cu_seqlens, scale, initial_state, output_final_state,
        use_qk_l2norm_in_kernel, batch_invariant, use_beta_sigmoid_in_kernel, allow_neg_eigval,
        safe_gate, gate_domain, a_log, dt_bias, checkpoint_every_n_tokens, checkpoint_dtype,
        plan_name, False,  # output_values: only the training path asks (_op_factory.py)
    ), overwrite_initial_state, state_indices, strict_cu_seqlens)
