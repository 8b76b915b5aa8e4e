"""Joining a caller's variant pack (`{uid: buffer}`) with each node's wired ports.

`resolve_node_buffers(graph, data)` gives every node its `NodeBuffers`: `{port: buffer}`
for inputs and outputs. Rules, per wired port:
- a buffer bound to the tensor's uid is used (torch tensors that require grad are
  detached, once per uid per call: gradients are the job of backward nodes, and DLPack
  refuses to export such tensors);
- no buffer, virtual tensor: the port is left out (an engine-internal intermediate, or an
  optional output the caller did not ask for);
- no buffer, pass-by-value tensor with an embedded value (`tensor_scalar`): that value;
- no buffer otherwise: ValueError naming node, direction, port and tensor.
Buffers must export `__dlpack__` or `__cuda_array_interface__` (torch, numpy, cupy,
numba...), and must be what the graph declares for their tensor (`check_buffer`): the
same dims (the context's override dims for an overridden uid: [2, 4] is not [1, 2, 4],
engines read a buffer's own shape) and, when both are known,
the same dtype; a ValueError names node, port, tensor, what was declared and what came.
Pass-by-value tensors (host scalars) are exempt, and a buffer that reports no shape or
dtype is taken as it is. Strides, device and alignment are each engine's business
(engines_common's port checks for the GPU engines). No framework is imported here.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from cudnn.ops.data_types import to_data_type

if TYPE_CHECKING:
    from cudnn import Node, Tensor, pygraph


@dataclass(frozen=True)
class NodeBuffers:
    node_name: str
    inputs: Mapping[str, Any]
    outputs: Mapping[str, Any]

    def input(self, port: str) -> Any:
        """The buffer of input `port`; ValueError naming node and port when absent."""
        return _require(self.inputs, port, self.node_name, "input")

    def output(self, port: str) -> Any:
        """The buffer of output `port`; ValueError naming node and port when absent."""
        return _require(self.outputs, port, self.node_name, "output")


def is_buffer(value: Any) -> bool:
    return hasattr(value, "__dlpack__") or hasattr(value, "__cuda_array_interface__")


def resolve_node_buffers(graph: pygraph, data: Mapping[int, Any],
                         ctx: Any = None) -> dict[Node, NodeBuffers]:
    """{node: NodeBuffers} for every node of `graph`, from a `{uid: buffer}` pack; `ctx`
    (an ExecutionContext) gives the dims of uids overridden for this call."""
    detached: dict[int, Any] = {}
    overrides = _override_dims(ctx)
    out = {}
    for node in graph.nodes:
        ports = {}
        for direction, wired in (("input", node.inputs), ("output", node.outputs)):
            found = {}
            for port, tensor in wired.items():
                if tensor is None:
                    continue
                buf = _buffer_for(node, direction, port, tensor, data, detached, overrides)
                if buf is not _ABSENT:
                    found[port] = buf
            ports[direction] = MappingProxyType(found)
        out[node] = NodeBuffers(node.name, ports["input"], ports["output"])
    return out


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


_ABSENT = _Absent()


def _override_dims(ctx: Any) -> Mapping[int, tuple[int, ...]]:
    uids = getattr(ctx, "override_uids", None)
    shapes = getattr(ctx, "override_shapes", None)
    if not uids or shapes is None:
        return {}
    return {uid: tuple(dims) for uid, dims in zip(uids, shapes)}


def check_buffer(node: Node, direction: str, port: str, tensor: Tensor, buf: Any,
                 dims: tuple[int, ...] | None = None) -> None:
    """ValueError unless `buf` has the dims (`dims`, else the tensor's) and dtype the graph
    declares for `tensor`; checks only what the buffer reports."""
    where = (f"node '{node.name}': the buffer for {direction} port '{port}' (tensor "
             f"'{tensor.name}', uid {tensor.uid})")
    found = _shape_of(buf)
    declared = tuple(tensor.dim) if dims is None else dims
    if found is not None and declared and found != declared:
        raise ValueError(f"{where} has dims {list(found)}; the graph declares "
                         f"{list(declared)}")
    dtype = tensor.data_type
    if dtype is None:
        return
    raw = getattr(buf, "dtype", None)  # torch, numpy, cupy; a bare interface has none
    if raw is None:
        return
    try:
        got = to_data_type(raw)
    except TypeError:
        raise ValueError(f"{where} has dtype {raw}, which is no cudnn.data_type; the graph "
                         f"declares {dtype.name}") from None
    if got is not None and got is not dtype:
        raise ValueError(f"{where} has dtype {got.name}; the graph declares {dtype.name}")


def _shape_of(buf: Any) -> tuple[int, ...] | None:
    shape = getattr(buf, "shape", None)
    if shape is None:
        cai = getattr(buf, "__cuda_array_interface__", None)
        shape = cai.get("shape") if isinstance(cai, Mapping) else None
    if shape is None:
        return None
    try:
        return tuple(int(n) for n in shape)
    except (TypeError, ValueError):
        return None


def _buffer_for(node: Node, direction: str, port: str, tensor: Tensor,
                data: Mapping[int, Any], detached: dict[int, Any],
                overrides: Mapping[int, tuple[int, ...]]) -> Any:
    uid = tensor.uid
    if uid in detached:
        return detached[uid]
    buf = data.get(uid, _ABSENT)
    if buf is _ABSENT or buf is None:
        if tensor.is_pass_by_value and tensor.pass_by_value is not None:
            return tensor.pass_by_value
        if tensor.is_virtual:
            return _ABSENT
        raise ValueError(f"node '{node.name}': no buffer for {direction} port '{port}' "
                         f"(tensor '{tensor.name}', uid {uid})")
    if tensor.is_pass_by_value and not is_buffer(buf):
        detached[uid] = buf  # a host scalar given by value
        return buf
    if not is_buffer(buf):
        raise TypeError(f"node '{node.name}': the buffer for {direction} port '{port}' "
                        f"(tensor '{tensor.name}', uid {uid}) is a {type(buf).__name__}; "
                        "python engines take objects exporting __dlpack__ or "
                        "__cuda_array_interface__ (bare addresses are not accepted)")
    if not tensor.is_pass_by_value:
        check_buffer(node, direction, port, tensor, buf, overrides.get(uid))
    if getattr(buf, "requires_grad", False) and callable(getattr(buf, "detach", None)):
        buf = buf.detach()
    detached[uid] = buf
    return buf


def _require(ports: Mapping[str, Any], port: str, node_name: str, direction: str) -> Any:
    try:
        return ports[port]
    except KeyError:
        raise ValueError(f"node '{node_name}': no buffer bound for {direction} port "
                         f"'{port}' (bound: {sorted(ports) or 'none'})") from None
