"""Gated DeltaNet-2 (GDN-2) as torch ops: `gated_delta_net_v2`,
`cudnn::gated_delta_net_v2_fwd/_bwd`.

Recurrence (docs/LINEAR_ATTENTION.md §3.3), per sequence and output head,
with a per-channel decay alpha_t in (0, 1]^K, a channel-wise erase gate b_t (the beta
port) and a channel-wise write gate w_t:

    S' = Diag(alpha_t) S_{t-1};  u_t = w_t * v_t - S'^T (b_t * k_t);  S_t = S' + k_t u_t^T
    o_t = scale * S_t^T q_t

Layout (THD): q [T, H, K], k [T, HK, K], v [T, HV, V], g [T, HO, K], beta [T, HO, K] and
w [T, HO, V], cu_seqlens [N + 1]. States [N, HO, V, K] (V-major: the transpose of FLA's
[N, H, K, V], which has the same shape when K == V); o [T, HO, V].

The backward op runs the gdn2_bwd graph like the other families; while no engine serves
that node, backward raises the no-engine error listing each engine's reason (never zeros).
"""
from __future__ import annotations

import torch

from cudnn.linear_attention.ops._family import DtypeRule, OpFamily
from cudnn.linear_attention.ops._op_factory import FamilyOps
from cudnn.ops.linear_attention_family import GDN2_FAMILY

GDN2 = OpFamily(
    family=GDN2_FAMILY,
    name="gated_delta_net_v2",
    gate_dtypes={"beta": DtypeRule.LIKE_Q, "w": DtypeRule.LIKE_Q},
    gate_flags=("use_beta_sigmoid_in_kernel", "allow_neg_eigval", "beta_guard", "safe_gate",
                "gate_domain", "gate_lower_bound"),
    # GDN-2 kernels work in 16-token sub-chunks, as KDA's (docs/LINEAR_ATTENTION.md §5).
    checkpoint_chunk=16,
)

OPS = FamilyOps(GDN2)


def gated_delta_net_v2(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
    w: torch.Tensor, cu_seqlens: torch.Tensor, scale: float | None = None,
    initial_state: torch.Tensor | None = None, output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False, batch_invariant: bool = False,
    use_beta_sigmoid_in_kernel: bool = False, allow_neg_eigval: bool = False,
    beta_guard: bool = False, safe_gate: bool = False, gate_domain: str = "log",
    gate_lower_bound: float | None = None, a_log: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None, checkpoint_every_n_tokens: int = 0,
    checkpoint_dtype: torch.dtype | None = None, plan_name: str | None = None,
    overwrite_initial_state: bool = False, state_indices: torch.Tensor | None = None,
    strict_cu_seqlens: bool = False,
) -> tuple[torch.Tensor, ...]:
    """Gated DeltaNet-2 over token-packed sequences.

    Arguments as `kimi_delta_attention`, except:
        beta: [T, HO, K] erase gate (logits under use_beta_sigmoid_in_kernel).
        w: [T, HO, V] write gate, used as given. beta and w in any float dtype (the
            engines read q's dtype; the op converts).
        initial_state: [N, HO, V, K], V-major (transpose FLA's [N, H, K, V] states; the
            shape cannot tell them apart when K == V); final_state likewise.
        beta_guard: the erase-side safeguard of docs/LINEAR_ATTENTION.md §3.4. No engine
            implements it yet: True raises ValueError naming it (forward and serving calls).

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
        >>> beta = torch.rand(T, H, K, device="cuda", dtype=torch.bfloat16)
        >>> w = torch.rand(T, H, V, device="cuda", dtype=torch.bfloat16)
        >>> cu = torch.tensor([0, 5, 8], dtype=torch.int32, device="cuda")
        >>> o, _ = gated_delta_net_v2(q, k, v, g, beta, w, cu)
    """
    # every argument by position in schema order (OPS.forward_signature; not locals(),
    # which dynamo cannot trace): a tuple is the cheapest hand-over on the cached path
    return OPS.forward((
        q, k, v, g, beta, w, cu_seqlens, scale, initial_state, output_final_state,
        use_qk_l2norm_in_kernel, batch_invariant, use_beta_sigmoid_in_kernel, allow_neg_eigval,
        beta_guard, safe_gate, gate_domain, gate_lower_bound, a_log, dt_bias,
        checkpoint_every_n_tokens, checkpoint_dtype, plan_name, False,  # output_values: training path only
    ), overwrite_initial_state, state_indices, strict_cu_seqlens)
