"""Ranking of the one plan list: the seam a cost model replaces.

`heuristics_sort(graph, python_plans, backend_plans)` receives the python engines'
proposals (candidate order, each engine's configs in the order it proposed them) and the
backend's own ranked entries, and returns the plan list position for position. The router
looks this function up through the module on every call, so replacing
`cudnn.engines.heuristics.heuristics_sort` changes the ranking of every later planning.

The default policy:
1. the cost model (cost_model.py): python plans by their engine's predicted time (plans
   without a prediction after those with one, in claim order), merged with the backend's
   entries, which keep cuDNN's order;
2. a recorded autotune winner for this graph's signature and device (autotune.py) moves
   to the front, without timing anything.
Every entry's estimate and its source are kept for explain_plans().
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from cudnn.engines import cost_model

if TYPE_CHECKING:
    from cudnn import pygraph
    from cudnn.engines.base import PlanConfig


def heuristics_sort(graph: pygraph, python_plans: Sequence[PlanConfig],
                    backend_plans: Sequence[PlanConfig]) -> list[PlanConfig]:
    """Predicted times merged with the backend's order, then a recorded winner first."""
    ranked = cost_model.merge(graph, python_plans, backend_plans)
    if len(ranked) < 2:
        return ranked
    from cudnn.engines.autotune import recorded_winner
    return recorded_winner(graph, ranked)
