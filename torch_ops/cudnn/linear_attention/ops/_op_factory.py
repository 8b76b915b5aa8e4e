"""The custom-op machinery every linear-attention family shares.

`FamilyOps(family)` registers, with `torch.library.custom_op` in the `cudnn` namespace:
- `cudnn::<family>_fwd` -> (o, final_state, state_checkpoints) and
  `cudnn::<family>_bwd` -> (dq, dk, dv, d<gates>..., d_initial_state, d_a_log, d_dt_bias),
  schemas generated from the family's signature tables (_family.py, _signature.py);
- a fake (meta) kernel for each, running the same checks (_checks.py) and allocating the
  same result shapes, so torch.compile traces the ops without running them;
- autograd on `_fwd` that runs the `_bwd` op, i.e. the family's backward graph.

A kernel checks the call, allocates its results (absent optional results are zero-size
tensors: custom ops cannot return None), finds or builds the single-node graph for the
call's configuration in the op's bounded cache (_graph_cache.py, _graph_runner.py) and
executes it into the results. The ops never convert dtypes and never name an engine.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from cudnn.linear_attention.ops._checks import Geometry, check_call, checkpoint_rows
from cudnn.linear_attention.ops._family import (FORWARD_PORTS, FORWARD_RESULTS, GRADIENTS,
                                                GRAPH_ATTR_NAMES, Family)
from cudnn.linear_attention.ops._graph_cache import GraphCache
from cudnn.linear_attention.ops._graph_runner import CachedGraph, GraphRequest, build_graph
from cudnn.linear_attention.ops._signature import OpSignature

NAMESPACE = "cudnn"
#: op arguments that steer the op itself rather than describe the graph's node.
_NOT_GRAPH_ATTRS = frozenset({"checkpoint_dtype", "plan_name"})
#: the primal each gradient result belongs to, and back.
_PRIMAL_OF = {result: primal for result, (_, primal) in GRADIENTS.items()}
_GRADIENT_OF = {primal: result for result, primal in _PRIMAL_OF.items()}


def _cache_key(values: Sequence[Any], device: torch.device) -> tuple[Any, ...]:
    """Everything that shapes the graph: each tensor's dims, strides and dtype, every
    other argument's value, and the device."""
    return (device, *((v.shape, v.stride(), v.dtype) if isinstance(v, torch.Tensor) else v
                      for v in values))


class FamilyOps:
    """The registered ops of one family, their graph caches and the Python entry point."""

    def __init__(self, family: Family) -> None:
        self.family = family
        self.forward_signature = family.forward_signature()
        self.backward_signature = family.backward_signature()
        self.forward_name = f"{NAMESPACE}::{family.name}_fwd"
        self.backward_name = f"{NAMESPACE}::{family.name}_bwd"
        self.forward_cache: GraphCache[CachedGraph] = GraphCache(self.forward_name)
        self.backward_cache: GraphCache[CachedGraph] = GraphCache(self.backward_name)
        self._saved = ("q", "k", "v", *family.gate_names, "cu_seqlens", "initial_state",
                       "a_log", "dt_bias")
        self._register()

    # -- registration ------------------------------------------------------------------
    def _register(self) -> None:
        forward = torch.library.custom_op(self.forward_name, self._forward_kernel,
                                          mutates_args=(),
                                          schema=self.forward_signature.schema())
        forward.register_fake(self._forward_fake)
        forward.register_autograd(self._backward, setup_context=self._setup_context)
        backward = torch.library.custom_op(self.backward_name, self._backward_kernel,
                                           mutates_args=(),
                                           schema=self.backward_signature.schema())
        backward.register_fake(self._backward_fake)
        namespace = getattr(torch.ops, NAMESPACE)
        self.forward_op = getattr(namespace, f"{self.family.name}_fwd").default
        self.backward_op = getattr(namespace, f"{self.family.name}_bwd").default

    # -- the public function's body ----------------------------------------------------
    def forward(self, values: dict[str, Any]) -> tuple[torch.Tensor, ...]:
        """Run the forward op from the public function's arguments (by name)."""
        name = self.family.name
        q = values["q"]
        if not isinstance(q, torch.Tensor) or q.dim() != 3:
            given = f"dims {list(q.shape)}" if isinstance(q, torch.Tensor) else type(q).__name__
            raise ValueError(f"{name}: expected THD inputs, q [T, H, K] (rank 3); got {given}")
        for unsupported in ("overwrite_initial_state", "state_indices"):
            if values.get(unsupported) not in (None, False):
                raise NotImplementedError(
                    f"{name}: {unsupported} (in-place state pools, inference only) is not "
                    "supported by these ops yet; pass initial_state and read final_state")
        if values.get("scale") is None:
            values["scale"] = 1.0 / math.sqrt(q.shape[-1])
        results = self.forward_op(*self.forward_signature.positional(values))
        if values.get("checkpoint_every_n_tokens", 0) > 0:
            return tuple(results)
        return results[0], results[1]

    # -- forward -----------------------------------------------------------------------
    def _forward_results(self, args: Mapping[str, Any],
                         geo: Geometry) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        q = args["q"]
        state_shape = (geo.N, geo.HO, geo.V, geo.K)
        o = q.new_empty((geo.T, geo.HO, geo.V))
        final = q.new_empty(state_shape if args["output_final_state"] else (0,),
                            dtype=geo.state_dtype)
        every = args["checkpoint_every_n_tokens"]
        dtype = args["checkpoint_dtype"] or q.dtype
        rows = (checkpoint_rows(geo, every), geo.HO, geo.V, geo.K) if every > 0 else (0,)
        return o, final, q.new_empty(rows, dtype=dtype)

    def _forward_fake(self, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, ...]:
        bound = self.forward_signature.bind(args, kwargs)
        geo = check_call(self.forward_name, self.family, bound, backward=False)
        return self._forward_results(bound, geo)

    def _forward_kernel(self, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, ...]:
        values = self.forward_signature.complete(args, kwargs)
        bound = dict(zip(self.forward_signature.names, values))
        geo = check_call(self.forward_name, self.family, bound, backward=False)
        results = self._forward_results(bound, geo)
        present = (True, bool(bound["output_final_state"]),
                   bound["checkpoint_every_n_tokens"] > 0)
        ports = [(i, FORWARD_PORTS[r]) for i, r in enumerate(FORWARD_RESULTS) if present[i]]
        self._run(self.forward_cache, self.forward_signature, self.family.graph_forward,
                  values, bound, results, ports)
        return results

    # -- backward ----------------------------------------------------------------------
    def _backward_results(self, args: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        q = args["q"]
        primals = (args[_PRIMAL_OF[r]] for r in self.family.gradient_results)
        # one zero-size tensor per absent gradient: custom op results may not alias
        return tuple(q.new_empty((0,), dtype=torch.float32) if p is None else
                     p.new_empty(p.shape) for p in primals)

    def _backward_fake(self, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, ...]:
        bound = self.backward_signature.bind(args, kwargs)
        check_call(self.backward_name, self.family, bound, backward=True)
        return self._backward_results(bound)

    def _backward_kernel(self, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, ...]:
        values = self.backward_signature.complete(args, kwargs)
        bound = dict(zip(self.backward_signature.names, values))
        check_call(self.backward_name, self.family, bound, backward=True)
        results = self._backward_results(bound)
        ports = [(i, GRADIENTS[r][0]) for i, r in enumerate(self.family.gradient_results)
                 if bound[_PRIMAL_OF[r]] is not None]
        self._run(self.backward_cache, self.backward_signature, self.family.graph_backward,
                  values, bound, results, ports)
        return results

    # -- autograd ----------------------------------------------------------------------
    def _setup_context(self, ctx: Any, inputs: Sequence[Any], output: Sequence[Any]) -> None:
        bound = self.forward_signature.bind(inputs)
        checkpoints = output[2]
        ctx.set_materialize_grads(False)
        ctx.mark_non_differentiable(checkpoints)
        every = bound["checkpoint_every_n_tokens"]
        reuse = every > 0 and every % self.family.checkpoint_chunk == 0 \
            and checkpoints.numel() > 0
        ctx.save_for_backward(*(bound[name] for name in self._saved),
                              checkpoints if reuse else None)
        ctx.attrs = {name: bound[name] for name in self.backward_signature.names
                     if name in bound and name not in self.forward_signature.tensor_names}
        ctx.attrs["checkpoint_every_n_tokens"] = every if reuse else 0
        ctx.forward_args = self.forward_signature.names

    def _backward(self, ctx: Any, d_o: torch.Tensor | None, d_final: torch.Tensor | None,
                  _d_checkpoints: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
        saved = dict(zip((*self._saved, "state_checkpoints"), ctx.saved_tensors))
        q, v = saved["q"], saved["v"]
        if d_o is None:  # only final_state was used: o receives no gradient
            d_o = q.new_zeros((q.shape[0], max(q.shape[1], v.shape[1]), v.shape[2]))
        d_o = d_o.contiguous()  # gradients arrive in any layout (expanded, transposed)
        if d_final is not None and d_final.numel() == 0:
            d_final = None  # output_final_state=False: the empty placeholder
        elif d_final is not None:
            d_final = d_final.contiguous()
        grads = self.backward_op(*self.backward_signature.positional(
            {**saved, **ctx.attrs, "dO": d_o, "d_final_state": d_final}))
        by_result = dict(zip(self.family.gradient_results, grads))
        return tuple(by_result[_GRADIENT_OF[name]]
                     if name in _GRADIENT_OF and saved.get(name) is not None else None
                     for name in ctx.forward_args)

    # -- execution ---------------------------------------------------------------------
    def _run(self, cache: GraphCache[CachedGraph], signature: OpSignature,
             builder: Any, values: Sequence[Any], bound: Mapping[str, Any],
             results: Sequence[torch.Tensor], ports: Sequence[tuple[int, str]]) -> None:
        device = bound["q"].device
        key = _cache_key(values, device)

        def build() -> CachedGraph:
            tensor_names = signature.tensor_names
            return build_graph(GraphRequest(
                op=cache.name, builder=builder,
                inputs={n: bound[n] for n in tensor_names if bound[n] is not None},
                attrs={GRAPH_ATTR_NAMES.get(n, n): bound[n] for n in signature.names
                       if n not in tensor_names and n not in _NOT_GRAPH_ATTRS
                       and bound[n] is not None},
                outputs=[(i, port, results[i]) for i, port in ports],
                plan_name=bound["plan_name"], device=device))

        cache.get_or_build(key, build).execute(bound, results)

    def caches(self) -> tuple[GraphCache[CachedGraph], GraphCache[CachedGraph]]:
        return self.forward_cache, self.backward_cache
