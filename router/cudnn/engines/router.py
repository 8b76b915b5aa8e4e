"""`Router`: turns a frozen graph's candidate engines and the backend's entries into the
one ranked plan list.

Policy is pluggable at three levels:
1. subclass `Router` and override `plan()` (or `python_plans()`);
2. per graph: `pygraph(router=...)` or `graph.set_router(r)` (before planning);
3. process-wide: assign `cudnn.engines.router.default_router`.
A graph uses its own router if it has one, else the current `default_router`. The list a
router returns IS the plan list, position for position; every python entry must name an
engine the graph was offered, every other entry must come from the backend.

Candidates: the manifest engines of the graph's family (slot order), then engines
registered on the graph (`manifest.register_backend`, registration order). Each
candidate is asked `propose_plans(graph)` once per graph; a decline (NotImplementedError,
cudnnGraphNotSupportedError) is recorded with its message, anything else propagates.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cudnn.engines import heuristics, manifest
from cudnn.engines.backend_source import backend_plan_entries
from cudnn.engines.base import DECLINE_TYPES, BaseEngine, PlanConfig
from cudnn.engines.planning_state import Candidates, router_state

if TYPE_CHECKING:
    from cudnn import pygraph


@dataclass(frozen=True)
class Proposal:
    """One candidate's answer for one graph: its plans, or why it declined."""
    engine: BaseEngine
    plans: tuple[PlanConfig, ...] = ()
    declined: str | None = None


def candidate_engines(graph: pygraph) -> Candidates:
    """The python engines offered to `graph` (cached on a validated graph)."""
    state = router_state(graph)
    if state.candidates is None:
        engines, absences = manifest.manifest_engines(graph)
        registered = manifest.registered_backends(graph)
        taken = {e.require_id() for e in registered}
        engines = [e for e in engines if e.require_id() not in taken] + list(registered)
        state.candidates = Candidates(engines, absences)
    return state.candidates


def propose(graph: pygraph, engine: BaseEngine) -> Proposal:
    """`engine.propose_plans(graph)`, asked once per graph; declines are recorded."""
    state = router_state(graph)
    if engine not in state.proposals:
        state.proposals[engine] = _ask(graph, engine)
    return state.proposals[engine]


def _ask(graph: pygraph, engine: BaseEngine) -> Proposal:
    try:
        plans = tuple(engine.propose_plans(graph))
    except DECLINE_TYPES as exc:
        return Proposal(engine, declined=f"{type(exc).__name__}: {exc}")
    for plan in plans:
        if not isinstance(plan, PlanConfig):
            raise TypeError(f"engine '{engine.name}': propose_plans returned "
                            f"{type(plan).__name__}, expected PlanConfig")
        if not engine.owns_id(plan.engine_id):
            ids = engine.owned_ids()
            raise ValueError(f"engine '{engine.name}' proposed a plan with foreign engine_id "
                             f"{plan.engine_id} (it owns [{ids.start}, {ids.stop}))")
    return Proposal(engine, plans=plans)


class Router:
    """The default policy: every claiming engine's proposals, then the backend's
    entries, ordered by `heuristics.heuristics_sort`."""

    def python_plans(self, graph: pygraph, engines: Sequence[BaseEngine]) -> list[PlanConfig]:
        plans: list[PlanConfig] = []
        for engine in engines:
            plans.extend(propose(graph, engine).plans)
        return plans

    def plan(self, graph: pygraph, engines: Sequence[BaseEngine]) -> list[PlanConfig]:
        return heuristics.heuristics_sort(graph, self.python_plans(graph, engines),
                                          backend_plan_entries(graph))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


default_router: Router = Router()


def router_for(graph: pygraph) -> Router:
    """The graph's own router, else the process-wide `default_router` (read now)."""
    chosen = graph.lifecycle.planning.router
    chosen = default_router if chosen is None else chosen
    if not callable(getattr(chosen, "plan", None)):
        raise TypeError(f"router {chosen!r} has no plan(graph, engines) method")
    return chosen
