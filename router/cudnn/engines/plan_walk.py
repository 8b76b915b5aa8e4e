"""`build_plans`: walk the plan list from the selected index; the first entry that builds
wins.

Only declines (NotImplementedError, cudnnGraphNotSupportedError) advance the walk; any
other exception propagates. Entries barred by the user's filters (plan_filters.py) are
skipped, and one over the workspace limit declines. A plan pinned with `select_plan(i)` is strict: its decline is
raised instead of walking on. With `build_plan_policy.ALL` every entry from index 0 is
built; the selection stays on the previously selected index if that one built, else the
first one that did.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cudnn.engines.backend_source import backend_answer
from cudnn.engines.base import DECLINE_TYPES, ExecutionContext
from cudnn.engines.plan_filters import barred_reason, check_workspace_limit
from cudnn.engines.plan_list import compiled_plan, plan_name_at, workspace_size_of
from cudnn.ops.enums import build_plan_policy
from cudnn.ops.errors import cudnnGraphNotSupportedError

if TYPE_CHECKING:
    from cudnn import pygraph


def parse_policy(args: tuple[Any, ...], kwargs: dict[str, Any]) -> build_plan_policy:
    policy = kwargs.pop("policy", None)
    if kwargs:
        raise TypeError(f"build_plans: unexpected keyword arguments {sorted(kwargs)}")
    for arg in args:
        if not isinstance(arg, build_plan_policy):
            raise TypeError(f"build_plans: positional arguments must be "
                            f"cudnn.build_plan_policy values, got {type(arg).__name__} {arg!r}")
        policy = arg if policy is None or arg is build_plan_policy.ALL else policy
    if policy is not None and not isinstance(policy, build_plan_policy):
        raise TypeError(f"build_plans: policy must be a cudnn.build_plan_policy, got {policy!r}")
    return build_plan_policy.HEURISTICS_CHOICE if policy is None else policy


def walk(graph: pygraph, ctx: ExecutionContext, policy: build_plan_policy) -> None:
    planning = graph.lifecycle.planning
    build_all = policy is build_plan_policy.ALL
    selected, strict = planning.selected_index, planning.pinned
    failures: list[str] = []
    built: list[int] = []
    for index in range(0 if build_all else selected, len(planning.plans)):
        barred = barred_reason(graph, index)
        if barred is not None:
            if strict and index == selected:
                raise ValueError(f"build_plans: plan {index} ({plan_name_at(graph, index)}) "
                                 f"is pinned by select_plan() but {barred}")
            failures.append(f"[{index}] {plan_name_at(graph, index)}: {barred}")
            continue
        try:
            compiled = compiled_plan(graph, index, ctx)
            check_workspace_limit(graph, index, workspace_size_of(compiled, ctx))
        except DECLINE_TYPES as exc:
            if strict and index == selected:
                raise
            failures.append(f"[{index}] {plan_name_at(graph, index)}: "
                            f"{type(exc).__name__}: {exc}")
            continue
        if not build_all:
            _select_built(graph, index)
            return
        built.append(index)
    if built:
        _select_built(graph, selected if selected in built else built[0])
        return
    message = "no plan in the list could be built"
    if failures:
        message += ": " + "; ".join(failures)
    declined = backend_answer(graph).declined
    if declined is not None:
        message += f"; the backend declined: {declined}"
    raise cudnnGraphNotSupportedError(message)


def _select_built(graph: pygraph, index: int) -> None:
    graph.lifecycle.planning.selected_index = index
    graph.lifecycle.mark_built()
