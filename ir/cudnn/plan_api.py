"""Plan-list methods of `pygraph`, delegated to the router layer at call time.

Delegation contract (the router implements the other side in `cudnn.engines.graph_api`):

* For each method `M` below, `graph.M(*args, **kwargs)` returns
  `cudnn.engines.graph_api.M(graph, *args, **kwargs)`, with the same parameters as the
  pygraph method (the graph first). The `plans` and `selected_engine` properties call
  `graph_api.plans(graph)` / `graph_api.selected_engine(graph)`.
* The module is imported with importlib when a method is called, never when `cudnn` is
  imported; if the router layer is not installed the call raises ImportError saying so.
  A function missing from graph_api raises NotImplementedError naming it.
* The router drives the lifecycle and keeps its data on the graph through public seams:
  `graph.validate()`; `graph.lifecycle.state` (a GraphState: building / validated /
  frozen / planned / built); `graph.lifecycle.freeze()` (freezes every public mutation
  path), `.mark_planned()`, `.mark_built()`, `.unmark_built()`; and
  `graph.lifecycle.planning` (a PlanningData: router override, heuristics, plans,
  selected_index, pinned, compiled_plans, lowered, router_state).
"""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

ROUTER_API_MODULE = "cudnn.engines.graph_api"


def router_api() -> ModuleType:
    try:
        return importlib.import_module(ROUTER_API_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name is not None and ROUTER_API_MODULE.startswith(exc.name):
            raise ImportError(f"planning and execution need the router layer "
                              f"({ROUTER_API_MODULE}), which is not installed") from exc
        raise


def _call(graph: Any, method: str, *args: Any, **kwargs: Any) -> Any:
    fn = getattr(router_api(), method, None)
    if fn is None:
        raise NotImplementedError(f"{ROUTER_API_MODULE} does not implement {method}()")
    return fn(graph, *args, **kwargs)


class PlanListMixin:
    __slots__ = ()

    @property
    def plans(self) -> list[Any]:
        return _call(self, "plans")

    @property
    def selected_engine(self) -> Any:
        return _call(self, "selected_engine")

    def create_execution_plans(self, heuristics: Any = None) -> Any:
        return _call(self, "create_execution_plans", heuristics)

    def create_execution_plan(self, engine_id: int, knobs: Any = None) -> Any:
        return _call(self, "create_execution_plan", engine_id, knobs)

    def get_execution_plan_count(self) -> int:
        return _call(self, "get_execution_plan_count")

    def get_plan_name_at_index(self, index: int) -> str:
        return _call(self, "get_plan_name_at_index", index)

    def get_engine_and_knobs_at_index(self, index: int) -> Any:
        return _call(self, "get_engine_and_knobs_at_index", index)

    def select_plan(self, index: int) -> Any:
        return _call(self, "select_plan", index)

    def deselect_engines(self, names: Any) -> Any:
        return _call(self, "deselect_engines", names)

    def deselect_workspace_greater_than(self, limit: int) -> Any:
        return _call(self, "deselect_workspace_greater_than", limit)

    def select_behavior_notes(self, notes: Any) -> Any:
        return _call(self, "select_behavior_notes", notes)

    def deselect_behavior_notes(self, notes: Any) -> Any:
        return _call(self, "deselect_behavior_notes", notes)

    def select_numeric_notes(self, notes: Any) -> Any:
        return _call(self, "select_numeric_notes", notes)

    def deselect_numeric_notes(self, notes: Any) -> Any:
        return _call(self, "deselect_numeric_notes", notes)

    def get_behavior_notes(self) -> Any:
        return _call(self, "get_behavior_notes")

    def get_behavior_notes_for_plan_at_index(self, index: int) -> Any:
        return _call(self, "get_behavior_notes_for_plan_at_index", index)

    def build_operation_graph(self) -> Any:
        return _call(self, "build_operation_graph")

    def build_plans(self, *args: Any, ctx: Any = None, **kwargs: Any) -> Any:
        return _call(self, "build_plans", *args, ctx=ctx, **kwargs)

    def autotune(self, data: Any = None, workspace: Any = None, handle: Any = None,
                 **options: Any) -> Any:
        return _call(self, "autotune", data, workspace, handle, **options)

    def build_plan_at_index(self, index: int) -> Any:
        return _call(self, "build_plan_at_index", index)

    def check_support(self) -> Any:
        return _call(self, "check_support")

    def build(self, heuristics: Any = None, ctx: Any = None) -> Any:
        return _call(self, "build", heuristics, ctx)

    def get_workspace_size(self, handle: Any = None, override_uids: Any = None,
                           override_shapes: Any = None, override_strides: Any = None) -> int:
        return _call(self, "get_workspace_size", handle, override_uids, override_shapes,
                     override_strides)

    def get_workspace_size_plan_at_index(self, index: int, handle: Any = None,
                                         override_uids: Any = None, override_shapes: Any = None,
                                         override_strides: Any = None) -> int:
        return _call(self, "get_workspace_size_plan_at_index", index, handle, override_uids,
                     override_shapes, override_strides)

    def execute(self, tensor_dict: Any, workspace: Any = None, handle: Any = None,
                override_uids: Any = None, override_shapes: Any = None,
                override_strides: Any = None, tensor_uids: Any = None) -> None:
        return _call(self, "execute", tensor_dict, workspace, handle, override_uids,
                     override_shapes, override_strides, tensor_uids)

    def execute_plan_at_index(self, tensor_dict: Any, workspace: Any = None, index: int = 0,
                              handle: Any = None, *, tensor_uids: Any = None) -> None:
        return _call(self, "execute_plan_at_index", tensor_dict, workspace, index, handle,
                     tensor_uids=tensor_uids)

    def explain_plans(self, *args: Any, **kwargs: Any) -> Any:
        return _call(self, "explain_plans", *args, **kwargs)

    def backend_plan_entries(self) -> list[Any]:
        return _call(self, "backend_plan_entries")
