"""From one op call to a built single-node graph, and running it on torch buffers.

`build_graph(request)` declares the call's tensors (dims, strides, dtypes of the torch
tensors; outputs as the buffers the op allocated), adds the one node with the family's
pygraph builder, plans, pins `plan_name` when given, builds and reads the workspace size:
the graph API, end to end, with no engine named. When no engine can run the call, the
error lists why each engine declined, from `graph.explain_plans()`.

A `CachedGraph` is one entry of an op's graph cache: the built graph and everything
derived from it once, so it shares the entry's key and lifetime (it has no cache or
invalidation of its own). `run` allocates the call's results, binds them and the call's
tensors to the graph's tensors and executes on the current torch stream (the graph's
handle answers `get_stream()` with it) with a workspace from torch's caching allocator.
The first call runs `graph.execute` under the entry's lock (engines may compile lazily
there), then fixes, still under the lock: the selected plan bound for repeated
execution (router `bind_executor`), and, when the plan offers one for these buffers, its
direct launch (_launch_lane.py). Later calls take the direct launch when their buffers
are aligned as the first call's were, else the bound plan; they take no lock.

Plan choice: planning puts a recorded autotune winner first (router autotune cache); with
tuning opted in (`set_autotune`, `CUDNN_AUTOTUNE=1`) a graph without one is tuned at its
build on copies of the first call's tensors and the winner is recorded.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

import cudnn
from cudnn.engines.autotune import Autotune
from cudnn.engines.bound_executor import BoundExecutor, bind_executor
from cudnn.engines.planning_state import router_state
from cudnn.linear_attention.ops._launch_lane import LaunchLane, make_lane
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
    #: (argument position, graph input port, tensor) of every tensor argument given.
    inputs: Sequence[tuple[int, str, torch.Tensor]]
    attrs: Mapping[str, Any]
    #: every result the op returns, as allocated for this call.
    results: Sequence[torch.Tensor]
    #: (result position, graph output port) of the results the graph writes.
    outputs: Sequence[tuple[int, str]]
    plan_name: str | None
    device: torch.device
    #: result positions a caller may discard (see CachedGraph.droppable).
    droppable: tuple[int, ...] = ()
    #: (argument position, graph output port) of outputs written into an argument's
    #: tensor (overwrite_initial_state: final_state into the initial_state pool).
    aliases: Sequence[tuple[int, str]] = ()

    def describe(self) -> str:
        tensors = ", ".join(f"{port} {list(t.shape)} {str(t.dtype).removeprefix('torch.')}"
                            for _, port, t in self.inputs)
        return f"{tensors}; on {self.device}"


@dataclass
class CachedGraph:
    """A built graph and how one call's values bind to it (by argument position)."""
    graph: cudnn.pygraph
    #: (argument position, graph tensor) per bound input.
    inputs: tuple[tuple[int, cudnn.Tensor], ...]
    #: (result position, graph tensor) per output the graph writes.
    outputs: tuple[tuple[int, cudnn.Tensor], ...]
    #: (dims, dtype) of every result, allocated afresh (contiguous) on each call.
    results: tuple[tuple[tuple[int, ...], torch.dtype], ...]
    workspace_size: int
    #: the name of the plan that was built (for explanations and tests, never dispatch).
    plan: str
    device: torch.device
    #: results a caller may discard; the lane skips allocating those that are empty.
    droppable: tuple[int, ...] = ()
    #: (argument position, graph output tensor) of outputs written into an argument.
    aliased: tuple[tuple[int, cudnn.Tensor], ...] = ()
    #: the selected plan bound at the first call (router bound_executor), then used.
    executor: BoundExecutor | None = field(default=None, repr=False)
    #: the plan's direct launch bound to the op's positions (None: not offered).
    lane: LaunchLane | None = field(default=None, repr=False)
    #: calls that ran the bound plan (or the first execute) instead of the lane: a
    #: diagnostic for benches and tests (counted on that slower path only).
    checked_calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _input_uids: tuple[tuple[int, int], ...] = field(default=(), repr=False)
    _output_uids: tuple[tuple[int, int], ...] = field(default=(), repr=False)

    def run(self, values: Sequence[Any], drop_unused: bool = False
            ) -> tuple[torch.Tensor | None, ...]:
        """Allocate the results and execute the graph into them with the call's values,
        with the tensors' GPU current (engines launch on the current device). With
        `drop_unused`, the lane may return None for empty `droppable` results."""
        lane = self.lane
        if lane is not None:
            results = lane(values, drop_unused)
            if results is not None:
                return results
        device = self.device
        if device.type == "cuda" and torch.cuda.current_device() != device.index:
            with torch.cuda.device(device):
                return self._run(values)
        return self._run(values)

    def _run(self, values: Sequence[Any]) -> tuple[torch.Tensor, ...]:
        self.checked_calls += 1  # unlocked: a diagnostic count may miss a racing call
        device = self.device
        results = tuple(torch.empty(dims, dtype=dtype, device=device)
                        for dims, dtype in self.results)
        # plans that need no scratch (FROST) get none: one allocation less per call
        workspace = (torch.empty(self.workspace_size, dtype=torch.uint8, device=device)
                     if self.workspace_size else None)
        executor = self.executor
        if executor is not None:  # the cached path: uids bound once, no key resolution
            pack = {uid: values[position] for position, uid in self._input_uids}
            for position, uid in self._output_uids:
                pack[uid] = results[position]
            executor(pack, workspace)
            return results
        # The first call goes through graph.execute (lazy JIT happens there, once, under
        # the lock); it then binds the built plan and asks it, once, for a direct launch
        # of buffers laid out as these (the plan checks them for it).
        pack = {tensor: values[position] for position, tensor in (*self.inputs, *self.aliased)}
        for position, tensor in self.outputs:
            pack[tensor] = results[position]
        with self._lock:
            self.graph.execute(pack, workspace)
            if self.executor is None:
                self._input_uids = tuple((p, t.uid) for p, t in (*self.inputs, *self.aliased))
                self._output_uids = tuple((p, t.uid) for p, t in self.outputs)
                executor = bind_executor(self.graph)
                by_uid = {t.uid: buffer for t, buffer in pack.items()}
                self.lane = make_lane(device, self.results, self.droppable,
                                      self.workspace_size,
                                      executor.plan.direct_launch(self.graph, by_uid),
                                      self._input_uids, self._output_uids)
                self.executor = executor  # last: unlocked callers test it first
        return results


def build_graph(request: GraphRequest) -> CachedGraph:
    graph = cudnn.pygraph(name=request.op.replace("::", "."),
                          handle=TorchDeviceHandle(request.device))
    inputs = {port: (position, graph.tensor(dim=list(t.shape), stride=list(t.stride()),
                                            data_type=t.dtype, name=port))
              for position, port, t in request.inputs}
    request.builder(graph, **{port: t for port, (_, t) in inputs.items()}, **request.attrs,
                    name=request.op.split("::")[-1])
    node = graph.nodes[0]
    outputs = []
    for position, port in request.outputs:
        tensor = node.outputs.get(port)
        if tensor is None:
            raise RuntimeError(f"{request.op}: the graph node has no output '{port}' "
                               f"(its outputs: {sorted(node.outputs)})")
        buffer = request.results[position]
        tensor.set_dim(list(buffer.shape)).set_stride(list(buffer.stride()))
        tensor.set_data_type(buffer.dtype).set_output(True)
        outputs.append((position, tensor))
    given = {position: t for position, _, t in request.inputs}
    aliased = []
    for position, port in request.aliases:
        tensor, buffer = node.outputs[port], given[position]
        tensor.set_dim(list(buffer.shape)).set_stride(list(buffer.stride()))
        tensor.set_data_type(buffer.dtype).set_output(True)
        aliased.append((position, tensor))
    _plan(request, graph)
    if request.plan_name is not None:
        _pin(request, graph)
    _build(request, graph)
    selected = graph.lifecycle.planning.selected_index
    return CachedGraph(
        graph=graph, inputs=tuple(inputs.values()), outputs=tuple(outputs),
        results=tuple((tuple(r.shape), r.dtype) for r in request.results),
        workspace_size=int(graph.get_workspace_size()),
        plan=graph.get_plan_name_at_index(selected), device=request.device,
        droppable=request.droppable, aliased=tuple(aliased))


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


# -- autotuning (opt-in) -----------------------------------------------------------------
#: set_autotune(): None = the environment decides (CUDNN_AUTOTUNE=1), else a policy or off.
_AUTOTUNE: Autotune | bool | None = None


def set_autotune(policy: Autotune | bool | None) -> None:
    """Time every plan of a call signature's graph at its first call and keep the fastest
    (True, or an `Autotune` policy: warmup, reps, timer, cache); False: never; None: as
    `CUDNN_AUTOTUNE` says (off unless "1"). Either way a graph whose signature has a
    recorded winner (autotune cache) runs that winner without timing."""
    global _AUTOTUNE
    if policy is not None and not isinstance(policy, (bool, Autotune)):
        raise TypeError(f"set_autotune: expected a bool, an Autotune policy or None, got "
                        f"{type(policy).__name__}")
    _AUTOTUNE = policy


def autotune_policy() -> Autotune | None:
    """The policy first calls are tuned with, or None when tuning is off."""
    chosen = _AUTOTUNE
    if chosen is None:
        chosen = os.environ.get("CUDNN_AUTOTUNE", "").strip().lower() in ("1", "true", "on")
    if chosen is True:
        return Autotune()
    return chosen or None


def _build(request: GraphRequest, graph: cudnn.pygraph) -> None:
    try:
        policy = None if request.plan_name is not None else autotune_policy()
        if policy is not None and graph.get_execution_plan_count() > 1 \
                and router_state(graph).autotune is None:  # no recorded winner
            graph.autotune(_tuning_buffers(request, graph), policy=policy)
        else:
            graph.build_plans()
    except cudnnGraphNotSupportedError as exc:
        raise cudnnGraphNotSupportedError(no_engine_message(request, graph, exc)) from exc


def _tuning_buffers(request: GraphRequest, graph: cudnn.pygraph) -> dict:
    """Copies of the call's inputs (a plan timed many times may write its inputs, e.g. a
    state pool) and scratch results, keyed by graph tensor name (ports name them)."""
    def copy(t: torch.Tensor) -> torch.Tensor:
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype,
                                   device=t.device).copy_(t)
    data = {port: copy(t) for _, port, t in request.inputs}
    node = graph.nodes[0]
    for position, port in request.outputs:
        r = request.results[position]
        data[node.outputs[port]] = torch.empty_strided(r.shape, r.stride(), dtype=r.dtype,
                                                       device=r.device)
    port_at = {position: port for position, port, _ in request.inputs}
    for position, port in request.aliases:  # written into the copy of its argument
        data[node.outputs[port]] = data[port_at[position]]
    return data


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
