"""The differentiable context-parallel call of one rank: forward and backward with the
state exchange (one torch.autograd.Function).

Forward, on rank r (ShardPlan names the pieces):
1. the pieces other than the head run at once (their entering states are known: the
   sequence's initial_state row, or zero); a tail's leaving state is sent right;
2. pass-through rank: the span's summary (final state from zero D, transition M) is
   computed while the entering state S_in travels; then S_out = S_in M + D goes right;
3. the head runs from S_in.
A chain of pass-through ranks forwards S along the cut sequence with one small product
per rank, never waiting for a neighbour's full run (a prefix over the ranks' summaries).

Backward mirrors it right to left, with dS the gradient w.r.t. a state:
1. a head that ends here runs its backward at once (its d_final_state is this rank's own
   output gradient) and sends its d_initial_state left;
2. pass-through rank: the span's state gradient G from its own dO (summary backward)
   is computed while dS_out travels; dS_in = G + dS_out M^T goes left, then the span's
   backward runs from (S_in, dS_out);
3. the other pieces run their backward, the tail with the dS_out received from the right.
Each piece's forward and backward run exactly once (summaries only on pass-through
ranks); only states of cut sequences travel. States travel in float32 (float64 for
float64 inputs), whatever the state dtype the caller uses.

Per-rank results: o and the gradients of this rank's q, k, v, gates; final_state /
d_initial_state rows of the sequences that end / start on this rank (zero rows for the
others: summed over the ranks they give the single-process tensors); d_a_log / d_dt_bias
are this rank's partial sums (sum them over the ranks, as for any replicated parameter).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from cudnn.linear_attention.context_parallel._exchange import Link
from cudnn.linear_attention.context_parallel._families import FamilyCalls, Segment
from cudnn.linear_attention.context_parallel._shard_plan import Piece, ShardPlan


@dataclasses.dataclass(frozen=True)
class CallSpec:
    """Everything non-tensor about one call."""
    calls_factory: Any            # (tensors) -> FamilyCalls
    plan: ShardPlan
    group: Any
    output_final_state: bool
    #: the dtype states travel and run in (float64 for float64 q, else float32) and the
    #: dtype of the returned final_state (initial_state's, else float32)
    work_dtype: torch.dtype
    final_dtype: torch.dtype


def _segment(plan: ShardPlan, pieces: Sequence[Piece]) -> Segment | None:
    if not pieces:
        return None
    lo, hi = plan.local(pieces[0])[0], plan.local(pieces[-1])[1]
    return Segment(lo, hi, tuple(ShardPlan.cu_seqlens(pieces)))


def _rows(source: torch.Tensor | None, sequences: list[int], like: torch.Tensor
          ) -> torch.Tensor:
    """source[sequences] in like's dtype, or zeros shaped like len(sequences) states."""
    if source is None:
        return like.new_zeros((len(sequences), *like.shape))
    return source[sequences].to(like.dtype)


class ContextParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, spec: CallSpec, names: tuple[str, ...], *values: Any):
        tensors = dict(zip(names, values))
        plan, link = spec.plan, Link(spec.group)
        calls: FamilyCalls = spec.calls_factory(tensors)
        q, v, init = tensors["q"], tensors["v"], tensors["initial_state"]
        HO, K, V = max(q.shape[1], v.shape[1]), q.shape[2], v.shape[2]
        state = q.new_zeros((HO, V, K), dtype=spec.work_dtype)  # shape/dtype of a message
        final = (state.new_zeros((plan.num_sequences, HO, V, K), dtype=spec.final_dtype)
                 if spec.output_final_state else state.new_zeros((0,), dtype=spec.final_dtype))
        o_parts = []
        rest = _segment(plan, plan.rest)
        if rest is not None:  # needs no state from elsewhere: run it first
            sequences = [p.sequence for p in plan.rest]
            o_rest, f_rest = calls.forward(rest, _rows(init, sequences, state))
            if plan.tail is not None:
                link.send(f_rest[-1], plan.right)
            owned = len(sequences) - (plan.tail is not None)
            if spec.output_final_state and owned:
                final[sequences[:owned]] = f_rest[:owned].to(final.dtype)
        s_in = transition = None
        if plan.head is not None:
            head = _segment(plan, (plan.head,))
            if plan.pass_through:  # summarize the span while its entering state travels
                from_zero, transition = calls.summary(head)
            s_in = link.receive(state, plan.left)
            if plan.pass_through:
                link.send(s_in @ transition[0] + from_zero[0], plan.right)
            o_head, f_head = calls.forward(head, s_in[None])
            o_parts.append(o_head)
            if spec.output_final_state and not plan.pass_through:
                final[plan.head.sequence] = f_head[0].to(final.dtype)
        if rest is not None:
            o_parts.append(o_rest)
        if spec.output_final_state and init is not None and plan.empty_sequences:
            empty = list(plan.empty_sequences)  # zero-length: the final state is the initial
            final[empty] = init[empty].to(final.dtype)
        o = torch.cat(o_parts) if len(o_parts) > 1 else (
            o_parts[0] if o_parts else q.new_zeros((0, HO, V)))
        link.finish()
        ctx.spec, ctx.names = spec, names
        ctx.save_for_backward(*values, s_in, transition)
        ctx.set_materialize_grads(False)
        if not spec.output_final_state:
            ctx.mark_non_differentiable(final)
        return o, final

    @staticmethod
    def backward(ctx: Any, d_o: torch.Tensor | None, d_final: torch.Tensor | None):
        spec: CallSpec = ctx.spec
        *values, s_in, transition = ctx.saved_tensors
        tensors = dict(zip(ctx.names, values))
        plan, link = spec.plan, Link(spec.group)
        calls: FamilyCalls = spec.calls_factory(tensors)
        q, v, init = tensors["q"], tensors["v"], tensors["initial_state"]
        HO, K, V = max(q.shape[1], v.shape[1]), q.shape[2], v.shape[2]
        state = q.new_zeros((HO, V, K), dtype=spec.work_dtype)
        if d_o is None:  # only final_state was used
            d_o = q.new_zeros((q.shape[0], HO, V))
        if d_final is not None and d_final.numel() == 0:
            d_final = None
        parts: list[dict[str, Any]] = []
        if plan.head is not None:
            head = _segment(plan, (plan.head,))
            if plan.pass_through:  # the span's own state gradient while dS_out travels
                g_span = calls.summary_bwd(head, d_o)
                ds_out = link.receive(state, plan.right)
                link.send(g_span[0] + ds_out @ transition[0].transpose(-1, -2), plan.left)
            else:  # the head's sequence ends here: its backward needs nothing from elsewhere
                ds_out = _rows(d_final, [plan.head.sequence], state)[0]
            grads = calls.backward(head, d_o, s_in[None], ds_out[None])
            if not plan.pass_through:
                link.send(grads["initial_state"][0], plan.left)
            parts.append(grads)
        d_init = None
        rest = _segment(plan, plan.rest)
        if rest is not None:
            sequences = [p.sequence for p in plan.rest]
            owned = len(sequences) - (plan.tail is not None)
            d_leaving = _rows(d_final, sequences[:owned], state)
            if plan.tail is not None:
                d_leaving = torch.cat([d_leaving, link.receive(state, plan.right)[None]])
            grads = calls.backward(rest, d_o, _rows(init, sequences, state), d_leaving)
            parts.append(grads)
            d_init = (sequences, grads["initial_state"])
        link.finish()
        return (None, None, *[_gradient(name, tensors, parts, plan, d_init, d_final)
                              for name in ctx.names])


def _gradient(name: str, tensors: dict[str, Any], parts: list[dict[str, Any]],
              plan: ShardPlan, d_init: tuple[list[int], torch.Tensor] | None,
              d_final: torch.Tensor | None) -> torch.Tensor | None:
    primal = tensors[name]
    if primal is None or not primal.requires_grad:
        return None
    if name == "initial_state":
        # rows of the sequences starting here; a zero-length one passes its gradient through
        out = torch.zeros_like(primal)
        if d_init is not None:
            out[d_init[0]] = d_init[1].to(out.dtype)
        if d_final is not None and plan.empty_sequences:
            empty = list(plan.empty_sequences)
            out[empty] = d_final[empty].to(out.dtype)
        return out
    if name in ("a_log", "dt_bias"):  # this rank's partial sum
        total = torch.zeros_like(primal)
        for part in parts:
            total = total + part[name]
        return total
    pieces = [part[name] for part in parts]
    if not pieces:
        return torch.zeros_like(primal)
    return torch.cat(pieces) if len(pieces) > 1 else pieces[0]
