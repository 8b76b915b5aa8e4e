"""The router's side of the IR seam: `graph.M(*args)` calls `graph_api.M(graph, *args)`.

(`cudnn.plan_api` in ir/ imports this module when a plan-list method is first called.)
Lifecycle: planning is one-shot and freezes the graph; `select_plan(i)` pins an index
(its decline is then an error); `build_plans()` walks from the selected index;
`execute()` builds on demand and runs the selected plan. A plan executes on exactly one
side, chosen by its engine id: python plans through their CompiledPlan, never touching
the backend; backend plans through the adapter's compiled plan. Planning, building and
compiling hold the graph's planning lock (`graph.lifecycle.planning.lock`), so threads
sharing one graph plan it and build each plan once; executes run outside it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cudnn.engines import manifest, plan_filters
from cudnn.engines.autotune import Autotune, AutotuneReport
from cudnn.engines.autotune import autotune as run_autotune
from cudnn.engines.backend_source import backend_adapter, backend_answer
from cudnn.engines.base import DECLINE_TYPES, BaseEngine, ExecutionContext, PlanConfig
from cudnn.engines.explain import PlanExplanation, explain
from cudnn.engines.plan_filters import check_workspace_limit, require_not_barred
from cudnn.engines.plan_list import (checked_index, compiled_plan, plan_at, plan_name_at,
                                     require_planned, source_at, workspace_size_of)
from cudnn.engines.plan_sources import BackendSource
from cudnn.engines.plan_walk import parse_policy, walk
from cudnn.engines.planning import append_plan, plan_graph
from cudnn.engines.variant_pack import check_workspace, make_context, normalize_variant_pack

if TYPE_CHECKING:
    from cudnn import pygraph


# -- planning ---------------------------------------------------------------------------
def create_execution_plans(graph: pygraph, heuristics: Any = None) -> None:
    plan_graph(graph, heuristics)


def create_execution_plan(graph: pygraph, engine_id: int, knobs: Any = None) -> None:
    append_plan(graph, engine_id, knobs)


def plans(graph: pygraph) -> list[PlanConfig]:
    return list(graph.lifecycle.planning.plans) if graph.lifecycle.state.planned else []


def get_execution_plan_count(graph: pygraph) -> int:
    return len(plans(graph))


def get_plan_name_at_index(graph: pygraph, index: int) -> str:
    return plan_name_at(graph, checked_index(graph, index, "get_plan_name_at_index"))


def get_engine_and_knobs_at_index(graph: pygraph, index: int) -> tuple[int, dict[Any, int]]:
    index = checked_index(graph, index, "get_engine_and_knobs_at_index")
    plan = plan_at(graph, index)
    return plan.engine_id, source_at(graph, index).public_knobs(graph, plan)


def selected_engine(graph: pygraph) -> Any:
    """The engine (or backend adapter) owning the selected plan; None before planning."""
    if not graph.lifecycle.state.planned:
        return None
    return source_at(graph, graph.lifecycle.planning.selected_index).owner


def select_plan(graph: pygraph, index: int) -> pygraph:
    index = checked_index(graph, index, "select_plan")
    planning = graph.lifecycle.planning
    planning.selected_index = index
    planning.pinned = True
    graph.lifecycle.unmark_built()
    return graph


# -- filters (plan_filters.py) ------------------------------------------------------------
def deselect_engines(graph: pygraph, names: Any) -> pygraph:
    return plan_filters.deselect_engines(graph, names)


def deselect_workspace_greater_than(graph: pygraph, limit: int) -> pygraph:
    return plan_filters.deselect_workspace_greater_than(graph, limit)


def _note_filter_api(kind: str, keep: bool, name: str) -> Any:
    def api(graph: pygraph, notes: Any) -> pygraph:
        return plan_filters.note_filter(graph, kind, notes, keep, name)
    api.__name__ = api.__qualname__ = name
    return api


select_behavior_notes = _note_filter_api(plan_filters.BEHAVIOR, True, "select_behavior_notes")
deselect_behavior_notes = _note_filter_api(plan_filters.BEHAVIOR, False,
                                           "deselect_behavior_notes")
select_numeric_notes = _note_filter_api(plan_filters.NUMERICAL, True, "select_numeric_notes")
deselect_numeric_notes = _note_filter_api(plan_filters.NUMERICAL, False,
                                          "deselect_numeric_notes")


def register_backend(graph: pygraph, engine: BaseEngine) -> pygraph:
    return manifest.register_backend(graph, engine)


def backends(graph: pygraph) -> list[BaseEngine]:
    return list(manifest.registered_backends(graph))


def backend_plan_entries(graph: pygraph) -> list[PlanConfig]:
    """The backend's entries for this graph, asked once ([] when it declines)."""
    graph.validate()
    if not graph.python_only_reasons():
        graph.lifecycle.freeze()  # the backend lowers the graph: no edits after this
    return backend_answer(graph).entries


def build_operation_graph(graph: pygraph) -> None:
    """Validate; lower to the backend now when the backend can take the graph."""
    graph.validate()
    if graph.python_only_reasons():
        return
    adapter, reason = backend_adapter()
    lower = getattr(adapter, "build_operation_graph", None)
    if reason is None and lower is not None:
        graph.lifecycle.freeze()
        lower(graph)


def explain_plans(graph: pygraph) -> PlanExplanation:
    return explain(graph)


# -- building ---------------------------------------------------------------------------
def _default_ctx(graph: pygraph, ctx: ExecutionContext | None) -> ExecutionContext:
    if ctx is None:
        return make_context(graph)
    if not isinstance(ctx, ExecutionContext):
        raise TypeError(f"ctx must be a cudnn.engines.base.ExecutionContext, got "
                        f"{type(ctx).__name__}")
    return ctx


def build_plans(graph: pygraph, *args: Any, ctx: ExecutionContext | None = None,
                **kwargs: Any) -> None:
    """Walk the list (build_plan_policy), or time every plan with an `Autotune` policy
    (then the buffers are generated: `autotune()` takes the caller's)."""
    tuning = [a for a in (*args, kwargs.get("policy")) if isinstance(a, Autotune)]
    if tuning:
        if len(args) + len(kwargs) != 1:
            raise TypeError("build_plans: an Autotune policy comes alone; pass buffers "
                            "and options to graph.autotune()")
        run_autotune(graph, tuning[0], ctx=None if ctx is None else _default_ctx(graph, ctx))
        return
    policy = parse_policy(args, dict(kwargs))
    with graph.lifecycle.planning.lock:
        if not graph.lifecycle.state.planned:
            plan_graph(graph)
        walk(graph, _default_ctx(graph, ctx), policy)


def autotune(graph: pygraph, data: Any = None, workspace: Any = None, handle: Any = None, *,
             tensor_uids: Any = None, policy: Autotune | None = None,
             **options: Any) -> AutotuneReport:
    """Time every plan that builds on `data` (a variant pack; missing buffers are
    generated), select the fastest, record it (autotune.py). `options` are Autotune
    fields (warmup, reps, timer, cache, device), or pass `policy=Autotune(...)`."""
    if policy is not None and options:
        raise TypeError("autotune: pass either policy= or Autotune fields, not both")
    if policy is not None and not isinstance(policy, Autotune):
        raise TypeError(f"autotune: policy must be a cudnn.engines.autotune.Autotune, got "
                        f"{type(policy).__name__}")
    policy = policy or Autotune(**options)
    return run_autotune(graph, policy, data=data, workspace=workspace,
                        ctx=make_context(graph, handle, workspace), tensor_uids=tensor_uids)


def build_plan_at_index(graph: pygraph, index: int) -> None:
    index = checked_index(graph, index, "build_plan_at_index")
    require_not_barred(graph, index, "build_plan_at_index")
    ctx = make_context(graph)
    check_workspace_limit(graph, index, workspace_size_of(compiled_plan(graph, index, ctx), ctx))
    graph.lifecycle.planning.selected_index = index
    graph.lifecycle.mark_built()


def check_support(graph: pygraph) -> None:
    """Re-affirm the selected entry. A backend decline is tolerated (the build walk can
    move on) unless the entry is pinned or nothing else is in the list."""
    if not graph.lifecycle.state.planned:
        plan_graph(graph)
    planning = graph.lifecycle.planning
    index = planning.selected_index
    source = source_at(graph, index)
    try:
        source.check_support(graph, plan_at(graph, index))
    except DECLINE_TYPES:
        if isinstance(source, BackendSource) and not planning.pinned \
                and len(planning.plans) > index + 1:
            return
        raise


def build(graph: pygraph, heuristics: Any = None, ctx: ExecutionContext | None = None) -> None:
    with graph.lifecycle.planning.lock:
        graph.validate()
        if not graph.lifecycle.state.planned:
            plan_graph(graph, heuristics)
        check_support(graph)
        build_plans(graph, ctx=ctx)


# -- workspace and execution ---------------------------------------------------------------
def get_workspace_size(graph: pygraph, handle: Any = None, override_uids: Any = None,
                       override_shapes: Any = None, override_strides: Any = None) -> int:
    if not graph.lifecycle.state.built:
        raise RuntimeError("get_workspace_size(): Call build() first (no plan is built yet)")
    ctx = make_context(graph, handle, None, override_uids, override_shapes, override_strides)
    return workspace_size_of(compiled_plan(graph, graph.lifecycle.planning.selected_index, ctx),
                             ctx)


def get_workspace_size_plan_at_index(graph: pygraph, index: int, handle: Any = None,
                                     override_uids: Any = None, override_shapes: Any = None,
                                     override_strides: Any = None) -> int:
    index = checked_index(graph, index, "get_workspace_size_plan_at_index")
    require_not_barred(graph, index, "get_workspace_size_plan_at_index")
    ctx = make_context(graph, handle, None, override_uids, override_shapes, override_strides)
    return workspace_size_of(compiled_plan(graph, index, ctx), ctx)


def execute(graph: pygraph, tensor_dict: Any, workspace: Any = None, handle: Any = None,
            override_uids: Any = None, override_shapes: Any = None,
            override_strides: Any = None, tensor_uids: Any = None) -> None:
    pack = normalize_variant_pack(graph, tensor_dict, tensor_uids)
    ctx = make_context(graph, handle, workspace, override_uids, override_shapes,
                       override_strides)
    if not graph.lifecycle.state.built:
        with graph.lifecycle.planning.lock:  # the first executes of threads sharing
            if not graph.lifecycle.state.built:  # a graph: one of them builds
                build(graph, ctx=ctx)
    _run(graph, graph.lifecycle.planning.selected_index, pack, ctx)


def execute_plan_at_index(graph: pygraph, tensor_dict: Any, workspace: Any = None,
                          index: int = 0, handle: Any = None, *,
                          tensor_uids: Any = None) -> None:
    index = checked_index(graph, index, "execute_plan_at_index")
    require_not_barred(graph, index, "execute_plan_at_index")
    pack = normalize_variant_pack(graph, tensor_dict, tensor_uids)
    _run(graph, index, pack, make_context(graph, handle, workspace))


def _run(graph: pygraph, index: int, pack: dict[int, Any], ctx: ExecutionContext) -> None:
    compiled = compiled_plan(graph, index, ctx)
    check_workspace(plan_name_at(graph, index), workspace_size_of(compiled, ctx), ctx.workspace)
    compiled.execute(graph, pack, ctx)


# -- behaviour notes ------------------------------------------------------------------------
def get_behavior_notes_for_plan_at_index(graph: pygraph, index: int) -> list[Any]:
    index = checked_index(graph, index, "get_behavior_notes_for_plan_at_index")
    return list(source_at(graph, index).behavior_notes(graph, plan_at(graph, index)))


def get_behavior_notes(graph: pygraph) -> list[Any]:
    require_planned(graph, "get_behavior_notes")
    return get_behavior_notes_for_plan_at_index(graph, graph.lifecycle.planning.selected_index)
