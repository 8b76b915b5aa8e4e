"""The plan list's user filters: `deselect_engines`, `deselect_workspace_greater_than` and
the behaviour / numerical note filters.

The list itself is never filtered, so indices stay stable: each at-index path asks
`barred_reason(graph, index)` (the build walk skips barred entries; the at-index APIs
raise ValueError naming the filter), and a built plan over the workspace limit is a
decline (cudnnGraphNotSupportedError, "over the N limit"), so the walk moves on. Filters
are recorded on the graph (`planning.filters`) and may be set before or after planning;
setting one un-marks a built graph, so the next build or execute walks again.

Backend plans are filtered by name and workspace like python ones; a note filter bars a
plan whose notes its source cannot report (it cannot be shown to pass). Filters are not
forwarded to the C++ backend's own heuristics list.
"""
from __future__ import annotations

import numbers
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cudnn.ops.errors import cudnnGraphNotSupportedError

if TYPE_CHECKING:
    from cudnn import pygraph

BEHAVIOR, NUMERICAL = "behavior", "numerical"
_API_NOUN = {BEHAVIOR: "behavior", NUMERICAL: "numeric"}


@dataclass
class PlanFilters:
    #: plans whose name contains any of these are barred.
    names: list[str] = field(default_factory=list)
    #: python and backend plans needing more workspace bytes decline at build.
    workspace_limit: int | None = None
    #: (kind, note, keep): keep=True bars plans lacking the note, False those having it.
    notes: list[tuple[str, Any, bool]] = field(default_factory=list)


def filters_of(graph: pygraph) -> PlanFilters:
    planning = graph.lifecycle.planning
    if not isinstance(planning.filters, PlanFilters):
        planning.filters = PlanFilters()
    return planning.filters


def _changed(graph: pygraph) -> pygraph:
    graph.lifecycle.unmark_built()
    return graph


def deselect_engines(graph: pygraph, names: Any) -> pygraph:
    """Bars every plan whose name contains one of `names` (a str or an iterable of str)."""
    items = [names] if isinstance(names, str) else _listed(names, "deselect_engines", "names")
    for name in items:
        if not isinstance(name, str) or not name:
            raise TypeError(f"deselect_engines: names must be non-empty strings, got {name!r}")
    filters_of(graph).names.extend(items)
    return _changed(graph)


def deselect_workspace_greater_than(graph: pygraph, limit: int) -> pygraph:
    if isinstance(limit, bool) or not isinstance(limit, numbers.Integral) or limit < 0:
        raise TypeError(f"deselect_workspace_greater_than: limit must be an int >= 0 (bytes), "
                        f"got {limit!r}")
    filters = filters_of(graph)
    limit = int(limit)
    filters.workspace_limit = (limit if filters.workspace_limit is None
                               else min(filters.workspace_limit, limit))
    return _changed(graph)


def note_filter(graph: pygraph, kind: str, notes: Any, keep: bool, what: str) -> pygraph:
    """select_* (keep=True) / deselect_* (keep=False) of behaviour or numerical notes."""
    items = _listed(notes, what, "notes") if isinstance(notes, (list, tuple, set)) else [notes]
    filters_of(graph).notes.extend((kind, note, keep) for note in items)
    return _changed(graph)


def _listed(values: Any, what: str, argument: str) -> list[Any]:
    if not isinstance(values, Iterable):
        raise TypeError(f"{what}: {argument} must be a value or a list of them, got "
                        f"{type(values).__name__}")
    return list(values)


def barred_reason(graph: pygraph, index: int) -> str | None:
    """Why the plan at `index` is excluded by the filters, or None."""
    filters = graph.lifecycle.planning.filters
    if not isinstance(filters, PlanFilters):
        return None
    from cudnn.engines.plan_list import plan_at, plan_name_at, source_at
    if filters.names:
        name = plan_name_at(graph, index)
        hit = next((n for n in filters.names if n in name), None)
        if hit is not None:
            return f"excluded by deselect_engines({hit!r})"
    for kind, note, keep in filters.notes:
        source, plan = source_at(graph, index), plan_at(graph, index)
        try:
            notes = (source.behavior_notes(graph, plan) if kind == BEHAVIOR
                     else source.numerical_notes(graph, plan))
        except NotImplementedError:
            return f"excluded by a {kind} note filter (the plan reports no {kind} notes)"
        if (note in notes) != keep:
            api = f"{'select' if keep else 'deselect'}_{_API_NOUN[kind]}_notes"
            return f"excluded by {api}({note})"
    return None


def require_not_barred(graph: pygraph, index: int, what: str) -> None:
    reason = barred_reason(graph, index)
    if reason is not None:
        raise ValueError(f"{what}: plan {index} is {reason}")


def check_workspace_limit(graph: pygraph, index: int, workspace_size: int) -> None:
    """Declines a built plan whose workspace is over the deselect_workspace_greater_than
    limit (a decline: the build walk moves on)."""
    filters = graph.lifecycle.planning.filters
    limit = filters.workspace_limit if isinstance(filters, PlanFilters) else None
    if limit is not None and workspace_size > limit:
        raise cudnnGraphNotSupportedError(
            f"plan {index} needs {workspace_size} bytes of workspace, over the {limit} limit "
            "set by deselect_workspace_greater_than()")
