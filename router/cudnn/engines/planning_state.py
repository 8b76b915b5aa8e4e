"""What the router keeps per graph, in `graph.lifecycle.planning.router_state`.

The IR drops `router_state` on every mutation of a still-mutable graph, so nothing cached
here can describe a stale graph. Memos are only kept once the graph is validated (its
dims and dtypes are final until the next mutation, which drops them).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cudnn import pygraph
    from cudnn.engines.backend_source import BackendAnswer
    from cudnn.engines.base import BaseEngine
    from cudnn.engines.manifest import EngineAbsence
    from cudnn.engines.router import Proposal


@dataclass
class Candidates:
    """The python engines offered to one graph, in candidate order."""
    engines: list[BaseEngine]
    #: manifest engines of the graph's family that could not be loaded.
    absences: list[EngineAbsence]


@dataclass
class RouterState:
    #: {analyzer: facts record} (facts_for).
    facts: dict[Callable[[Any], Any], Any] = field(default_factory=dict)
    candidates: Candidates | None = None
    #: each candidate's answer to propose_plans.
    proposals: dict[BaseEngine, Proposal] = field(default_factory=dict)
    #: the backend's answer (entries or why there are none), asked once per graph.
    backend: BackendAnswer | None = None
    #: engines named by create_execution_plan() replays that were not candidates.
    replay_engines: list[BaseEngine] = field(default_factory=list)
    #: {id(plan): (plan, Estimate)}: each ranked entry's time and its source (cost_model).
    estimates: dict[int, Any] = field(default_factory=dict)
    #: what autotuning did for this graph: a recorded winner found at planning, or the
    #: measurements of graph.autotune() (autotune.AutotuneReport), for explain_plans().
    autotune: Any = None


def router_state(graph: pygraph) -> RouterState:
    planning = graph.lifecycle.planning
    state = planning.router_state
    if not isinstance(state, RouterState):
        state = RouterState()
        if graph.lifecycle.state.validated:
            planning.router_state = state
    return state


def facts_for(graph: pygraph, analyzer: Callable[[Any], Any]) -> Any:
    """`analyzer(graph)`, memoized per analyzer on a validated graph."""
    state = router_state(graph)
    if analyzer not in state.facts:
        state.facts[analyzer] = analyzer(graph)
    return state.facts[analyzer]
