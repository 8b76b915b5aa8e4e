"""`node_violations(node)`: every way one finished node breaks its OpSpec.

The builders refuse each of these while they build a node; a node can still be
assembled directly (`cudnn.Node(...)`), and tensors can be edited after the builder
call. Whoever must trust a node without validating its whole graph (the facts record the
linear-attention engines gate on) asks here. The rules are the OpSpec's own: ports
(known, required, rank, dtype), attributes (known, value), outputs (known, present
exactly when their condition holds), then the op's check and its support rules, which
run only on a node whose ports and attributes are well formed (they index dims freely).
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from cudnn.nodes import view_of
from cudnn.ops.errors import OpArgumentError
from cudnn.ops.op_spec import Direction, OpSpec, OutputSpec, PortKind

if TYPE_CHECKING:
    from cudnn.nodes import Node


def node_violations(node: Node) -> list[str]:
    """Readable reasons, empty when the node conforms to its OpSpec."""
    reasons = list(_structure(node))
    if reasons:
        return reasons
    call = node.op_call()
    if node.spec.check is not None:
        try:
            node.spec.check(call)
        except OpArgumentError as exc:
            reasons.append(str(exc))
    return reasons + node.spec.support_reasons(call)


def _structure(node: Node) -> Iterator[str]:
    spec = node.spec
    yield from _inputs(node, spec)
    attrs = {a.name: a for a in spec.attrs}
    scalar_ports = {p.name for p in spec.ports
                    if p.kind in (PortKind.TENSOR_OR_SCALAR, PortKind.MIXED_TUPLE)}
    for name, value in node.params.items():
        if name in scalar_ports:
            continue
        if name not in attrs:
            yield f"attribute '{name}' is not an attribute of {spec.name}"
            continue
        try:
            attrs[name].normalize(spec.name, value)
        except OpArgumentError as exc:
            yield str(exc)
    yield from _outputs(node, spec)


def _inputs(node: Node, spec: OpSpec) -> Iterator[str]:
    keys = set(node.inputs)
    for port in spec.input_ports:
        if port.kind in (PortKind.TENSOR_LIST, PortKind.MIXED_TUPLE):
            mine = {k for k in keys if k.startswith(port.name + "_")}
        else:
            mine = {port.name} & keys
        keys -= mine
        if port.required and not mine and port.name not in node.params:
            yield f"required input '{port.name}' is not wired"
        for key in sorted(mine):
            view = view_of(node.inputs[key])
            mismatch = port.rank_mismatch(view) or port.dtype_mismatch(view)
            if mismatch is not None:
                yield f"input '{key}': expected {mismatch[0]}; got {mismatch[1]}"
    for key in sorted(keys):
        yield f"input '{key}' is not a port of {spec.name}"


def _outputs(node: Node, spec: OpSpec) -> Iterator[str]:
    call = node.op_call()
    out_ports = {p.name for p in spec.ports if p.direction is Direction.OUT}
    declared = {o.name: o for o in spec.outputs}
    for name in sorted(set(node.outputs) - set(declared) - out_ports):
        yield f"output '{name}' is not an output of {spec.name}"
    for out in spec.outputs:
        wanted = out.present is None or out.present(call)
        if wanted and out.name not in node.outputs:
            yield f"output '{out.name}' is missing (present when {_condition(out)})"
        elif not wanted and out.name in node.outputs:
            yield f"output '{out.name}' is present although '{_condition(out)}' is false"


def _condition(out: OutputSpec) -> str:
    return "always" if out.present is None else out.present.text

