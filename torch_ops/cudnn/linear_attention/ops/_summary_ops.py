"""Registration and execution of the span-summary custom ops of one family.

`SummaryOps(family)` registers, with torch.library in the `cudnn` namespace (docs/CONTEXT_PARALLEL.md):
- `cudnn::<name>_summary` -> (final_state [N, HO, V, K], transition [N, HO, K, K]);
- `cudnn::<name>_summary_bwd` -> (d_initial_state [N, HO, V, K], transition);
the transition is a zero-size tensor unless output_transition (custom ops cannot return
None). Each op has a fake kernel (same checks, same result shapes) for torch.compile, and
an autograd whose outputs are non-differentiable: a summary is a building block of a
differentiable composition (context parallelism writes that composition's backward), not
a function to differentiate through.

A call looks its configuration up in the op's graph cache (the forward ops' key,
_op_factory.cache_key_function); a miss checks it
(_summary_checks.py) and builds the single-node summary graph through the same graph
runner as the other ops (_graph_runner.py), so whichever engine the planner ranks first
runs it and a call no engine serves gets the per-engine reasons. A hit runs the cached
graph (CachedGraph.run: the plan's launch lane when it offers one, else the bound plan).
`run(values)` is that call on values already in schema order, for callers that build
them once per call without keywords (the span split, _span_split.py).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from cudnn.linear_attention.ops._graph_cache import GraphCache
from cudnn.linear_attention.ops._graph_runner import CachedGraph, GraphRequest, build_graph
from cudnn.linear_attention.ops._op_factory import cache_key_function
from cudnn.linear_attention.ops._summary_checks import SummaryGeometry, check_summary_call
from cudnn.linear_attention.ops._summary_family import (GRAPH_ATTR_NAMES, NOT_GRAPH_ATTRS,
                                                        SummaryFamily, SummarySignature)

NAMESPACE = "cudnn"
_Results = tuple[torch.Tensor, torch.Tensor]


class _SummaryOp:
    """One registered summary op: schema, graph builder, cache, result rules."""

    def __init__(self, family: SummaryFamily, backward: bool) -> None:
        self.family, self.backward = family, backward
        suffix = "summary_bwd" if backward else "summary"
        self.name = f"{NAMESPACE}::{family.name}_{suffix}"
        self.signature: SummarySignature = (family.summary_bwd_signature() if backward
                                            else family.summary_signature())
        self.builder = family.graph_summary_bwd if backward else family.graph_summary
        self.state_port = "d_initial_state" if backward else "final_state"
        self.cache: GraphCache[CachedGraph] = GraphCache(self.name)
        self._cache_key = cache_key_function(self.signature)
        registered = torch.library.custom_op(self.name, self._kernel, mutates_args=(),
                                             schema=self.signature.schema())
        registered.register_fake(self._fake)
        registered.register_autograd(_no_backward, setup_context=_non_differentiable)
        self.op = getattr(getattr(torch.ops, NAMESPACE), f"{family.name}_{suffix}").default

    # -- kernels -------------------------------------------------------------------------
    def _kernel(self, *args: Any, **kwargs: Any) -> _Results:
        return self.run(self.signature.complete(args, kwargs))

    def run(self, values: Sequence[Any]) -> _Results:
        """The kernel on every argument in schema order (SummarySignature.complete's
        result): checked and built on the first call of its configuration (the key holds
        everything the checks read), the cached graph after."""
        entry = self.cache.get_or_build(self._cache_key(values), lambda: self._build(values))
        return entry.run(values)

    def _fake(self, *args: Any, **kwargs: Any) -> _Results:
        bound = dict(zip(self.signature.names, self.signature.complete(args, kwargs)))
        return self._allocate(bound, check_summary_call(self.name, self.family, bound,
                                                        self.backward))

    def _allocate(self, bound: Mapping[str, Any], geo: SummaryGeometry) -> _Results:
        like = bound["q" if self.backward else "k"]
        state = like.new_empty((geo.N, geo.HO, geo.V, geo.K), dtype=geo.state_dtype)
        transition = like.new_empty((geo.N, geo.HO, geo.K, geo.K) if
                                    bound["output_transition"] else (0,),
                                    dtype=geo.state_dtype)
        return state, transition

    def _build(self, values: Sequence[Any]) -> CachedGraph:
        sig = self.signature
        bound = dict(zip(sig.names, values))
        geo = check_summary_call(self.name, self.family, bound, self.backward)
        tensors = sig.tensor_names
        attrs = {GRAPH_ATTR_NAMES.get(n, n): bound[n] for n in sig.names
                 if n not in tensors and n not in NOT_GRAPH_ATTRS and bound[n] is not None}
        if "scale" in attrs and attrs["scale"] == 1.0 / math.sqrt(geo.K):
            del attrs["scale"]  # the graph says "default", as the other ops do
        outputs = [(0, self.state_port)]
        if bound["output_transition"]:
            outputs.append((1, "transition"))
        like = bound["q" if self.backward else "k"]
        return build_graph(GraphRequest(
            op=self.name, builder=self.builder,
            inputs=[(sig.names.index(n), n, bound[n]) for n in tensors if bound[n] is not None],
            attrs=attrs, results=self._allocate(bound, geo), outputs=outputs,
            plan_name=bound["plan_name"], device=like.device))


def _non_differentiable(ctx: Any, inputs: Any, output: Sequence[torch.Tensor]) -> None:
    ctx.mark_non_differentiable(*output)


def _no_backward(ctx: Any, *grads: Any) -> None:
    raise RuntimeError("summaries are non-differentiable: differentiate the composition "
                       "that uses them (cudnn.linear_attention.context_parallel writes its "
                       "own backward with the *_summary_bwd ops)")


class SummaryOps:
    """Both summary ops of one family."""

    def __init__(self, family: SummaryFamily) -> None:
        self.family = family
        self.summary = _SummaryOp(family, backward=False)
        self.summary_bwd = _SummaryOp(family, backward=True)

    def caches(self) -> tuple[GraphCache[CachedGraph], GraphCache[CachedGraph]]:
        return self.summary.cache, self.summary_bwd.cache
