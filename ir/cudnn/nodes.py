"""`Node`: one op of a graph, read-only for callers.

`inputs` / `outputs` map port names to Tensors (wired ports only; list ports appear as
`<port>_<i>`), `params` maps attr names to the values that were passed (lists stored as
tuples). All three are read-only mappings from the start: the only way to change a graph
is through its builders and tensor setters. `spec` is the node's OpSpec.
"""
from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from cudnn.graph_types import Tensor
from cudnn.ops.data_types import data_type
from cudnn.ops.node_type import NodeType
from cudnn.ops.op_spec import Direction, OpCall, OpSpec, PortKind, PortView, list_port_key

if TYPE_CHECKING:
    from cudnn._pygraph import pygraph


class _NodeSlots:
    """A Node's storage; `_NewNode` is one under construction (see graph_types._TensorSlots)."""
    __slots__ = ("_name", "_spec", "_inputs", "_outputs", "_params", "_compute_data_type",
                 "_owner", "__weakref__")


class _NewNode(_NodeSlots):
    __slots__ = ()


class Node(_NodeSlots):
    __slots__ = ()

    @classmethod
    def _adopt(cls, name: str, spec: OpSpec, inputs: dict[str, Tensor],
               outputs: dict[str, Tensor], params: dict[str, Any],
               compute_data_type: data_type | None, owner: pygraph) -> Node:
        """`Node(...)` for dicts the caller hands over (not copied: nothing else may keep
        them), in one step: the graph's builders make one per node."""
        n = _NewNode()
        n._name = name
        n._spec = spec
        n._inputs = MappingProxyType(inputs)
        n._outputs = MappingProxyType(outputs)
        n._params = MappingProxyType(params)
        n._compute_data_type = compute_data_type
        n._owner = weakref.ref(owner)
        n.__class__ = cls
        return n  # type: ignore[return-value]

    def __init__(self, name: str, spec: OpSpec, inputs: dict[str, Tensor],
                 outputs: dict[str, Tensor], params: dict[str, Any],
                 compute_data_type: data_type | None, owner: pygraph | None = None) -> None:
        init = object.__setattr__
        init(self, "_name", name)
        init(self, "_spec", spec)
        init(self, "_inputs", MappingProxyType(dict(inputs)))
        init(self, "_outputs", MappingProxyType(dict(outputs)))
        init(self, "_params", MappingProxyType(dict(params)))
        init(self, "_compute_data_type", compute_data_type)
        init(self, "_owner", None if owner is None else weakref.ref(owner))

    def __setattr__(self, name: str, value: Any) -> None:
        graph = None if self._owner is None else self._owner()
        if graph is not None:
            # raises GraphFrozenError when frozen (the freeze contract's message)
            graph._before_mutation(f"set '{name}' on node '{self._name}'")
        raise AttributeError(f"Node '{self._name}' is read-only: '{name}' cannot be set "
                             "(nodes change only through the graph's builders)")

    @property
    def name(self) -> str:
        return self._name

    @property
    def spec(self) -> OpSpec:
        return self._spec

    @property
    def node_type(self) -> NodeType:
        return self._spec.node_type

    @property
    def inputs(self) -> Mapping[str, Tensor]:
        return self._inputs

    @property
    def outputs(self) -> Mapping[str, Tensor]:
        return self._outputs

    @property
    def params(self) -> Mapping[str, Any]:
        return self._params

    @property
    def compute_data_type(self) -> data_type | None:
        return self._compute_data_type

    # -- helpers for lowering and engines -----------------------------------------
    def list_input(self, port: str) -> list[Tensor]:
        """The tensors of a TENSOR_LIST port, in order ([] when absent)."""
        return list_tensors(self._inputs, port)

    def tuple_input(self, port: str) -> tuple[Any, ...] | None:
        """A MIXED_TUPLE port (sdpa dropout) rebuilt from its tensors and scalars."""
        scalars = self._params.get(port)
        if scalars is None:
            return None
        return tuple(self._inputs[list_port_key(port, i)] if v is None else v
                     for i, v in enumerate(scalars))

    def argument(self, name: str) -> Any:
        """What the caller passed for port or attr `name` (None when absent).

        Tensor ports give their Tensor (out-direction ports too), list ports a list,
        tuple ports the rebuilt tuple, tensor-or-scalar ports whichever was passed, attrs
        their stored value. Lowering can walk `spec.call.names` with this alone.
        """
        for port in self._spec.ports:
            if port.name != name:
                continue
            if port.kind is PortKind.TENSOR_LIST:
                return self.list_input(name) or None
            if port.kind is PortKind.MIXED_TUPLE:
                return self.tuple_input(name)
            source = self._outputs if port.direction is Direction.OUT else self._inputs
            return source.get(name, self._params.get(name))
        self._spec.attr(name)  # KeyError for a name the op does not have
        return self._params.get(name)

    def param(self, attr: str) -> Any:
        """The passed value of `attr`, else its effective default from the OpSpec."""
        if attr in self._params:
            return self._params[attr]
        return self._spec.attr(attr).default

    def input_tensors(self) -> Iterator[Tensor]:
        return iter(self._inputs.values())

    def output_tensors(self) -> Iterator[Tensor]:
        return iter(self._outputs.values())

    def op_call(self) -> OpCall:
        """The OpCall view of this node's current arguments (for OpSpec rules)."""
        return make_op_call(self._spec, self._inputs, self._outputs, self._params)

    def python_only_reasons(self) -> list[str]:
        """Why this node can only run on python engines (empty: the backend may lower it)."""
        spec = self._spec
        if spec.python_only:
            return [f"{spec.name} has no backend lowering"]
        reasons = [f"attr '{a.name}' is python-only" for a in spec.attrs
                   if a.name in self._params and a.makes_python_only(self._params[a.name])]
        reasons += [f"port '{p.name}' is python-only" for p in spec.ports
                    if p.python_only and (p.name in self._inputs or p.name in self._outputs)]
        return [f"node '{self._name}': {r}" for r in reasons]

    def validate(self) -> None:
        """Check this node's shapes against its OpSpec (ValueError naming op and port)."""
        if self._spec.check is not None:
            self._spec.check(self.op_call())

    def __repr__(self) -> str:
        return f"Node(name={self._name!r}, op={self._spec.name!r}, type={self.node_type.name})"


def list_tensors(inputs: Mapping[str, Tensor], port: str) -> list[Tensor]:
    out = []
    while list_port_key(port, len(out)) in inputs:
        out.append(inputs[list_port_key(port, len(out))])
    return out


def view_of(tensor: Tensor) -> PortView:
    return PortView(tuple(tensor._dim), tensor._data_type)


def make_op_call(spec: OpSpec, inputs: Mapping[str, Tensor], outputs: Mapping[str, Tensor],
                 params: Mapping[str, Any]) -> OpCall:
    singles: dict[str, PortView] = {}
    lists: dict[str, tuple[PortView, ...]] = {}
    out_ports = []
    for port in spec.ports:
        if port.direction is Direction.OUT:
            if port.name in outputs:
                out_ports.append(port.name)
            continue
        if port.kind is PortKind.TENSOR_LIST:
            tensors = list_tensors(inputs, port.name)
            if tensors:
                lists[port.name] = tuple(view_of(t) for t in tensors)
        elif port.name in inputs:
            singles[port.name] = view_of(inputs[port.name])
    assigned = {name: view_of(t) for name, t in outputs.items() if t.dim_assigned}
    return OpCall(spec=spec, inputs=singles, params=params, lists=lists, outputs=assigned,
                  out_ports=frozenset(out_ports))
