"""Ranking of the one plan list: the seam a cost model replaces.

`heuristics_sort(graph, python_plans, backend_plans)` receives the python engines'
proposals (candidate order, each engine's configs in the order it proposed them) and the
backend's own ranked entries, and returns the plan list position for position. The router
looks this function up through the module on every call, so replacing
`cudnn.engines.heuristics.heuristics_sort` changes the ranking of every later planning.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cudnn import pygraph
    from cudnn.engines.base import PlanConfig


def heuristics_sort(graph: pygraph, python_plans: Sequence[PlanConfig],
                    backend_plans: Sequence[PlanConfig]) -> list[PlanConfig]:
    """Placeholder policy: claiming python engines first, then the backend's ranking.

    Python engines claim only graphs they were written for (a specialised kernel such
    as linear attention, or an engine the caller registered on purpose), so a claim is
    taken as a preference; the backend keeps its own order. No cost model yet.
    """
    return [*python_plans, *backend_plans]
