"""The cost model behind `heuristics_sort`: predicted times, and one list from two orders.

Each entry of a plan list gets an `Estimate` (seconds or None, and where it came from):
- a python plan: its engine's `predict_time(graph, plan)` (the optional method of the
  engine contract, base.py), labelled with the engine's `predict_source`;
- a backend plan: the adapter's optional `predict_time(graph, plan)`; without one the
  entry has no time and keeps the position cuDNN's heuristics gave it ("cuDNN's order").
An autotune record or measurement replaces an entry's estimate later (autotune.py).

`merge(python, backend)` makes the one list:
1. python plans with a prediction, fastest first (ties keep the claim order), then python
   plans without one, in claim order;
2. the backend's entries stay in cuDNN's order; the two sequences are merged like sorted
   runs: while both heads have a time the faster goes first (a tie: the python plan);
   a head without a time lets the python plans go first (the claim is a preference).
The estimates are kept per graph (`router_state(graph).estimates`, by plan object) for
explain_plans().
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cudnn.engines import engine_ids
from cudnn.engines.base import DECLINE_TYPES, BaseEngine, PlanConfig
from cudnn.engines.planning_state import router_state

if TYPE_CHECKING:
    from cudnn import pygraph

#: sources of an entry's time, as explain_plans() prints them
CUDNN_ORDER = "cuDNN's order"
NO_MODEL = "no model"
MEASURED = "measured by autotune"
RECORDED = "autotune cache"


@dataclass(frozen=True)
class Estimate:
    """An entry's time (seconds; None: unknown) and where it came from."""
    seconds: float | None
    source: str

    def render(self) -> str:
        if self.seconds is None:
            return f"time unknown ({self.source})"
        verb = "measured" if self.source in (MEASURED, RECORDED) else "predicted"
        return f"{verb} {self.seconds * 1e3:.3f} ms ({self.source})"


def _checked(value: Any, who: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not math.isfinite(float(value)) or value < 0:
        raise TypeError(f"{who}: predict_time must return None or a finite number of "
                        f"seconds >= 0, got {value!r}")
    return float(value)


def python_estimate(graph: pygraph, engine: BaseEngine | None, plan: PlanConfig) -> Estimate:
    if engine is None:
        return Estimate(None, NO_MODEL)
    predict = getattr(engine, "predict_time", None)
    if predict is None:
        return Estimate(None, NO_MODEL)
    try:
        seconds = _checked(predict(graph, plan), f"engine '{engine.name}'")
    except DECLINE_TYPES:
        seconds = None
    if seconds is None:
        return Estimate(None, f"{NO_MODEL} in {engine.name}")
    return Estimate(seconds, getattr(engine, "predict_source", "") or f"{engine.name} model")


def backend_estimate(graph: pygraph, adapter: Any, plan: PlanConfig) -> Estimate:
    predict = getattr(adapter, "predict_time", None)
    if predict is None:
        return Estimate(None, CUDNN_ORDER)
    try:
        seconds = _checked(predict(graph, plan), "the backend adapter")
    except DECLINE_TYPES:
        seconds = None
    if seconds is None:
        return Estimate(None, CUDNN_ORDER)
    return Estimate(seconds, "cuDNN backend model")


def estimates(graph: pygraph) -> dict[int, tuple[PlanConfig, Estimate]]:
    """{id(plan): (plan, estimate)} of this graph's ranked entries (the plan is kept so
    its id stays unique)."""
    return router_state(graph).estimates


def estimate_of(graph: pygraph, plan: PlanConfig) -> Estimate | None:
    found = router_state(graph).estimates.get(id(plan))
    return None if found is None or found[0] is not plan else found[1]


def set_estimate(graph: pygraph, plan: PlanConfig, estimate: Estimate) -> None:
    router_state(graph).estimates[id(plan)] = (plan, estimate)


def _owner(engines: Sequence[BaseEngine], engine_id: int) -> BaseEngine | None:
    return next((e for e in engines if e.owns_id(engine_id)), None)


def merge(graph: pygraph, python_plans: Sequence[PlanConfig],
          backend_plans: Sequence[PlanConfig]) -> list[PlanConfig]:
    """The one list (rules in the module docstring); records every entry's estimate."""
    state = router_state(graph)
    engines: list[BaseEngine] = []
    if state.candidates is not None:
        engines = [*state.candidates.engines, *state.replay_engines]
    py = []
    for i, plan in enumerate(python_plans):
        owner = _owner(engines, plan.engine_id) if engine_ids.is_python_engine(
            plan.engine_id) else None
        est = python_estimate(graph, owner, plan)
        set_estimate(graph, plan, est)
        py.append((est.seconds is None, est.seconds or 0.0, i, plan))
    py.sort(key=lambda row: row[:3])
    backend = []
    if backend_plans:
        from cudnn.engines.backend_source import backend_answer
        adapter = backend_answer(graph).adapter
        for plan in backend_plans:
            est = backend_estimate(graph, adapter, plan)
            set_estimate(graph, plan, est)
            backend.append((est.seconds, plan))
    out: list[PlanConfig] = []
    i = j = 0
    while i < len(py) and j < len(backend):
        p_time = None if py[i][0] else py[i][1]
        b_time = backend[j][0]
        if p_time is not None and b_time is not None and b_time < p_time:
            out.append(backend[j][1])
            j += 1
        else:
            out.append(py[i][3])
            i += 1
    out.extend(row[3] for row in py[i:])
    out.extend(plan for _, plan in backend[j:])
    return out
