"""One-shot planning: validate, freeze, rank, store the one plan list.

`plan_graph(graph, heuristics)` is `create_execution_plans`: it validates the graph,
refuses a second planning (RuntimeError), freezes the graph, asks the graph's router for
the list, checks every entry (a python entry must belong to an engine the graph was
offered, a backend entry needs the backend) and stores it. An empty list raises
cudnnGraphNotSupportedError naming every engine's reason, and leaves the graph frozen but
unplanned. `append_plan` is `create_execution_plan` (one explicit plan, for replay).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from cudnn.engines import engine_ids, manifest
from cudnn.engines.backend_source import backend_adapter, backend_answer
from cudnn.engines.base import BaseEngine, PlanConfig
from cudnn.engines.plan_sources import python_owner
from cudnn.engines.planning_state import router_state
from cudnn.engines.router import candidate_engines, propose, router_for
from cudnn.ops.enums import heur_mode
from cudnn.ops.errors import cudnnGraphNotSupportedError

if TYPE_CHECKING:
    from cudnn import pygraph


def normalize_heuristics(heuristics: Any) -> tuple[heur_mode, ...]:
    if heuristics is None:
        return ()
    modes = [heuristics] if isinstance(heuristics, heur_mode) else list(heuristics)
    for mode in modes:
        if not isinstance(mode, heur_mode):
            raise TypeError(f"create_execution_plans: heuristics must be cudnn.heur_mode "
                            f"values, got {type(mode).__name__} {mode!r}")
    return tuple(modes)


def plan_graph(graph: pygraph, heuristics: Any = None) -> None:
    with graph.lifecycle.planning.lock:  # one planning per graph, whatever the threads
        _plan_graph(graph, heuristics)


def _plan_graph(graph: pygraph, heuristics: Any) -> None:
    graph.validate()
    if graph.lifecycle.state.planned:
        raise RuntimeError("create_execution_plans() was already called on this graph; "
                           "planning is one-shot (build a new graph to plan again)")
    planning = graph.lifecycle.planning
    planning.heuristics = normalize_heuristics(heuristics)
    graph.lifecycle.freeze()
    engines = list(candidate_engines(graph).engines)
    plans = list(router_for(graph).plan(graph, engines))
    _check_entries(graph, plans, engines)
    if not plans:
        raise cudnnGraphNotSupportedError(no_plan_message(graph))
    planning.plans = plans
    planning.selected_index = 0
    planning.pinned = False
    planning.compiled_plans = {}
    graph.lifecycle.mark_planned()


def _check_entries(graph: pygraph, plans: Iterable[Any], engines: list[BaseEngine]) -> None:
    for i, plan in enumerate(plans):
        if not isinstance(plan, PlanConfig):
            raise TypeError(f"the router's plan list holds {type(plan).__name__} at [{i}]; "
                            "expected PlanConfig")
        if engine_ids.is_python_engine(plan.engine_id):
            if not any(e.owns_id(plan.engine_id) for e in engines):
                raise ValueError(f"the router ranked python engine id {plan.engine_id} at "
                                 f"[{i}], which no engine offered to this graph owns")
        elif backend_answer(graph).adapter is None:
            raise ValueError(f"the router ranked backend engine id {plan.engine_id} at [{i}], "
                             f"but the backend offers no plans: {backend_answer(graph).declined}")


def decline_lines(graph: pygraph) -> list[str]:
    """Every reason this graph got no python plan, one line per engine, then the
    backend's."""
    candidates = candidate_engines(graph)
    lines = [f"{a.name} ({a.engine_id}): absent, {a.reason}" for a in candidates.absences]
    for engine in candidates.engines:
        proposal = propose(graph, engine)
        if proposal.declined is not None:
            lines.append(f"{engine.name} ({engine.engine_id}): declined, {proposal.declined}")
        elif not proposal.plans:
            lines.append(f"{engine.name} ({engine.engine_id}): accepted but proposed no plan")
        else:
            lines.append(f"{engine.name} ({engine.engine_id}): proposed {len(proposal.plans)} "
                         f"plans, none kept by the router {router_for(graph)!r}")
    if manifest.family_for(graph) is None and not candidates.engines:
        kinds = sorted({n.node_type.name for n in graph.nodes})
        lines.append(f"no python engine family serves {'/'.join(kinds) or 'an empty graph'}")
    answer = backend_answer(graph)
    if answer.declined is not None:
        lines.append(f"backend: {answer.declined}")
    elif not answer.entries:
        lines.append("backend: offered no plans")
    return lines


def no_plan_message(graph: pygraph) -> str:
    return ("no engine (python or backend) proposed a plan for this graph: "
            + "; ".join(decline_lines(graph)))


def append_plan(graph: pygraph, engine_id: Any, knobs: Any = None) -> None:
    """Append one explicit plan `(engine_id, knobs)` (replay of a recorded choice)."""
    engine_id = engine_ids.as_engine_id(engine_id, "create_execution_plan")
    graph.validate()
    graph.lifecycle.freeze()
    planning = graph.lifecycle.planning
    if engine_ids.is_python_engine(engine_id):
        plan = _python_replay(graph, engine_id, knobs)
    else:
        adapter, reason = backend_adapter()
        create = getattr(adapter, "create_plan", None)
        if create is None:
            raise cudnnGraphNotSupportedError(f"create_execution_plan({engine_id}): the backend "
                                              f"cannot append plans ({reason or 'no create_plan'})")
        plan = create(graph, engine_id, knobs)
        if not isinstance(plan, PlanConfig) or engine_ids.is_python_engine(plan.engine_id):
            raise TypeError(f"the backend's create_plan returned {plan!r}, expected a backend "
                            "PlanConfig")
    if not graph.lifecycle.state.planned:
        planning.plans = []
        planning.selected_index = 0
        planning.compiled_plans = {}
        graph.lifecycle.mark_planned()
    planning.plans.append(plan)


def _python_replay(graph: pygraph, engine_id: int, knobs: Any) -> PlanConfig:
    engine = python_owner(graph, engine_id) or manifest.engine_for_id(engine_id)
    if engine is None:
        raise ValueError(f"create_execution_plan: no engine owns python engine id {engine_id} "
                         "(unknown id, or its engine is not installed)")
    state = router_state(graph)
    if python_owner(graph, engine_id) is None:
        state.replay_engines.append(engine)
    native = engine.knobs_from_public(knobs) if knobs is None or isinstance(knobs, Mapping) \
        else knobs
    return PlanConfig(engine_id, native)
