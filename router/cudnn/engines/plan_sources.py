"""Who answers for one entry of the plan list: a python engine or the backend adapter.

Both sides look the same to the plan-list code (naming, re-checking, building), so no
code branches on "is this a backend plan"; the side is decided once, from the entry's
engine id (engine_ids.is_python_engine).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cudnn.engines import engine_ids
from cudnn.engines.backend_source import backend_adapter, backend_answer
from cudnn.engines.base import BaseEngine, CompiledPlan, ExecutionContext, PlanConfig
from cudnn.engines.planning_state import router_state
from cudnn.engines.router import candidate_engines
from cudnn.ops.errors import cudnnGraphNotSupportedError

if TYPE_CHECKING:
    from cudnn import pygraph


class PlanSource:
    owner: Any

    def plan_name(self, graph: pygraph, plan: PlanConfig) -> str:
        raise NotImplementedError

    def check_support(self, graph: pygraph, plan: PlanConfig) -> None:
        raise NotImplementedError

    def build_plan(self, graph: pygraph, plan: PlanConfig,
                   ctx: ExecutionContext) -> CompiledPlan:
        raise NotImplementedError

    def public_knobs(self, graph: pygraph, plan: PlanConfig) -> dict[Any, int]:
        raise NotImplementedError

    def behavior_notes(self, graph: pygraph, plan: PlanConfig) -> tuple[Any, ...]:
        raise NotImplementedError

    def numerical_notes(self, graph: pygraph, plan: PlanConfig) -> tuple[Any, ...]:
        raise NotImplementedError


class EngineSource(PlanSource):
    def __init__(self, engine: BaseEngine) -> None:
        self.owner = engine

    def plan_name(self, graph: pygraph, plan: PlanConfig) -> str:
        return self.owner.plan_name(plan)

    def check_support(self, graph: pygraph, plan: PlanConfig) -> None:
        self.owner.check_support(graph)

    def build_plan(self, graph: pygraph, plan: PlanConfig,
                   ctx: ExecutionContext) -> CompiledPlan:
        compiled = self.owner.build_plan(graph, plan, ctx)
        if not isinstance(compiled, CompiledPlan):
            raise TypeError(f"engine '{self.owner.name}': build_plan returned "
                            f"{type(compiled).__name__}, expected a CompiledPlan")
        return compiled

    def public_knobs(self, graph: pygraph, plan: PlanConfig) -> dict[Any, int]:
        return self.owner.knobs_to_public(plan.knobs)

    def behavior_notes(self, graph: pygraph, plan: PlanConfig) -> tuple[Any, ...]:
        return tuple(self.owner.behavior_notes)

    def numerical_notes(self, graph: pygraph, plan: PlanConfig) -> tuple[Any, ...]:
        return tuple(self.owner.numerical_notes)


class BackendSource(PlanSource):
    def __init__(self, adapter: Any) -> None:
        self.owner = adapter

    def plan_name(self, graph: pygraph, plan: PlanConfig) -> str:
        if plan.engine_id == engine_ids.BACKEND_HEURISTIC_ENGINE_ID:
            return "backend_heuristics"
        return self.owner.plan_name(graph, plan)

    def check_support(self, graph: pygraph, plan: PlanConfig) -> None:
        self.owner.check_support(graph, plan)

    def build_plan(self, graph: pygraph, plan: PlanConfig,
                   ctx: ExecutionContext) -> CompiledPlan:
        return self.owner.build_plan(graph, plan, ctx)

    def public_knobs(self, graph: pygraph, plan: PlanConfig) -> dict[Any, int]:
        if plan.engine_id == engine_ids.BACKEND_HEURISTIC_ENGINE_ID:
            raise NotImplementedError("the delegating backend entry (-1) has no replayable "
                                      "engine and knobs")
        to_public = getattr(self.owner, "knobs_to_public", None)
        if to_public is not None:
            return dict(to_public(plan))
        return dict(plan.knobs or {})

    def behavior_notes(self, graph: pygraph, plan: PlanConfig) -> tuple[Any, ...]:
        notes = getattr(self.owner, "behavior_notes", None)
        if notes is None:
            raise NotImplementedError("the backend adapter reports no behavior notes")
        return tuple(notes(graph, plan))

    def numerical_notes(self, graph: pygraph, plan: PlanConfig) -> tuple[Any, ...]:
        notes = getattr(self.owner, "numerical_notes", None)
        if notes is None:
            raise NotImplementedError("the backend adapter reports no numerical notes")
        return tuple(notes(graph, plan))


def python_owner(graph: pygraph, engine_id: int) -> BaseEngine | None:
    """The engine of this graph (candidate or replayed) that owns `engine_id`."""
    engines = [*candidate_engines(graph).engines, *router_state(graph).replay_engines]
    return next((e for e in engines if e.owns_id(engine_id)), None)


def source_of(graph: pygraph, plan: PlanConfig) -> PlanSource:
    if engine_ids.is_python_engine(plan.engine_id):
        engine = python_owner(graph, plan.engine_id)
        if engine is None:
            raise ValueError(f"no engine of this graph owns python engine id {plan.engine_id}")
        return EngineSource(engine)
    answer = backend_answer(graph)
    adapter = answer.adapter
    reason = answer.declined
    if adapter is None:
        adapter, reason = backend_adapter()
    if adapter is None:
        raise cudnnGraphNotSupportedError(f"plan with backend engine id {plan.engine_id}: "
                                          f"{reason}")
    return BackendSource(adapter)
