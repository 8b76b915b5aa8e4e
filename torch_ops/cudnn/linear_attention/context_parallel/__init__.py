"""Context parallelism for GDN, KDA and GDN-2: one sequence split over several ranks.

    from cudnn.linear_attention import context_parallel as cp
    o, final = cp.gated_delta_net(q, k, v, g, beta, cu_seqlens, group=group,
                                  output_final_state=True)

Each rank passes its own shard of the token-packed (THD) stream (q [T_r, H, K], k, v,
gates, as the ops in cudnn.linear_attention.ops take them), the GLOBAL cu_seqlens of the
whole stream (host ints: a list, or a tensor, read once on the host) and the process group
(torch.distributed, NCCL on GPUs, gloo on CPUs; None = the default group). Shards are
contiguous token ranges in rank order: `shard_offsets` ([world + 1] global token offsets)
gives them, or, when None, every rank holds total / world tokens. A cut may fall anywhere,
inside a sequence and inside a kernel chunk.

Linear attention carries only a recurrent state across a cut, so only the states of
sequences that cross a cut travel, point to point between the two ranks of the cut; a
sequence inside one shard costs no communication (_function.py has the algorithm: pieces
without a cut run at once, a rank covered by one sequence forwards the state through its
span's summary, an affine map, before running it; the backward mirrors it).

Returns per rank: o [T_r, HO, V] for its tokens, and final_state [N, HO, V, K] (N global)
holding the rows of the sequences that END on this rank, zero rows for the others (a
zero-size tensor unless output_final_state). Autograd: gradients of this rank's q, k, v
and gates; initial_state's gradient rows for the sequences that START on this rank (zero
rows elsewhere); a_log / dt_bias gradients are this rank's partial sums. Summing final
states and those gradients over the ranks gives the single-process results.

Every rank must make the same calls with the same cu_seqlens and offsets (as with any
collective). Not supported here: checkpoints, state pools, overwrite, plan pinning.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from cudnn.linear_attention.context_parallel._exchange import group_rank_and_size
from cudnn.linear_attention.context_parallel._families import FAMILIES, CpFamily, FamilyCalls
from cudnn.linear_attention.context_parallel._function import CallSpec, ContextParallel
from cudnn.linear_attention.context_parallel._shard_plan import (ShardPlan, check_boundaries,
                                                                 equal_offsets, plan_shard)

__all__ = ["ShardPlan", "gated_delta_net", "gated_delta_net_v2", "kimi_delta_attention",
           "shard_plan"]


def _host_ints(name: str, values: Any) -> list[int]:
    if isinstance(values, torch.Tensor):
        if values.dim() != 1 or values.is_floating_point():
            raise ValueError(f"context_parallel: argument '{name}': expected a 1-D integer "
                             f"tensor or list; got a {values.dtype} tensor of dims "
                             f"{list(values.shape)}")
        return [int(x) for x in values.tolist()]
    return [int(x) for x in values]


def shard_plan(cu_seqlens: Any, local_tokens: int, group: Any = None,
               shard_offsets: Sequence[int] | None = None) -> ShardPlan:
    """This rank's plan: its pieces, which states cross its cuts, to and from whom."""
    rank, world = group_rank_and_size(group)
    cu = _host_ints("cu_seqlens", cu_seqlens)
    offsets = (equal_offsets(cu[-1] if cu else 0, world, local_tokens)
               if shard_offsets is None else _host_ints("shard_offsets", shard_offsets))
    check_boundaries(cu, offsets, world)  # against the group's size, not len(offsets)
    plan = plan_shard(cu, offsets, rank)
    if plan.end - plan.start != local_tokens:
        raise ValueError(f"context_parallel: argument 'q': expected {plan.end - plan.start} "
                         f"tokens on rank {rank} (shard_offsets {offsets}); got "
                         f"{local_tokens}")
    return plan


def _run(family: CpFamily, tensors: dict[str, Any], cu_seqlens: Any, group: Any,
         shard_offsets: Any, scale: float | None, output_final_state: bool,
         flags: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    q = tensors["q"]
    if not isinstance(q, torch.Tensor) or q.dim() != 3:
        given = f"dims {list(q.shape)}" if isinstance(q, torch.Tensor) else type(q).__name__
        raise ValueError(f"context_parallel.{family.name}: argument 'q': expected this "
                         f"rank's THD shard [T_r, H, K]; got {given}")
    plan = shard_plan(cu_seqlens, q.shape[0], group, shard_offsets)
    init = tensors["initial_state"]
    if init is not None and init.shape[0] != plan.num_sequences:
        raise ValueError(f"context_parallel.{family.name}: argument 'initial_state': expected "
                         f"one row per global sequence ({plan.num_sequences}); got dims "
                         f"{list(init.shape)}")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    spec = CallSpec(
        calls_factory=lambda t: FamilyCalls(family, t, scale, flags), plan=plan, group=group,
        output_final_state=bool(output_final_state),
        work_dtype=torch.float64 if q.dtype == torch.float64 else torch.float32,
        final_dtype=torch.float32 if init is None else init.dtype)
    names = family.inputs
    return ContextParallel.apply(spec, names, *[tensors[n] for n in names])


def gated_delta_net(q, k, v, g, beta, cu_seqlens, *, group=None, shard_offsets=None,
                    scale=None, initial_state=None, output_final_state=False,
                    use_qk_l2norm_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                    allow_neg_eigval=False, safe_gate=False, gate_domain="log", a_log=None,
                    dt_bias=None):
    """GDN over a context-parallel shard; arguments as ops.gated_delta_net, plus the global
    cu_seqlens, the process group and the shard offsets (module docstring)."""
    return _run(FAMILIES["gated_delta_net"],
                dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=initial_state, a_log=a_log,
                     dt_bias=dt_bias),
                cu_seqlens, group, shard_offsets, scale, output_final_state,
                dict(use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                     use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                     allow_neg_eigval=allow_neg_eigval, safe_gate=safe_gate,
                     gate_domain=gate_domain))


def kimi_delta_attention(q, k, v, g, beta, cu_seqlens, *, group=None, shard_offsets=None,
                         scale=None, initial_state=None, output_final_state=False,
                         use_qk_l2norm_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                         allow_neg_eigval=False, safe_gate=False, gate_lower_bound=None,
                         gate_domain="log", a_log=None, dt_bias=None):
    """KDA over a context-parallel shard; see gated_delta_net."""
    return _run(FAMILIES["kimi_delta_attention"],
                dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=initial_state, a_log=a_log,
                     dt_bias=dt_bias),
                cu_seqlens, group, shard_offsets, scale, output_final_state,
                dict(use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                     use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                     allow_neg_eigval=allow_neg_eigval, safe_gate=safe_gate,
                     gate_lower_bound=gate_lower_bound, gate_domain=gate_domain))


def gated_delta_net_v2(q, k, v, g, beta, w, cu_seqlens, *, group=None, shard_offsets=None,
                       scale=None, initial_state=None, output_final_state=False,
                       use_qk_l2norm_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                       allow_neg_eigval=False, beta_guard=False, safe_gate=False,
                       gate_domain="log", gate_lower_bound=None, a_log=None, dt_bias=None):
    """GDN-2 over a context-parallel shard; see gated_delta_net."""
    return _run(FAMILIES["gated_delta_net_v2"],
                dict(q=q, k=k, v=v, g=g, beta=beta, w=w, initial_state=initial_state,
                     a_log=a_log, dt_bias=dt_bias),
                cu_seqlens, group, shard_offsets, scale, output_final_state,
                dict(use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                     use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel,
                     allow_neg_eigval=allow_neg_eigval, beta_guard=beta_guard,
                     safe_gate=safe_gate, gate_domain=gate_domain,
                     gate_lower_bound=gate_lower_bound))
