"""Adding one node to a graph from its OpSpec and the builder's arguments.

`add_op` is what every generated builder method calls. It works in two phases so that
a rejected call leaves the graph untouched: first every argument is checked (kinds,
ranks, dtypes, unknown or missing keywords, the spec's shape check) against lightweight
views; only then are framework arrays described into tensors (and remembered as
auto-bindings), the node created and its outputs made. Outputs are virtual with unset
dtype (except `dtype_like`), named `<node>::<suffix>`, dimensioned from `out_dims`
(caller-set, and equal to what the spec infers where it infers) or from the spec's
inference (provisional, row-major strides). Inference runs before the first change, and
the commit itself is all-or-nothing (`pygraph._all_or_nothing`): no call that raises
leaves a tensor, uid, auto-binding or node behind.
"""
from __future__ import annotations

import difflib
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cudnn.framework_arrays import ArrayDescription, describe, is_framework_array
from cudnn.graph_context import normalize_dtype
from cudnn.graph_types import Tensor, normalize_dims
from cudnn.nodes import Node, view_of
from cudnn.op_binders import GENERAL, Binder, binder
from cudnn.ops.errors import OpTypeError, OpValueError, show
from cudnn.ops.op_spec import (Direction, OpCall, OpSpec, OutputSpec, PortKind, PortSpec,
                               PortView, ReturnStyle, list_port_key)

if TYPE_CHECKING:
    from cudnn._pygraph import pygraph

_TENSOR_EXPECTED = "a cudnn Tensor or a framework array (torch, numpy, DLPack)"


@dataclass(frozen=True)
class _Pending:
    """A framework array that becomes a tensor when the node is committed."""
    value: Any
    description: ArrayDescription


_Bound = Tensor | _Pending


@dataclass
class _Binding:
    inputs: dict[str, _Bound]
    outputs: dict[str, _Bound]
    params: dict[str, Any]
    singles: dict[str, PortView]
    lists: dict[str, tuple[PortView, ...]]
    out_views: dict[str, PortView]


def add_op(graph: pygraph, spec: OpSpec, args: Mapping[str, Any]) -> Any:
    bind = _BINDERS.get(spec)
    if bind is None:
        bind = _BINDERS[spec] = binder(spec) or _no_binder
    out = bind(graph, args)
    if out is not GENERAL:
        return out
    return _add_general(graph, spec, args)


#: {OpSpec: its one-pass builder (op_binders)}; OpSpecs are module-level constants, alive
#: as long as the process, and hash by identity.
_BINDERS: dict[OpSpec, Binder] = {}


def _no_binder(graph: pygraph, args: Mapping[str, Any]) -> Any:
    return GENERAL


def _add_general(graph: pygraph, spec: OpSpec, args: Mapping[str, Any]) -> Any:
    op = spec.name
    graph._check_not_frozen(f"add a '{op}' node")
    unexpected = args.get("unexpected") or {}
    if unexpected:
        raise _unexpected_keyword(spec, unexpected)
    name = args.get("name") or ""
    if not isinstance(name, str):
        raise OpTypeError(op, "name", "a str", show(name))
    if name and graph.get_node(name) is not None:
        raise OpValueError(op, "name", "a node name not yet used in this graph", repr(name))
    cdt = normalize_dtype(args.get("compute_data_type"), op, "compute_data_type")
    binding = _bind(graph, spec, args)
    wired = frozenset(binding.outputs)
    call = OpCall(spec=spec, inputs=binding.singles, params=binding.params, lists=binding.lists,
                  outputs=binding.out_views, out_ports=wired)
    present = [o for o in spec.outputs if o.present is None or o.present(call)]
    out_dims = _normalize_out_dims(spec, args.get("out_dims"), present)
    if out_dims:
        call = OpCall(spec=spec, inputs=binding.singles, params=binding.params,
                      lists=binding.lists, out_ports=wired,
                      outputs={**binding.out_views,
                               **{k: PortView(v, None) for k, v in out_dims.items()}})
    if spec.check is not None:
        spec.check(call)
    for out in present:
        if out.name in out_dims:
            check_output_dims(spec, out, call, out_dims[out.name], "out_dims")
    return _commit(graph, spec, name, cdt, binding, call, present, out_dims)


def check_output_dims(spec: OpSpec, out: OutputSpec, call: OpCall, dims: Sequence[int],
                      argument: str) -> None:
    """Caller-set dims of an inferred output must be the ones the op produces (unless
    its OutputSpec says the inferred dims are only a proposal: `free_dims`)."""
    if out.infer is None or out.free_dims:
        return
    inferred = out.infer(call)
    if inferred is None:
        return
    inferred = tuple(int(n) for n in inferred)
    if inferred != tuple(dims):
        raise OpValueError(spec.name, argument,
                           f"dims {list(inferred)} for output '{out.name}' (what "
                           f"{spec.name} produces from its inputs)", f"dims {list(dims)}")


# -- phase 1: binding ----------------------------------------------------------------
def _bind(graph: pygraph, spec: OpSpec, args: Mapping[str, Any]) -> _Binding:
    b = _Binding({}, {}, {}, {}, {}, {})
    op = spec.name
    for port in spec.ports:
        value = args.get(port.name)
        if value is None:
            if port.required:
                raise OpTypeError(op, port.name, f"{_TENSOR_EXPECTED} (required)", "None")
            continue
        if port.kind is PortKind.TENSOR_LIST:
            _bind_list(graph, spec, port, value, b)
        elif port.kind is PortKind.MIXED_TUPLE:
            _bind_tuple(graph, spec, port, value, b)
        elif port.kind is PortKind.TENSOR_OR_SCALAR and not _is_tensor_like(value):
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise OpTypeError(op, port.name, f"a float or {_TENSOR_EXPECTED}", show(value))
            b.params[port.name] = float(value)
        elif port.direction is Direction.OUT:
            bound = _bind_tensor(graph, spec, port, port.name, value)
            _check_out_port(graph, spec, port.name, bound, b)
            b.outputs[port.name] = bound
            if isinstance(bound, Tensor) and bound.dim_assigned:
                b.out_views[port.name] = view_of(bound)
        else:
            bound = _bind_tensor(graph, spec, port, port.name, value)
            b.inputs[port.name] = bound
            b.singles[port.name] = _view(bound)
    for attr in spec.attrs:
        value = args.get(attr.name)
        if value is None:
            if attr.required:
                raise OpTypeError(op, attr.name, f"a {attr.kind.value} (required)", "None")
            continue
        b.params[attr.name] = attr.normalize(op, value)
    return b


def _is_tensor_like(value: Any) -> bool:
    return isinstance(value, Tensor) or is_framework_array(value)


def _bind_tensor(graph: pygraph, spec: OpSpec, port: PortSpec, key: str, value: Any) -> _Bound:
    op = spec.name
    if isinstance(value, Tensor):
        if value.owner is not graph:
            where = "a standalone tensor" if value.owner is None else "a tensor of another graph"
            raise OpValueError(op, key, "a tensor of this graph", f"{where} '{value.name}'")
        bound: _Bound = value
    elif is_framework_array(value):
        try:
            bound = _Pending(value, describe(value))
        except TypeError as exc:
            raise OpTypeError(op, key, _TENSOR_EXPECTED + " with a shape and a known dtype",
                              f"{type(value).__name__} ({exc})") from None
    else:
        raise OpTypeError(op, key, _TENSOR_EXPECTED, show(value))
    check_port_view(op, port, key, _view(bound))
    return bound


def check_port_view(op: str, port: PortSpec, key: str, view: PortView) -> None:
    """The port's rank and dtype rules, on whatever of them is known."""
    mismatch = port.rank_mismatch(view) or port.dtype_mismatch(view)
    if mismatch is not None:
        raise OpValueError(op, key, *mismatch)


def _view(bound: _Bound) -> PortView:
    if isinstance(bound, Tensor):
        return view_of(bound)
    return PortView(bound.description.dims, bound.description.data_type)


def _bind_list(graph: pygraph, spec: OpSpec, port: PortSpec, value: Any, b: _Binding) -> None:
    if isinstance(value, Tensor) or not isinstance(value, (list, tuple)):
        raise OpTypeError(spec.name, port.name, f"a list of {_TENSOR_EXPECTED}", show(value))
    if port.required and not value:
        raise OpValueError(spec.name, port.name, "a non-empty list of tensors", "[]")
    views = []
    for i, item in enumerate(value):
        key = list_port_key(port.name, i)
        bound = _bind_tensor(graph, spec, port, key, item)
        b.inputs[key] = bound
        views.append(_view(bound))
    if value:
        b.lists[port.name] = tuple(views)


def _bind_tuple(graph: pygraph, spec: OpSpec, port: PortSpec, value: Any, b: _Binding) -> None:
    if not isinstance(value, (list, tuple)):
        raise OpTypeError(spec.name, port.name, "a tuple of tensors and numbers", show(value))
    scalars: list[Any] = []
    for i, item in enumerate(value):
        key = list_port_key(port.name, i)
        if _is_tensor_like(item):
            b.inputs[key] = _bind_tensor(graph, spec, port, key, item)
            scalars.append(None)
        elif isinstance(item, numbers.Real):
            scalars.append(item)
        else:
            raise OpTypeError(spec.name, key, "a tensor or a number", show(item))
    b.params[port.name] = tuple(scalars)


def _check_out_port(graph: pygraph, spec: OpSpec, key: str, bound: _Bound, b: _Binding) -> None:
    if not isinstance(bound, Tensor):
        return
    producer = graph._producer_of(bound)
    if producer is not None:
        raise OpValueError(spec.name, key, "a tensor no other node writes",
                           f"tensor '{bound.name}' written by node '{producer.name}'")
    reader = graph._first_reader_of(bound)
    if reader is not None or any(t is bound for t in b.inputs.values()):
        who = "this node" if reader is None else f"node '{reader.name}'"
        raise OpValueError(spec.name, key, "a tensor not read before this node writes it",
                           f"tensor '{bound.name}' read by {who}")
    if any(t is bound for t in b.outputs.values()):
        raise OpValueError(spec.name, key, "a tensor wired to one output port",
                           f"tensor '{bound.name}' given twice")


def _unexpected_keyword(spec: OpSpec, unexpected: Mapping[str, Any]) -> OpTypeError:
    key, value = next(iter(unexpected.items()))
    close = difflib.get_close_matches(key, spec.call.names, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return OpTypeError(spec.name, key,
                       f"one of the keyword arguments {list(spec.call.names)}{hint}",
                       f"unexpected keyword {key}={show(value)}")


def _normalize_out_dims(spec: OpSpec, value: Any,
                        present: Sequence[OutputSpec]) -> dict[str, tuple[int, ...]]:
    if value is None:
        return {}
    op = spec.name
    if isinstance(value, Mapping):
        items = dict(value)
    elif isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        items = {spec.outputs[0].name: value}
    else:
        raise OpTypeError(op, "out_dims", "a dims list or a {output port: dims} dict",
                          show(value))
    present_names = {o.name for o in present}
    out = {}
    for port, dims in items.items():
        if port not in spec.output_names:
            raise OpValueError(op, "out_dims", f"keys among the outputs {list(spec.output_names)}",
                               repr(port))
        if port not in present_names:
            raise OpValueError(op, "out_dims", "dims for an output this call produces",
                               f"dims for absent output '{port}'")
        out[port] = normalize_dims(dims, op, "out_dims")
    return out


# -- phase 2: commit -----------------------------------------------------------------
def _commit(graph: pygraph, spec: OpSpec, name: str, cdt: Any, b: _Binding, call: OpCall,
            present: Sequence[OutputSpec], out_dims: Mapping[str, tuple[int, ...]]) -> Any:
    # everything that reads caller values (inference, dtypes) runs before the first
    # change, so a rule that raises leaves the graph untouched
    layouts = {}
    for out in present:
        if out.name in out_dims:
            layouts[out.name] = (out_dims[out.name], True)
        elif out.infer is not None:
            inferred = out.infer(call)
            if inferred is not None:
                layouts[out.name] = (normalize_dims(tuple(inferred), spec.name,
                                                    f"dims of output '{out.name}'"), False)
    dtypes = {out.name: call.dtype(out.dtype_like) for out in present
              if out.dtype_like is not None and call.dtype(out.dtype_like) is not None}
    graph._before_mutation(f"add a '{spec.name}' node")
    with graph._all_or_nothing():
        return _add_node(graph, spec, name, cdt, b, present, layouts, dtypes)


def _add_node(graph: pygraph, spec: OpSpec, name: str, cdt: Any, b: _Binding,
              present: Sequence[OutputSpec],
              layouts: Mapping[str, tuple[tuple[int, ...], bool]],
              dtypes: Mapping[str, Any]) -> Any:
    node_name = graph._claim_node_name(spec.name, name)

    def realize(key: str, bound: _Bound) -> Tensor:
        if isinstance(bound, Tensor):
            return bound
        return graph._auto_describe(bound.value, bound.description, f"{node_name}::{key}")

    inputs = {key: realize(key, bound) for key, bound in b.inputs.items()}
    outputs = {key: realize(key, bound) for key, bound in b.outputs.items()}
    for out in present:
        tensor = graph._new_output(f"{node_name}::{out.tensor_suffix}")
        if out.name in layouts:
            dims, caller_set = layouts[out.name]
            if caller_set:
                tensor.set_dim(dims)
            else:
                tensor._provisional_dims(dims)
        if out.name in dtypes:
            tensor._provisional_dtype(dtypes[out.name])
        outputs[out.name] = tensor
    node = Node(node_name, spec, inputs, outputs, b.params,
                cdt if cdt is not None else graph.context.compute_data_type, owner=graph)
    graph._add_node(node)
    if spec.returns is ReturnStyle.SINGLE:
        return outputs[spec.outputs[0].name]
    return [outputs.get(o.name) for o in spec.outputs]
