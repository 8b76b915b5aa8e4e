"""Read-only views of a graph: `inspect()` (a plain dict), a text dump and Graphviz DOT.

The text dump lists the graph context, then each node with its ports (port, tensor name,
uid, dims, strides, dtype; `~` marks inferred, provisional layouts), its params, and the
tensors the graph reads and writes. The DOT export draws nodes as boxes and tensors as
ellipses (dashed for virtual ones), edges in data-flow direction.
"""
from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

from cudnn.graph_types import Tensor

if TYPE_CHECKING:
    from cudnn._pygraph import pygraph


def _dtype(tensor: Tensor) -> str:
    return "unset" if tensor.data_type is None else tensor.data_type.name


def _value(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, tuple):
        return [_value(v) for v in value]
    if isinstance(value, slice):
        return f"slice({value.start}, {value.stop}, {value.step})"
    if callable(value):
        return f"<callable {getattr(value, '__name__', type(value).__name__)}>"
    return value


def tensor_record(tensor: Tensor) -> dict[str, Any]:
    return {
        "name": tensor.name, "uid": tensor.uid, "uid_assigned": tensor.uid_assigned,
        "dim": list(tensor.dim), "stride": list(tensor.stride), "data_type": _dtype(tensor),
        "is_virtual": tensor.is_virtual, "is_pass_by_value": tensor.is_pass_by_value,
        "dim_assigned": tensor.dim_assigned, "stride_assigned": tensor.stride_assigned,
        "ragged_offset": None if tensor.ragged_offset is None else tensor.ragged_offset.uid,
    }


def inspect_graph(graph: pygraph) -> dict[str, Any]:
    ctx = graph.context
    return {
        "name": graph.name,
        "state": graph.lifecycle.state.name,
        "context": {"io_data_type": _name(ctx.io_data_type),
                    "intermediate_data_type": _name(ctx.intermediate_data_type),
                    "compute_data_type": _name(ctx.compute_data_type)},
        "nodes": [{
            "name": node.name, "op": node.spec.name, "type": node.node_type.name,
            "compute_data_type": _name(node.compute_data_type),
            "inputs": {port: t.uid for port, t in node.inputs.items()},
            "outputs": {port: t.uid for port, t in node.outputs.items()},
            "params": {k: _value(v) for k, v in node.params.items()},
        } for node in graph.nodes],
        "tensors": [tensor_record(t) for t in graph.all_tensors()],
    }


def _name(value: Any) -> str | None:
    return None if value is None else value.name


def _layout(values: Any, assigned: bool) -> str:
    return ("" if assigned else "~") + str(list(values))


def _port_line(arrow: str, port: str, tensor: Tensor) -> str:
    flags = []
    if tensor.is_virtual:
        flags.append("virtual")
    if tensor.is_pass_by_value:
        flags.append("by-value")
    if tensor.ragged_offset is not None:
        flags.append(f"ragged_offset=uid {tensor.ragged_offset.uid}"
                     f" x{tensor.ragged_offset_multiplier}")
    return (f"    {arrow} {port:<18} {tensor.name:<24} uid={tensor.uid:<4} "
            f"dim={_layout(tensor.dim, tensor.dim_assigned)} "
            f"stride={_layout(tensor.stride, tensor.stride_assigned)} {_dtype(tensor)}"
            + (f"  [{', '.join(flags)}]" if flags else ""))


def dump_graph(graph: pygraph) -> str:
    ctx = graph.context
    lines = [f"pygraph '{graph.name}' [{graph.lifecycle.state.name}] "
             f"io={_name(ctx.io_data_type)} intermediate={_name(ctx.intermediate_data_type)} "
             f"compute={_name(ctx.compute_data_type)}"]
    for node in graph.nodes:
        lines.append(f"  node {node.name}: {node.spec.name} ({node.node_type.name}, "
                     f"compute={_name(node.compute_data_type)})")
        lines += [_port_line("<-", port, t) for port, t in node.inputs.items()]
        lines += [_port_line("->", port, t) for port, t in node.outputs.items()]
        if node.params:
            shown = ", ".join(f"{k}={_value(v)}" for k, v in node.params.items())
            lines.append(f"    params: {shown}")
    reads = ", ".join(f"{t.name}(uid {t.uid})" for t in graph.get_inputs())
    writes = ", ".join(f"{t.name}(uid {t.uid})" for t in graph.get_outputs())
    lines.append(f"  graph inputs: {reads or '-'}")
    lines.append(f"  graph outputs: {writes or '-'}")
    return "\n".join(lines)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def graph_to_dot(graph: pygraph) -> str:
    lines = [f"digraph {_quote(graph.name)} {{", "  rankdir=LR;"]
    tensors: dict[int, Tensor] = {}
    for node in graph.nodes:
        for t in (*node.inputs.values(), *node.outputs.values()):
            tensors[t.uid] = t
    for uid, t in tensors.items():
        style = ', style="dashed"' if t.is_virtual else ""
        label = f"{t.name}\\nuid {uid} {list(t.dim)} {_dtype(t)}"
        lines.append(f'  t{uid} [shape=ellipse, label="{_escape(label)}"{style}];')
    for i, node in enumerate(graph.nodes):
        label = f"{node.name}\\n{node.spec.name}"
        lines.append(f'  n{i} [shape=box, label="{_escape(label)}"];')
        lines += [f"  t{t.uid} -> n{i} [label={_quote(port)}];" for port, t in node.inputs.items()]
        lines += [f"  n{i} -> t{t.uid} [label={_quote(port)}];"
                  for port, t in node.outputs.items()]
    lines.append("}")
    return "\n".join(lines)


def _escape(text: str) -> str:
    # keep the \n line breaks of labels; escape quotes only
    return text.replace('"', '\\"')
