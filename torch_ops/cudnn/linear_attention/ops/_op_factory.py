"""The custom-op machinery every linear-attention family shares.

`FamilyOps(family)` registers, with `torch.library.custom_op` in the `cudnn` namespace:
- `cudnn::<family>_fwd` -> (o, final_state, state_checkpoints) and
  `cudnn::<family>_bwd` -> (dq, dk, dv, d<gates>..., d_initial_state, d_a_log, d_dt_bias),
  schemas generated from the family's signature tables (_family.py, _signature.py);
- a fake (meta) kernel for each, running the same checks (_checks.py: the op spec's rules
  plus the op's own) and allocating results at the dims the spec's shape rules give, so
  torch.compile traces the ops without running them;
- autograd on `_fwd` that runs the `_bwd` op, i.e. the family's backward graph.

Training checkpoints: an eager forward that records autograd and did not ask for
checkpoints asks for them itself, every TRAINING_CHECKPOINT_EVERY tokens, when the engine
that serves the plain forward also serves the call with checkpoints and a backward graph
plans that reads them (decided once per configuration, kept in a bounded cache); it saves them for the backward, whose graph then
reads the states instead of recomputing them, and returns only (o, final_state). Where
the engine also writes the forward's `values` (u_t per token, [T, HO, V]) and a backward
graph reading both plans, the forward asks for those too and the backward runs without
any recompute (FROST backward v1.3: chain and grads only); values cost T x HO x V in q's
dtype more (134 MB at 8 x 4096 tokens, 16 heads, V = 128). They
cost device memory from the forward until the backward: [T // 64 + N, HO, V, K] in q's
dtype (bf16: 2/64 of a [T, HO, V, K] state per token, i.e. V*K/32 bytes per token and
head, 512 B at K = V = 128; 272 MB for 8 x 4096 tokens and 16 heads). Otherwise, and for
calls under torch.compile or dispatch modes, the backward recomputes them as before.
Opt-in: `set_training_checkpoints(True)` turns the behaviour on (off by default: faster
but holds memory from forward to backward, see below).

A kernel looks the call's configuration up in the op's bounded graph cache
(_graph_cache.py), the torch-op layer's one cache. On a miss it checks the call,
allocates its results (absent optional results are zero-size tensors: custom ops cannot
return None) and builds the single-node graph (_graph_runner.py); the configuration key
holds every dim, stride, dtype, device and attribute the checks read, so a hit skips
them. Then the graph runs into fresh results. An eager forward of long sequences on few
heads runs as spans side by side instead (`_eager_forward`, _span_split.py). The ops
never name an engine; the public function converts gate, index and state dtypes to the
ones the planned engine reads before calling the op (_dtype_normalise.py).
"""
from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from cudnn.linear_attention.common.cu_seqlens_check import check_cu_seqlens
from cudnn.linear_attention.ops._checks import CheckedCall, check_call
from cudnn.linear_attention.ops._direct_call import DIRECT, DIRECT_AUTOGRAD, route
from cudnn.linear_attention.ops._dtype_normalise import DtypeNormaliser, restore_final_state
from cudnn.linear_attention.ops._packed_rows import packed_rows
from cudnn.linear_attention.ops._family import (FORWARD_PORTS, FORWARD_RESULTS, GRADIENTS,
                                                GRAPH_ATTR_NAMES, NOT_GRAPH_ATTRS, OpFamily)
from cudnn.linear_attention.ops._graph_cache import GraphCache
from cudnn.linear_attention.ops._graph_runner import CachedGraph, GraphRequest, build_graph
from cudnn.linear_attention.ops._signature import OpSignature
from cudnn.linear_attention.ops._span_split import SpanCall, SpanSplit, backward_split_enabled
from cudnn.ops.errors import OpTypeError, OpValueError, cudnnGraphNotSupportedError
from cudnn.ops.op_spec import OpSpec

NAMESPACE = "cudnn"
#: the primal each gradient result belongs to, and back.
_PRIMAL_OF = {result: primal for result, (_, primal) in GRADIENTS.items()}
_GRADIENT_OF = {primal: result for result, primal in _PRIMAL_OF.items()}

_Results = tuple[torch.Tensor, ...]
_FORWARD_DROPPABLE = (FORWARD_RESULTS.index("state_checkpoints"), FORWARD_RESULTS.index("values"))
_SERVE_DROPPABLE = (FORWARD_RESULTS.index("final_state"), *_FORWARD_DROPPABLE)

#: the cadence a training forward asks for on its own: one 64-token chunk of the chunked
#: kernels (the granularity at which a backward can reuse forward states).
TRAINING_CHECKPOINT_EVERY = 64
#: what a configuration's training forwards ask for (FamilyOps.checkpoint_decisions):
#: nothing, checkpoints, or checkpoints and values (the engine writes both, the backward
#: reads both).
_TRAINING_PLAIN, _TRAINING_CHECKPOINTS, _TRAINING_VALUES = 0, 1, 2
# Off by default for memory, not speed: with the forward's values (v1.3) the backward
# recomputes nothing and the op's GDN forward + backward at 8 x 4096 tokens, 16 heads,
# K = V = 128 is 11-15 % faster (H100: 1.444 against 1.624 ms; H200, an earlier build: 1.43
# against 1.69), but the checkpoints and values stay on the device from each layer's forward
# to its backward (406 MB per layer at that shape): a default that can turn a fitting
# training run into an out-of-memory one is worse than a slower one (torch_ops/README.md,
# "Training checkpoints").
_training_checkpoints_enabled = False


def set_training_checkpoints(enabled: bool) -> bool:
    """Whether training forwards ask for state checkpoints on their own (see the module
    docstring; off by default); returns the previous setting. False: the backward
    recomputes the states (no memory held between forward and backward)."""
    global _training_checkpoints_enabled
    if not isinstance(enabled, bool):
        raise TypeError(f"set_training_checkpoints: expected a bool, got {type(enabled).__name__}")
    previous, _training_checkpoints_enabled = _training_checkpoints_enabled, enabled
    return previous


def default_scale(head_dim: int) -> float:
    """1/sqrt(K), the readout scale when none is given (docs/LINEAR_ATTENTION.md §1.1)."""
    return 1.0 / math.sqrt(head_dim)


def _tensor_positions(signature: OpSignature) -> tuple[int, ...]:
    return tuple(signature.names.index(n) for n in signature.tensor_names)


def cache_key_function(signature: OpSignature) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """`cache_key(values)` for calls of `signature`: everything that shapes the graph and
    that the checks read: every non-tensor argument's value, and each tensor argument's
    dims, strides, dtype and device index (None when absent). The positions are resolved
    here once, so a call pays two C itemgetters and one loop over its tensors."""
    tensor_positions = _tensor_positions(signature)
    others = [i for i in range(len(signature.names)) if i not in tensor_positions]
    take_tensors = _getter(tensor_positions)
    take_others = _getter(others)

    def cache_key(values: Sequence[Any]) -> tuple[Any, ...]:
        return (take_others(values), *[None if t is None else
                                       (t.shape, t.stride(), t.dtype, t.get_device())
                                       for t in take_tensors(values)])
    return cache_key


def _engine_of(plan: str) -> str:
    """The engine of a plan name ("gdn_frost[...]" -> "gdn_frost")."""
    return plan.split("[", 1)[0]


def _refuse_real_tensors(op: str, bound: Mapping[str, Any]) -> None:
    """The fake kernel allocates results without computing them: fine for fake and meta
    tensors (tracing), never for a call with real data, which torch's dispatcher sends
    here when one argument is a meta tensor; the results would be uninitialised memory."""
    real = [name for name, t in bound.items() if type(t) is torch.Tensor
            and t.device.type != "meta"]
    meta = [name for name, t in bound.items() if isinstance(t, torch.Tensor)
            and t.device.type == "meta"]
    if real and meta:
        raise OpValueError(op, meta[0], f"a tensor on {bound[real[0]].device}, the device of "
                           f"'{real[0]}' (meta tensors only trace)", "a tensor on meta")


def _getter(positions: Sequence[int]) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """operator.itemgetter that always returns a tuple (itemgetter(i) returns the item)."""
    if not positions:
        return lambda values: ()
    if len(positions) == 1:
        (only,) = positions
        return lambda values: (values[only],)
    return operator.itemgetter(*positions)


@dataclass(frozen=True)
class _OpDef:
    """One registered op: its name, signature, graph builder, cache and result rules."""
    name: str
    signature: OpSignature
    backward: bool
    #: the op spec of the graph's node, and the pygraph builder that adds it.
    spec: OpSpec
    graph_builder: Callable[..., Any]
    cache: GraphCache[CachedGraph]
    #: (bound call, checked call) -> every result, allocated like `new_empty` of q.
    allocate: Callable[[Mapping[str, Any], CheckedCall], _Results]
    #: bound call -> (result position, graph output port) of the results the graph writes.
    written: Callable[[Mapping[str, Any]], list[tuple[int, str]]]
    #: values in schema order -> the graph cache key (cache_key_function).
    cache_key: Callable[[Sequence[Any]], tuple[Any, ...]]
    #: bound call -> (argument position, graph output port) of outputs written into an
    #: argument's tensor (the serving op's final state into its pool).
    aliases: Callable[[Mapping[str, Any]], list[tuple[int, str]]] = lambda bound: []


class FamilyOps:
    """The registered ops of one family, their graph caches and the Python entry point."""

    def __init__(self, family: OpFamily) -> None:
        self.family = family
        self._saved = ("q", "k", "v", *family.gate_names, "cu_seqlens", "initial_state",
                       "a_log", "dt_bias")
        self.forward_def = self._op_def("fwd", family.forward_signature(), False,
                                        family.forward_spec, self._forward_results,
                                        self._forward_written)
        self.backward_def = self._op_def("bwd", family.backward_signature(), True,
                                         family.backward_spec, self._backward_results,
                                         self._backward_written)
        # the serving forward (state pools, overwrite): inference only, no autograd
        self.serve_def = self._op_def("serve", family.serve_signature(), False,
                                      family.forward_spec, self._serve_results,
                                      self._serve_written, self._serve_aliases)
        self.forward_signature = self.forward_def.signature
        self.backward_signature = self.backward_def.signature
        self.serve_signature = self.serve_def.signature
        forward, self._forward_kernel = self._register(self.forward_def)
        forward.register_autograd(self._backward, setup_context=self._setup_context)
        _, self._backward_kernel = self._register(self.backward_def)
        self._register(self.serve_def)
        self._serve_tensor_positions = _tensor_positions(self.serve_signature)
        self._initial_state_position = self.forward_signature.names.index("initial_state")
        #: the serving op packs strided inputs like the forward, except the pool it writes
        self._packed_serve_positions = tuple(i for i in _tensor_positions(self.forward_signature)
                                             if i != self._initial_state_position)
        self._forward_tensor_positions = _tensor_positions(self.forward_signature)
        names = self.forward_signature.names
        # what setup_context keeps, by forward position (it runs on every autograd call)
        self._take_saved = _getter([names.index(name) for name in self._saved])
        tensors = self.forward_signature.tensor_names
        self._backward_attrs = tuple((name, names.index(name))
                                     for name in self.backward_signature.names
                                     if name in names and name not in tensors)
        self._scale_position = self.forward_signature.names.index("scale")
        self._cu_seqlens_position = self.forward_signature.names.index("cu_seqlens")
        self._checkpoint_position = self.forward_signature.names.index(
            "checkpoint_every_n_tokens")
        self._output_values_position = self.forward_signature.names.index("output_values")
        self._backward_tensor_positions = _tensor_positions(self.backward_signature)
        self._eager_autograd = self._eager_function()
        self.dtypes = DtypeNormaliser(self)  # the only conversion: _dtype_normalise.py
        #: plain forward cache key -> what its training calls ask for (_TRAINING_PLAIN,
        #: _TRAINING_CHECKPOINTS or _TRAINING_VALUES; made with the graphs in the caches,
        #: so cleared with them: clear_graph_caches)
        self.checkpoint_decisions: GraphCache[int] = GraphCache(f"{self.forward_def.name} checkpoints")
        namespace = getattr(torch.ops, NAMESPACE)
        self.forward_op = getattr(namespace, f"{family.name}_fwd").default
        self.backward_op = getattr(namespace, f"{family.name}_bwd").default
        self.serve_op = getattr(namespace, f"{family.name}_serve").default

    def _op_def(self, suffix: str, signature: OpSignature, backward: bool, spec: OpSpec,
                allocate: Callable[..., _Results],
                written: Callable[..., list[tuple[int, str]]],
                aliases: Callable[..., list[tuple[int, str]]] | None = None) -> _OpDef:
        name = f"{NAMESPACE}::{self.family.name}_{suffix}"
        extra = {} if aliases is None else {"aliases": aliases}
        return _OpDef(name, signature, backward, spec, self.family.builder(spec),
                      GraphCache(name), allocate, written, cache_key_function(signature),
                      **extra)

    # -- registration ------------------------------------------------------------------
    def _register(self, op: _OpDef) -> tuple[Any, Callable[..., _Results]]:
        """Register op with torch.library; returns it and its (CPU/CUDA) kernel."""
        def kernel(*args: Any, **kwargs: Any) -> _Results:
            return self._run(op, op.signature.complete(args, kwargs))

        def fake(*args: Any, **kwargs: Any) -> _Results:
            bound = op.signature.bind(args, kwargs)
            checked = check_call(op.name, self.family, op.spec, bound)
            _refuse_real_tensors(op.name, bound)
            return op.allocate(bound, checked)

        registered = torch.library.custom_op(op.name, kernel,
                                             mutates_args=op.signature.mutated,
                                             schema=op.signature.schema())
        registered.register_fake(fake)
        return registered, kernel

    def _run(self, op: _OpDef, values: Sequence[Any], drop_unused: bool = False) -> _Results:
        """Run `op` on all its values (schema order) through its cached graph. With
        `drop_unused`, results the caller discards (DROPPABLE_RESULTS) may come back as
        None when they are empty placeholders."""
        entry = op.cache.get_or_build(op.cache_key(values), lambda: self._build(op, values))
        return entry.run(values, drop_unused)

    def _build(self, op: _OpDef, values: Sequence[Any]) -> CachedGraph:
        signature = op.signature
        bound = dict(zip(signature.names, values))
        checked = check_call(op.name, self.family, op.spec, bound)
        tensors = signature.tensor_names
        attrs = {GRAPH_ATTR_NAMES.get(n, n): bound[n] for n in signature.names
                 if n not in tensors and n not in NOT_GRAPH_ATTRS and bound[n] is not None}
        if attrs["scale"] == default_scale(bound["q"].shape[-1]):
            # the public functions fill in the default; the graph says "default" (None),
            # so engines that serve only the default scale see it as such
            del attrs["scale"]
        return build_graph(GraphRequest(
            op=op.name, builder=op.graph_builder,
            inputs=[(signature.names.index(n), n, bound[n]) for n in tensors
                    if bound[n] is not None],
            attrs=attrs, results=op.allocate(bound, checked), outputs=op.written(bound),
            plan_name=bound["plan_name"], device=bound["q"].device,
            droppable=self._droppable(op, bound),
            aliases=op.aliases(bound)))

    def _droppable(self, op: _OpDef, bound: Mapping[str, Any]) -> tuple[int, ...]:
        """Result positions whose empty placeholders the caller discards (the lane may
        return None for them): the checkpoints and values of a forward that asked for
        none, and the serving op's final_state under overwrite_initial_state (the pool is
        returned)."""
        if op.backward:
            return ()
        if op is self.serve_def and bound["overwrite_initial_state"] is True:
            return _SERVE_DROPPABLE
        return _FORWARD_DROPPABLE

    # -- the public function's body ----------------------------------------------------
    def forward(self, args: tuple[Any, ...], overwrite_initial_state: Any = False,
                state_indices: Any = None, strict_cu_seqlens: bool = False) -> _Results:
        """Run the forward op from the public function's arguments: `args` every schema
        argument in schema order (forward_signature), then the three it does not hold
        (`strict_cu_seqlens`: check the table on its device first, eager calls only)."""
        name = self.family.name
        q = args[0]
        if not isinstance(q, torch.Tensor) or q.dim() != 3:
            given = f"dims {list(q.shape)}" if isinstance(q, torch.Tensor) else type(q).__name__
            raise ValueError(f"{name}: expected THD inputs, q [T, H, K] (rank 3); got {given}")
        if len(args) != len(self.forward_signature.names):
            raise TypeError(f"{name}: {len(args)} arguments for the "
                            f"{len(self.forward_signature.names)} of the op's schema")
        if strict_cu_seqlens and not torch.compiler.is_compiling():
            cu = args[self._cu_seqlens_position]
            if isinstance(cu, torch.Tensor):  # else the op's checks name it
                check_cu_seqlens(cu, q.shape[0], name)
        scale_at = self._scale_position
        if args[scale_at] is None:
            args = (*args[:scale_at], default_scale(q.shape[-1]), *args[scale_at + 1:])
        if (overwrite_initial_state is not False and overwrite_initial_state is not None) \
                or state_indices is not None:
            return self.serve(args, overwrite_initial_state, state_indices)
        checkpoints = args[self._checkpoint_position] > 0
        args = packed_rows(args, self._forward_tensor_positions)  # _packed_rows.py
        how = route(args, self._forward_tensor_positions)  # _direct_call.py
        args, state_dtype = self.dtypes.normalise(args, how)
        if how == DIRECT:  # nobody sees the checkpoint placeholder: the lane may skip it
            results, _ = self._eager_forward(args, drop_unused=not checkpoints)
        elif how == DIRECT_AUTOGRAD:  # see _eager_function: only what records goes alone
            # a call that splits into spans, its backward too, trains faster split than
            # unsplit with checkpoints: H200, 1 x 32768 tokens, 16 heads, GDN fwd+bwd
            # 3.97 ms against 7.47 ms (9.1 with the backward unsplit; bench/NOTES.md)
            if not checkpoints and _training_checkpoints_enabled and not (
                    backward_split_enabled() and self._span_split.span_for(args) is not None):
                args = self._with_training_checkpoints(args)
            recording = tuple([i for i in self._forward_tensor_positions
                               if args[i] is not None and args[i].requires_grad])
            results = self._eager_autograd.apply((args, recording),
                                                 *[args[i] for i in recording])
        else:
            results = self.forward_op(*args)
        results = restore_final_state(results, state_dtype)
        if checkpoints:  # values (results[3]) stay internal: only the backward reads them
            return results[0], results[1], results[2]
        return results[0], results[1]

    def _eager_forward(self, args: tuple[Any, ...], drop_unused: bool = False,
                       autograd: bool = False) -> tuple[_Results, SpanCall | None]:
        """The forward op's results for an eager call: split into spans that run side by
        side where that pays (_span_split.py: long sequences on few heads), else the
        forward graph; and, for an `autograd` call whose backward splits too
        (_span_split.backward_split_enabled), what that backward needs (else None)."""
        split_backward = autograd and backward_split_enabled()
        # training checkpoints asked for would be given up for the split: a call that may
        # have them keeps the forward's rule (_span_split.MIN_GAIN_TRAINING says why)
        span = self._span_split.span_for(
            args, training=split_backward and not _training_checkpoints_enabled)
        if span is not None:
            ran = self._split_once(self.forward_def, args, lambda: self._span_split.run(
                args, span, split_backward))
            if ran is not None:
                return ran
        return self._run(self.forward_def, args, drop_unused), None

    def _split_serve(self, values: tuple[Any, ...]) -> _Results | None:
        """The serving op's results by spans (_span_split.SpanSplit.serve) where the split
        applies to the call (its forward arguments: values less the last two), else None."""
        args, overwrite, state_indices = values[:-2], values[-2], values[-1]
        span = self._span_split.span_for(args)
        if span is None:
            return None
        return self._split_once(self.serve_def, values, lambda: self._span_split.serve(
            args, state_indices, overwrite is True, span))

    def _split_once(self, op: _OpDef, values: tuple[Any, ...], run: Callable[[], Any]) -> Any:
        """run() (a split of a call of `op` with `values`) after op's own checks, which
        name bad arguments (once per configuration), or None for a configuration whose
        summary no engine serves (run() returned None for it once before)."""
        split = self._span_split
        key = op.cache_key(values)
        if key not in split.checked:
            check_call(op.name, self.family, op.spec, dict(zip(op.signature.names, values)))
            split.checked.add(key)
        if key in split.declined:
            return None
        results = run()
        if results is None:
            split.declined.add(key)
        return results

    @functools.cached_property
    def _span_split(self) -> SpanSplit:
        from cudnn.linear_attention.ops.summary import SUMMARY_OPS  # registers them

        (summaries,) = [s for s in SUMMARY_OPS if s.family.name == self.family.name]
        return SpanSplit(self.forward_signature.names,
                         lambda args: self._run(self.forward_def, args), summaries,
                         self.family.gradient_results)

    def _with_training_checkpoints(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """`args` asking for checkpoints every TRAINING_CHECKPOINT_EVERY tokens, and for the
        forward's values as well where that is served too, when the engine whose plan
        serves the plain forward serves that call (and a backward graph reading what it
        writes plans), else `args` (module docstring). The first call of a configuration
        builds the forward graphs (into the op's cache); a plain forward that no engine
        serves is left to fail as it would have."""
        op = self.forward_def
        at, at_values = self._checkpoint_position, self._output_values_position
        trial = (*args[:at], TRAINING_CHECKPOINT_EVERY, *args[at + 1:])
        trial_values = (*trial[:at_values], True, *trial[at_values + 1:])
        key = op.cache_key(args)

        def served(plain: CachedGraph, call: tuple[Any, ...]) -> bool:
            try:
                forward = op.cache.get_or_build(op.cache_key(call), lambda: self._build(op, call))
                if _engine_of(forward.plan) != _engine_of(plain.plan):
                    return False
                backward, values = self.backward_def, self._backward_with_checkpoints(call, forward)
                backward.cache.get_or_build(backward.cache_key(values), lambda: self._build(backward, values))
            except (cudnnGraphNotSupportedError, OpTypeError):
                return False
            return True

        def decide() -> int:
            try:
                plain = op.cache.get_or_build(key, lambda: self._build(op, args))
            except cudnnGraphNotSupportedError:
                return _TRAINING_PLAIN
            if served(plain, trial_values):
                return _TRAINING_VALUES
            return _TRAINING_CHECKPOINTS if served(plain, trial) else _TRAINING_PLAIN

        decision = self.checkpoint_decisions.get_or_build(key, decide)
        return {_TRAINING_PLAIN: args, _TRAINING_CHECKPOINTS: trial, _TRAINING_VALUES: trial_values}[decision]

    def _backward_with_checkpoints(self, forward_values: Sequence[Any], forward: CachedGraph
                                   ) -> tuple[Any, ...]:
        """The backward op's arguments for a training forward with checkpoints, as its
        autograd passes them when only o receives a gradient: fresh dO, checkpoint (and,
        when the call asks for them, values) buffers at the forward graph's result dims
        (allocated for this one decision)."""
        call = dict(zip(self.forward_signature.names, forward_values))
        q = call["q"]
        (o_dims, o_dtype), _, (ck_dims, ck_dtype), (u_dims, u_dtype) = forward.results
        values = q.new_empty(u_dims, dtype=u_dtype) if call["output_values"] else None
        return self.backward_signature.positional({
            **call, "dO": q.new_empty(o_dims, dtype=o_dtype), "d_final_state": None,
            "state_checkpoints": q.new_empty(ck_dims, dtype=ck_dtype), "values": values})

    def serve(self, args: tuple[Any, ...], overwrite_initial_state: Any,
              state_indices: Any) -> _Results:
        """The serving forward (`cudnn::<family>_serve`): initial_state is a state pool
        [S, HO, V, K] addressed by state_indices [N] int32 (row n without them); under
        overwrite_initial_state the final states are written into it in place and it is
        returned as final_state. Inference only: gates and indices are converted, and
        strided inputs packed, as the forward's; the pool never is (a copy would take the
        writes: a pool the engines cannot read as it is gets their error)."""
        values = (*args, overwrite_initial_state, state_indices)
        if route(values, self._serve_tensor_positions) == DIRECT:
            # The cached path (a server's decode loop): a call whose arguments are already
            # what a built graph of this op was built for (dims, strides, dtypes: the key)
            # runs it as given; the packing and conversions below would change nothing
            # (or would pick another graph that is just as valid). DIRECT: nothing records
            # autograd, so the inference-only check below cannot fire.
            entry = self.serve_def.cache.get(self.serve_def.cache_key(values))
            if entry is not None:
                return self._served(args, overwrite_initial_state, entry.run(values, True))
        name = self.family.name
        if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                           for t in (*args, state_indices)):
            raise ValueError(f"{name}: state_indices / overwrite_initial_state are inference "
                             "only: call under torch.no_grad() or with tensors that do not "
                             "require grad")
        args = packed_rows(args, self._packed_serve_positions)  # _packed_rows.py
        targets = self.dtypes.kernel_targets(args, state_fp32=False)
        args, _ = self.dtypes._apply(args, targets)
        if isinstance(state_indices, torch.Tensor) and not state_indices.is_contiguous():
            state_indices = state_indices.contiguous()
        values = (*args, overwrite_initial_state, state_indices)
        if route(values, self._serve_tensor_positions) == DIRECT:
            results = self._split_serve(values)  # a long prefill on few heads: by spans
            if results is None:
                results = self._run(self.serve_def, values, drop_unused=True)
        else:
            results = self.serve_op(*values)
        return self._served(args, overwrite_initial_state, results)

    def _served(self, args: tuple[Any, ...], overwrite_initial_state: Any,
                results: Sequence[Any]) -> _Results:
        """The public results of a serving call: under overwrite_initial_state the pool is
        final_state (the op's own final_state is an empty placeholder, which the launch
        lane does not even allocate: SERVE_DROPPABLE)."""
        final = args[self._initial_state_position] if overwrite_initial_state is True \
            else results[1]
        if args[self._checkpoint_position] > 0:
            return results[0], final, results[2]
        return results[0], final

    # -- results -----------------------------------------------------------------------
    @staticmethod
    def _forward_results(args: Mapping[str, Any], checked: CheckedCall) -> _Results:
        q, dims = args["q"], checked.dims
        o = q.new_empty(dims["O"])
        final = q.new_empty(dims["final_state"] if args["output_final_state"] else (0,),
                            dtype=checked.state_dtype)
        every = args["checkpoint_every_n_tokens"]
        dtype = args["checkpoint_dtype"] or q.dtype
        values = q.new_empty(dims["values"] if args["output_values"] else (0,))
        return o, final, q.new_empty(dims["state_checkpoints"] if every > 0 else (0,),
                                     dtype=dtype), values

    @staticmethod
    def _forward_written(args: Mapping[str, Any]) -> list[tuple[int, str]]:
        present = (True, bool(args["output_final_state"]), args["checkpoint_every_n_tokens"] > 0,
                   bool(args["output_values"]))
        return [(i, FORWARD_PORTS[r]) for i, r in enumerate(FORWARD_RESULTS) if present[i]]

    def _serve_results(self, args: Mapping[str, Any], checked: CheckedCall) -> _Results:
        """The forward's results; under overwrite_initial_state final_state is a zero-size
        placeholder (the states go into initial_state, which the public function returns)."""
        o, final, checkpoints, values = self._forward_results(args, checked)
        if args["overwrite_initial_state"] is True:
            final = args["q"].new_empty((0,), dtype=checked.state_dtype)
        return o, final, checkpoints, values

    def _serve_written(self, args: Mapping[str, Any]) -> list[tuple[int, str]]:
        written = self._forward_written(args)
        if args["overwrite_initial_state"] is True:
            return [(i, port) for i, port in written if port != "final_state"]
        return written

    def _serve_aliases(self, args: Mapping[str, Any]) -> list[tuple[int, str]]:
        if args["overwrite_initial_state"] is not True:
            return []
        return [(self.serve_signature.names.index("initial_state"), "final_state")]

    def _backward_results(self, args: Mapping[str, Any], checked: CheckedCall) -> _Results:
        q = args["q"]
        primals = (args[_PRIMAL_OF[r]] for r in self.family.gradient_results)
        # one zero-size tensor per absent gradient: custom op results may not alias
        return tuple(q.new_empty((0,), dtype=torch.float32) if p is None else
                     p.new_empty(p.shape) for p in primals)

    def _backward_written(self, args: Mapping[str, Any]) -> list[tuple[int, str]]:
        return [(i, GRADIENTS[r][0]) for i, r in enumerate(self.family.gradient_results)
                if args[_PRIMAL_OF[r]] is not None]

    # -- autograd ----------------------------------------------------------------------
    def _setup_context(self, ctx: Any, inputs: Sequence[Any], output: Sequence[Any]) -> None:
        names = self.forward_signature.names
        if len(inputs) != len(names):
            inputs = self.forward_signature.complete(inputs)
        checkpoints, values = output[2], output[3]
        ctx.set_materialize_grads(False)
        ctx.mark_non_differentiable(checkpoints, values)
        every = inputs[self._checkpoint_position]
        reuse = every > 0 and every % self.family.checkpoint_chunk == 0 \
            and checkpoints.numel() > 0
        # values are read only with the checkpoints they came with
        keep_values = reuse and values.numel() > 0
        ctx.save_for_backward(*self._take_saved(inputs), checkpoints if reuse else None,
                              values if keep_values else None)
        attrs = {name: inputs[position] for name, position in self._backward_attrs}
        attrs["checkpoint_every_n_tokens"] = every if reuse else 0
        ctx.attrs = attrs

    def _backward(self, ctx: Any, d_o: torch.Tensor | None, d_final: torch.Tensor | None,
                  _d_checkpoints: torch.Tensor | None, _d_values: torch.Tensor | None = None
                  ) -> tuple[torch.Tensor | None, ...]:
        saved = dict(zip((*self._saved, "state_checkpoints", "values"), ctx.saved_tensors))
        q, v = saved["q"], saved["v"]
        if d_o is None:  # only final_state was used: o receives no gradient
            d_o = q.new_zeros((q.shape[0], max(q.shape[1], v.shape[1]), v.shape[2]))
        d_o = d_o.contiguous()  # gradients arrive in any layout (expanded, transposed)
        if d_final is not None and d_final.numel() == 0:
            d_final = None  # output_final_state=False: the empty placeholder
        elif d_final is not None:
            d_final = d_final.contiguous()
        named = {**saved, **ctx.attrs, "dO": d_o, "d_final_state": d_final}
        args = self.backward_signature.positional(named)
        spans = getattr(ctx, "spans", None)
        how = route(args, self._backward_tensor_positions)
        if how == DIRECT and spans is not None:
            grads = self._span_split.backward(  # the forward split: so does its backward
                spans, named, lambda n: self._backward_kernel(*self.backward_signature.positional(n)))
        elif how == DIRECT:
            grads = self._backward_kernel(*args)
        else:  # traced, under a mode, or a double backward: the registered op
            grads = self.backward_op(*args)
        by_result = dict(zip(self.family.gradient_results, grads))
        return tuple(by_result[_GRADIENT_OF[name]]
                     if name in _GRADIENT_OF and saved.get(name) is not None else None
                     for name in self.forward_signature.names)

    def _eager_function(self) -> type[torch.autograd.Function]:
        """The registered autograd (our _setup_context and _backward) as a plain
        torch.autograd.Function around the forward kernel, for eager calls that record
        autograd without the dispatcher (_direct_call.DIRECT_AUTOGRAD)."""
        ops = self

        # apply() costs ~0.5 us per argument (functorch's dead-wrapper scan, the node's
        # inputs): the call travels as one tuple, and only the tensors that record
        # autograd go as arguments of their own (autograd tracks those; the rest are
        # plain values to it, and saving them for backward needs no tracking).
        class EagerForward(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, call: tuple[tuple[Any, ...], tuple[int, ...]],
                        *_recording: Any) -> _Results:
                args, ctx.recording = call
                results, ctx.spans = ops._eager_forward(args, autograd=True)
                ops._setup_context(ctx, args, results)
                return results

            @staticmethod
            def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
                by_argument = ops._backward(ctx, *grads)
                return (None, *[by_argument[i] for i in ctx.recording])

        EagerForward.__name__ = EagerForward.__qualname__ = f"{self.family.name}_eager"
        return EagerForward

    def caches(self) -> tuple[GraphCache[CachedGraph], ...]:
        return self.forward_def.cache, self.backward_def.cache, self.serve_def.cache
