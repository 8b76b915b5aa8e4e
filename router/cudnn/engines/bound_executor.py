"""A built graph's selected plan bound once, for callers that execute it many times.

`graph.execute(tensor_dict, workspace)` resolves the variant pack's keys, the context and
the compiled plan on every call; that is right for a user calling it by hand and costs
tens of microseconds a call. A framework adapter (the torch ops) that executes the same
graph with buffers it allocated itself can bind once instead: `bind_executor(graph)`
fixes the compiled plan, its workspace size and the handle, and each call takes a
variant pack already keyed by uid. The checks that depend on the call stay: the
workspace is large enough, and (where the buffer says) every uid the caller binds
belongs to the graph.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cudnn.engines.base import CompiledPlan, ExecutionContext
from cudnn.engines.plan_list import compiled_plan, plan_name_at, workspace_size_of
from cudnn.engines.variant_pack import check_workspace, resolve_stream

if TYPE_CHECKING:
    from cudnn import pygraph


class BoundExecutor:
    """Executes one built graph's selected plan; see the module docstring."""

    __slots__ = ("graph", "plan", "plan_name", "workspace_size", "uids", "_handle")

    def __init__(self, graph: pygraph, plan: CompiledPlan, plan_name: str,
                 workspace_size: int) -> None:
        self.graph = graph
        self.plan = plan
        self.plan_name = plan_name
        self.workspace_size = workspace_size
        self.uids = frozenset(t.uid for t in graph.all_tensors())
        self._handle = graph.handle

    def __call__(self, pack: Mapping[int, Any], workspace: Any) -> None:
        """Run the plan with `pack` ({uid: buffer}) and `workspace` (>= workspace_size
        bytes) on the stream the graph's handle names now."""
        check_workspace(self.plan_name, self.workspace_size, workspace)
        stray = pack.keys() - self.uids
        if stray:
            raise KeyError(f"{self.plan_name}: uids {sorted(stray)} are not tensors of graph "
                           f"'{self.graph.name}'")
        ctx = ExecutionContext(handle=self._handle, stream=resolve_stream(self._handle),
                               workspace=workspace)
        self.plan.execute(self.graph, pack, ctx)


def bind_executor(graph: pygraph) -> BoundExecutor:
    """The selected plan of a built graph, bound for repeated execution."""
    planning = graph.lifecycle.planning
    if not graph.lifecycle.state.built:
        raise RuntimeError(f"bind_executor: graph '{graph.name}' is not built yet (call "
                           "build_plans() or execute() once first)")
    index = planning.selected_index
    ctx = ExecutionContext(handle=graph.handle, stream=resolve_stream(graph.handle))
    plan = compiled_plan(graph, index, ctx)
    return BoundExecutor(graph, plan, plan_name_at(graph, index), workspace_size_of(plan, ctx))
