"""The stored plan list of a planned graph: index checks, naming and compiled plans.

The list lives in `graph.lifecycle.planning` (plans, selected_index, pinned,
compiled_plans). A compiled plan is built once per (graph, index), under the graph's
planning lock (threads sharing a graph build it once), and reused by every execute; a
second graph compiles its own. Indices are never wrapped: negative or
out-of-range indices raise IndexError.
"""
from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

from cudnn.engines.base import CompiledPlan, ExecutionContext, PlanConfig
from cudnn.engines.plan_sources import PlanSource, source_of

if TYPE_CHECKING:
    from cudnn import pygraph


def require_planned(graph: pygraph, what: str) -> None:
    if not graph.lifecycle.state.planned:
        raise RuntimeError(f"{what} needs a plan list: call create_execution_plans() first")


def checked_index(graph: pygraph, index: Any, what: str) -> int:
    require_planned(graph, what)
    if isinstance(index, bool) or not isinstance(index, numbers.Integral):
        raise TypeError(f"{what}: the plan index must be an int, got {type(index).__name__}")
    count = len(graph.lifecycle.planning.plans)
    if not 0 <= index < count:
        raise IndexError(f"{what}: plan index {index} is out of range (the list has {count} "
                         "plans)")
    return int(index)


def plan_at(graph: pygraph, index: int) -> PlanConfig:
    return graph.lifecycle.planning.plans[index]


def source_at(graph: pygraph, index: int) -> PlanSource:
    return source_of(graph, plan_at(graph, index))


def plan_name_at(graph: pygraph, index: int) -> str:
    return source_at(graph, index).plan_name(graph, plan_at(graph, index))


def compiled_plan(graph: pygraph, index: int, ctx: ExecutionContext) -> CompiledPlan:
    """The compiled plan at `index`, built now (declines propagate) if not cached."""
    planning = graph.lifecycle.planning
    compiled = planning.compiled_plans.get(index)
    if compiled is not None:
        return compiled
    with planning.lock:  # threads sharing a graph build each plan once
        cache = planning.compiled_plans
        if index not in cache:
            cache[index] = source_at(graph, index).build_plan(graph, plan_at(graph, index),
                                                              ctx)
        return cache[index]


def workspace_size_of(compiled: CompiledPlan, ctx: ExecutionContext) -> int:
    """Bytes the plan needs; shape-dependent plans answer for the context's overrides."""
    for_shapes = getattr(compiled, "get_workspace_size_for_shapes", None)
    if ctx.has_overrides and callable(for_shapes):
        return int(for_shapes(ctx.override_uids, ctx.override_shapes))
    return int(compiled.get_workspace_size())
