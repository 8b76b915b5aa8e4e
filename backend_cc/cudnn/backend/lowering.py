"""DRAFT (issue 5 phase 2, written before the IR and router landed on main): lowering of a
validated IR `cudnn.pygraph` into the C++ `backend_graph` of cudnn._pybind_module.

One backend call per IR node, driven by the node's OpSpec: `spec.backend_method` names the
method, ports and attrs are passed by their (shared) names. Uids: every IR uid is pushed —
graph inputs through `tensor(uid=...)`, op outputs through `set_uid` — and `verify_uids`
checks afterwards that each backend tensor reports exactly its IR uid. The only uids the
lowering adds are those of the pass-by-value scalars it creates for Python numbers given to
tensor-or-scalar ports (sdpa `attn_scale`), drawn above every IR uid. Layouts: only
caller-set output dims/strides are pushed, except `push_output_dims` ops (dims) and the
sdpa family (dims and strides), per spec/op_surface.md section 0.

A node with no backend lowering (python-only ops such as GDN/KDA, python-only attributes)
raises cudnnGraphNotSupportedError before anything is built; so do the backend's own
declines, which the extension raises with the IR's exception class.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List

import cudnn
from cudnn.ops.op_spec import Direction, OpGroup, PortKind

FLOAT = cudnn.data_type.FLOAT


@dataclass
class LoweredGraph:
    backend: Any                      # the backend_graph
    tensors: Dict[Any, Any]           # IR Tensor -> backend tensor
    internal_uids: FrozenSet[int] = field(default_factory=frozenset)


def no_lowering_reasons(graph, ext) -> List[str]:
    """Why `graph` cannot be lowered at all (empty: try the backend)."""
    reasons = []
    for node in graph.nodes:
        spec = node.spec
        if spec.backend_method is None or spec.python_only:
            reasons.append(f"No valid engine configs for {node.node_type.name}: "
                           f"{spec.name} has no backend lowering")
        elif not hasattr(ext.backend_graph, spec.backend_method):
            reasons.append(f"No valid engine configs for {node.node_type.name}: this backend "
                           f"has no {spec.backend_method}() builder")
        else:
            reasons += node.python_only_reasons()
    return reasons


class _Lowering:
    def __init__(self, graph, ext, handle: int) -> None:
        ctx = graph.context
        self.graph = graph
        self.backend = ext.backend_graph(
            io_data_type=ctx.io_data_type, intermediate_data_type=ctx.intermediate_data_type,
            compute_data_type=ctx.compute_data_type, handle=handle, name=graph.name)
        self.tensors: Dict[Any, Any] = {}
        self.produced = {t for node in graph.nodes for t in node.outputs.values()}
        self.next_internal = 1 + max((t.uid for node in graph.nodes
                                      for t in (*node.inputs.values(), *node.outputs.values())),
                                     default=0)
        self.internal: List[int] = []

    def tensor(self, t):
        if t in self.tensors:
            return self.tensors[t]
        if t in self.produced:
            raise AssertionError(f"tensor '{t.name}' is used before the node producing it")
        offset = t._ragged_offset  # DRAFT: the IR has no public getter for it yet
        bt = self.backend.tensor(
            uid=t.uid, dim=list(t.dim), stride=list(t.stride), data_type=t.data_type,
            is_virtual=t.is_virtual, is_pass_by_value=t.is_pass_by_value,
            value=t.pass_by_value if isinstance(t.pass_by_value, numbers.Real) else None,
            ragged_offset=None if offset is None else self.tensor(offset),
            reordering_type=t.get_reordering_type(), name=t.name)
        self.tensors[t] = bt
        return bt

    def scalar(self, value: float, name: str):
        uid = self.next_internal
        self.next_internal += 1
        self.internal.append(uid)
        return self.backend.tensor_scalar(uid=uid, value=float(value), data_type=FLOAT, name=name)

    def argument(self, node, port):
        value = node.argument(port.name)
        if value is None:
            return None
        if port.kind is PortKind.TENSOR_LIST:
            return [self.tensor(v) for v in value]
        if port.kind is PortKind.MIXED_TUPLE:
            return value  # the extension declines any dropout tuple natively
        if port.kind is PortKind.TENSOR_OR_SCALAR and isinstance(value, numbers.Real):
            return self.scalar(value, f"{node.name}::{port.name}")
        return self.tensor(value)

    def node(self, node) -> None:
        spec = node.spec
        kwargs = {"name": node.name}
        for port in spec.ports:
            if port.to_backend and (port.direction is Direction.IN or node.argument(port.name) is not None):
                value = self.argument(node, port)
                if value is not None:
                    kwargs[port.name] = value
        for attr in spec.attrs:
            if attr.name in node.params:
                value = node.params[attr.name]
                kwargs[attr.name] = list(value) if isinstance(value, tuple) else value
        if not spec.no_cdt and node.compute_data_type is not None:
            kwargs["compute_data_type"] = node.compute_data_type
        outputs = getattr(self.backend, spec.backend_method)(**kwargs)
        if not isinstance(outputs, list):
            outputs = [outputs]
        sdpa = spec.group is OpGroup.SDPA
        for out_spec, bt in zip(spec.outputs, outputs):
            ir = node.outputs.get(out_spec.name)
            if (ir is None) != (bt is None):
                raise AssertionError(f"node '{node.name}': output {out_spec.name} present in "
                                     f"{'the backend' if ir is None else 'the IR'} only")
            if ir is None:
                continue
            bt.set_uid(ir.uid).set_output(not ir.is_virtual)
            if ir.data_type is not None:
                bt.set_data_type(ir.data_type)
            if ir.dim and (ir._dim_assigned or spec.push_output_dims or sdpa):
                bt.set_dim(list(ir.dim))
            if ir.stride and (ir._stride_assigned or sdpa):
                bt.set_stride(list(ir.stride))
            self.tensors[ir] = bt


def lower(graph, ext, *, handle: int = 0) -> LoweredGraph:
    reasons = no_lowering_reasons(graph, ext)
    if reasons:
        raise cudnn.cudnnGraphNotSupportedError("; ".join(reasons))
    lowering = _Lowering(graph, ext, handle)
    for node in graph.nodes:
        lowering.node(node)
    lowered = LoweredGraph(lowering.backend, lowering.tensors, frozenset(lowering.internal))
    lowered.backend.validate()
    verify_uids(lowered)
    return lowered


def verify_uids(lowered: LoweredGraph) -> None:
    """Every backend tensor reports exactly its IR uid; no uid appears that nobody pushed."""
    for ir, bt in lowered.tensors.items():
        if bt.get_uid() != ir.uid:
            raise AssertionError(f"tensor '{ir.name}': IR uid {ir.uid}, backend uid {bt.get_uid()}")
    pushed = {ir.uid for ir in lowered.tensors} | set(lowered.internal_uids)
    stray = set(lowered.backend.tensor_uids()) - pushed
    if stray:
        raise AssertionError(f"backend tensors with uids nobody pushed: {sorted(stray)}")
