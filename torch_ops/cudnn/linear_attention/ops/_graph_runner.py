"""From one op call to a built single-node graph, and running it on torch buffers.

`build_graph(request)` declares the call's tensors (dims, strides, dtypes of the torch
tensors; outputs as the buffers the op allocated), adds the one node with the family's
pygraph builder, plans, pins `plan_name` when given, builds and reads the workspace size:
the graph API, end to end, with no engine named. When no engine can run the call, the
error lists why each engine declined, from `graph.explain_plans()`.

`CachedGraph.execute` binds the call's buffers by uid and runs on the current torch
stream (the graph's handle answers `get_stream()` with it) with a workspace from torch's
caching allocator. The first execute of a graph runs under its lock (engines may compile
lazily there); later executes take no lock.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

import cudnn
from cudnn.ops.errors import cudnnGraphNotSupportedError


class TorchDeviceHandle:
    """The handle the ops give their graphs: the device the call's tensors live on, and
    (through `get_stream()`, asked on every execute) torch's current stream there."""

    __slots__ = ("device",)

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def get_stream(self) -> torch.cuda.Stream | None:
        if self.device.type == "cuda":
            return torch.cuda.current_stream(self.device)
        return None

    def __repr__(self) -> str:
        return f"TorchDeviceHandle({self.device})"


@dataclass(frozen=True)
class GraphRequest:
    """What one op call asks for: enough to build its graph, and to say what it was."""
    op: str
    builder: Callable[..., Any]
    inputs: Mapping[str, torch.Tensor]
    attrs: Mapping[str, Any]
    #: (result index, graph output port, the buffer the op allocated for it).
    outputs: Sequence[tuple[int, str, torch.Tensor]]
    plan_name: str | None
    device: torch.device

    def describe(self) -> str:
        tensors = ", ".join(f"{port} {list(t.shape)} {str(t.dtype).removeprefix('torch.')}"
                            for port, t in self.inputs.items())
        return f"{tensors}; on {self.device}"


@dataclass
class CachedGraph:
    graph: cudnn.pygraph
    #: (graph input port, uid): the port is also the op argument's name.
    inputs: tuple[tuple[str, int], ...]
    #: (result index, uid).
    outputs: tuple[tuple[int, int], ...]
    workspace_size: int
    #: the name of the plan that was built (for explanations and tests, never dispatch).
    plan: str
    device: torch.device
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _ready: bool = field(default=False, repr=False)

    def execute(self, args: Mapping[str, Any], results: Sequence[torch.Tensor]) -> None:
        pack = {uid: args[port] for port, uid in self.inputs}
        for index, uid in self.outputs:
            pack[uid] = results[index]
        workspace = torch.empty(max(self.workspace_size, 1), dtype=torch.uint8,
                                device=self.device)
        if self._ready:
            self.graph.execute(pack, workspace)
            return
        with self._lock:
            self.graph.execute(pack, workspace)
            self._ready = True


def build_graph(request: GraphRequest) -> CachedGraph:
    graph = cudnn.pygraph(name=request.op.replace("::", "."),
                          handle=TorchDeviceHandle(request.device))
    inputs = {port: graph.tensor(dim=list(t.shape), stride=list(t.stride()),
                                 data_type=t.dtype, name=port)
              for port, t in request.inputs.items()}
    request.builder(graph, **inputs, **request.attrs, name=request.op.split("::")[-1])
    node = graph.nodes[0]
    outputs = []
    for index, port, buffer in request.outputs:
        tensor = node.outputs.get(port)
        if tensor is None:
            raise RuntimeError(f"{request.op}: the graph node has no output '{port}' "
                               f"(its outputs: {sorted(node.outputs)})")
        tensor.set_dim(list(buffer.shape)).set_stride(list(buffer.stride()))
        tensor.set_data_type(buffer.dtype).set_output(True)
        outputs.append((index, tensor.uid))
    _plan(request, graph)
    if request.plan_name is not None:
        _pin(request, graph)
    _build(request, graph)
    selected = graph.lifecycle.planning.selected_index
    return CachedGraph(graph=graph,
                       inputs=tuple((port, t.uid) for port, t in inputs.items()),
                       outputs=tuple(outputs), workspace_size=int(graph.get_workspace_size()),
                       plan=graph.get_plan_name_at_index(selected), device=request.device)


def _plan(request: GraphRequest, graph: cudnn.pygraph) -> None:
    try:
        graph.create_execution_plans()
    except cudnnGraphNotSupportedError as exc:
        raise cudnnGraphNotSupportedError(no_engine_message(request, graph, exc)) from exc


def _pin(request: GraphRequest, graph: cudnn.pygraph) -> None:
    wanted = request.plan_name
    names = [graph.get_plan_name_at_index(i) for i in range(graph.get_execution_plan_count())]
    for index, name in enumerate(names):
        if name == wanted or name.startswith(f"{wanted}["):
            graph.select_plan(index)
            graph.check_support()
            return
    raise cudnnGraphNotSupportedError(f"{request.op}: plan_name {wanted!r} matches none of "
                                      f"the plans offered for this call: {names}")


def _build(request: GraphRequest, graph: cudnn.pygraph) -> None:
    try:
        graph.build_plans()
    except cudnnGraphNotSupportedError as exc:
        raise cudnnGraphNotSupportedError(no_engine_message(request, graph, exc)) from exc


def no_engine_message(request: GraphRequest, graph: cudnn.pygraph,
                      exc: cudnnGraphNotSupportedError) -> str:
    """Why no engine runs this call: one line per engine, then the backend's answer."""
    lines = [f"{request.op}: no engine can run this call ({request.describe()}). "
             "Why each engine declined:"]
    explanation = graph.explain_plans()
    for row in explanation.engines:
        reason = f": {row.reason}" if row.reason else ""
        lines.append(f"  - {row.name} ({row.engine_id}): {row.status}{reason}")
    if not explanation.engines:  # refused before any engine was asked (validation)
        lines.append(f"  - the graph was refused before any engine was asked: {exc}")
    if explanation.backend is not None and explanation.backend.declined is not None:
        lines.append(f"  - cuDNN backend: declined: {explanation.backend.declined}")
    if graph.lifecycle.state.planned:  # planning found plans; none of them built
        lines.append(f"  building the planned engines failed: {exc}")
    return "\n".join(lines)
