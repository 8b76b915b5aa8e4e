"""The graph lifecycle as explicit state objects, and the per-graph planning store.

States: building -> validated -> frozen -> planned <-> built. `frozen` is the lowered
(or about-to-be-planned) graph with no plan list yet; planning that proposes nothing
leaves the graph frozen. Any mutation while validated drops back to building; any
mutation from frozen on raises GraphFrozenError. The router layer drives the
frozen/planned/built transitions through `Lifecycle` and keeps its data in `PlanningData`.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cudnn.ops.errors import GraphFrozenError


@dataclass(frozen=True)
class GraphState:
    name: str
    mutable: bool
    validated: bool
    planned: bool
    built: bool


BUILDING = GraphState("building", mutable=True, validated=False, planned=False, built=False)
VALIDATED = GraphState("validated", mutable=True, validated=True, planned=False, built=False)
FROZEN = GraphState("frozen", mutable=False, validated=True, planned=False, built=False)
PLANNED = GraphState("planned", mutable=False, validated=True, planned=True, built=False)
BUILT = GraphState("built", mutable=False, validated=True, planned=True, built=True)

_ALLOWED: dict[GraphState, frozenset[GraphState]] = {
    BUILDING: frozenset({VALIDATED}),
    VALIDATED: frozenset({BUILDING, FROZEN}),
    FROZEN: frozenset({PLANNED}),
    PLANNED: frozenset({BUILT}),
    BUILT: frozenset({PLANNED}),
}


@dataclass
class PlanningData:
    """Per-graph planning state. The IR stores it; the router layer gives it meaning."""
    #: per-graph router override (constructor `router=` or `set_router`); None = default.
    router: Any = None
    heuristics: tuple[Any, ...] = ()
    #: the one ranked plan list (router's PlanConfig objects).
    plans: list[Any] = field(default_factory=list)
    selected_index: int = 0
    #: True when select_plan() pinned the index (its decline is then an error).
    pinned: bool = False
    #: {plan index: compiled plan}, built once per index.
    compiled_plans: dict[int, Any] = field(default_factory=dict)
    #: the user's plan filters (deselect_engines, workspace limit, note filters; router's
    #: object). Kept across mutations: they describe the user's choice, not the graph.
    filters: Any = None
    #: the lowered backend graph, when a backend lowering exists (backend layer's object).
    lowered: Any = None
    #: anything else the router keeps per graph, in a type of its own (facts, candidate
    #: lists). Dropped on any mutation before the freeze, so it never describes a stale graph.
    router_state: Any = None
    #: held (re-entrantly) by the router while it plans, builds or compiles a plan of this
    #: graph, so threads sharing one graph plan it and build each plan exactly once.
    lock: Any = field(default_factory=threading.RLock, repr=False, compare=False)


class Lifecycle:
    def __init__(self, on_freeze: Callable[[], None]) -> None:
        self._state = BUILDING
        self._on_freeze = on_freeze
        self.planning = PlanningData()

    @property
    def state(self) -> GraphState:
        return self._state

    def check_mutable(self, what: str) -> None:
        """Call before any mutation: raises when frozen, else drops the validation."""
        if not self._state.mutable:
            raise GraphFrozenError(what)
        if self._state is VALIDATED:
            self._state = BUILDING
        self.planning.router_state = None

    def mark_validated(self) -> None:
        if self._state is BUILDING:
            self._state = VALIDATED

    def freeze(self) -> None:
        """Freeze a validated graph (idempotent once frozen)."""
        if not self._state.mutable:
            return
        self._move(FROZEN)
        self._on_freeze()

    def mark_planned(self) -> None:
        if self._state is not PLANNED:
            self._move(PLANNED)

    def mark_built(self) -> None:
        if self._state is not BUILT:
            self._move(BUILT)

    def unmark_built(self) -> None:
        if self._state is BUILT:
            self._move(PLANNED)

    def _move(self, target: GraphState) -> None:
        if target not in _ALLOWED[self._state]:
            raise RuntimeError(f"graph lifecycle: cannot go from '{self._state.name}' to "
                               f"'{target.name}'")
        self._state = target
