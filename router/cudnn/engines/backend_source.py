"""The cuDNN backend as one more plan source, reached through a lazily imported adapter.

The router has no build dependency on the backend: it imports `ADAPTER_MODULE` and makes
one `ADAPTER_CLASS()` per process the first time a backend-lowerable graph is planned.
The adapter (written in backend_cc/, `cudnn.backend.adapter.CudnnBackendAdapter`)
implements this seam:

    name: str                          plan-source label in explanations ("cudnn_backend")
    unavailable_reason() -> str | None None when usable in this process, else why not
                                       (no libcudnn, no GPU, extension ABI mismatch)
    backend_plan_entries(graph, heuristics) -> list[PlanConfig]
        The backend's ranked plans for the frozen, validated graph: ids in [0, 10000)
        or BACKEND_HEURISTIC_ENGINE_ID (-1), each with its `cpp_index` in the lowered
        graph's own plan list. Lowering happens here; keep the lowered object in
        `graph.lifecycle.planning.lowered`. Decline with cudnnGraphNotSupportedError
        (the message is shown to users); anything else propagates.
    plan_name(graph, plan) -> str
    check_support(graph, plan) -> None          decline like above
    build_plan(graph, plan, ctx) -> CompiledPlan
        `CompiledPlan.execute(graph, data, ctx)` runs `plan.cpp_index` with the caller's
        `{uid: buffer}` pack (values as given: framework tensors or raw int addresses)
        and `ctx.workspace`; `get_workspace_size()` gives its bytes.
    Optional: knobs_to_public(plan) -> {knob_type: int}; behavior_notes(graph, plan);
    get_stream(handle) (the stream a handle is bound to); create_plan(graph, engine_id,
    knobs) -> PlanConfig (append one explicit backend plan, for replay);
    build_operation_graph(graph) (lower early, before planning).

Router rules: the adapter is asked at most once per graph (the answer, entries or the
reason there are none, is cached on the graph); a graph with python-only nodes (linear
attention, ...) is declined without importing the adapter; a missing adapter module or
an unavailable backend means no backend entries, with the reason kept for explanations.
"""
from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cudnn.engines import engine_ids
from cudnn.engines.base import DECLINE_TYPES, PlanConfig
from cudnn.engines.planning_state import router_state

if TYPE_CHECKING:
    from cudnn import pygraph

_log = logging.getLogger(__name__)

ADAPTER_MODULE = "cudnn.backend.adapter"
ADAPTER_CLASS = "CudnnBackendAdapter"


@dataclass(frozen=True)
class BackendAnswer:
    """The backend's plan entries for one graph, or why it offered none."""
    entries: list[PlanConfig] = field(default_factory=list)
    declined: str | None = None
    adapter: Any = None


class _AdapterSlot:
    """The process-wide adapter instance, or why there is none."""

    def __init__(self) -> None:
        self.key: tuple[str, str] | None = None
        self.adapter: Any = None
        self.reason: str | None = None

    def get(self) -> tuple[Any, str | None]:
        key = (ADAPTER_MODULE, ADAPTER_CLASS)
        if self.key != key:
            self.key, self.adapter, self.reason = key, None, None
            try:
                module = importlib.import_module(ADAPTER_MODULE)
                cls = getattr(module, ADAPTER_CLASS, None)
                if cls is None:
                    raise ImportError(f"{ADAPTER_MODULE} has no {ADAPTER_CLASS}")
                self.adapter = cls()
            except ImportError as exc:
                self.reason = f"backend adapter not installed ({type(exc).__name__}: {exc})"
                _log.info("no cuDNN backend plans: %s", self.reason)
        if self.adapter is None:
            return None, self.reason
        return self.adapter, self.adapter.unavailable_reason()


_SLOT = _AdapterSlot()


def reset_backend_adapter() -> None:
    """Forget the adapter (tests; after changing ADAPTER_MODULE)."""
    _SLOT.key = None


def backend_adapter() -> tuple[Any, str | None]:
    """(adapter or None, reason it cannot be used or None)."""
    return _SLOT.get()


def backend_answer(graph: pygraph) -> BackendAnswer:
    """The backend's answer for `graph`, asked once and cached on the graph."""
    state = router_state(graph)
    if state.backend is None:
        state.backend = _ask_backend(graph)
    return state.backend


def backend_plan_entries(graph: pygraph) -> list[PlanConfig]:
    """The backend's ranked entries for `graph` ([] when it declines or is absent);
    the same list object on every call."""
    return backend_answer(graph).entries


def _ask_backend(graph: pygraph) -> BackendAnswer:
    python_only = graph.python_only_reasons()
    if python_only:
        kinds = sorted({n.node_type.name for n in graph.nodes if n.spec.python_only}) or \
            sorted({n.node_type.name for n in graph.nodes})
        return BackendAnswer(declined=f"No valid engine configs for {'/'.join(kinds)}: "
                                      f"{'; '.join(python_only)} (python engines only)")
    adapter, reason = backend_adapter()
    if reason is not None:
        return BackendAnswer(declined=reason, adapter=adapter)
    try:
        entries = list(adapter.backend_plan_entries(graph, graph.lifecycle.planning.heuristics))
    except DECLINE_TYPES as exc:
        return BackendAnswer(declined=f"{type(exc).__name__}: {exc}", adapter=adapter)
    for entry in entries:
        if not isinstance(entry, PlanConfig):
            raise TypeError(f"{ADAPTER_MODULE}: backend_plan_entries returned "
                            f"{type(entry).__name__}, expected PlanConfig")
        if engine_ids.is_python_engine(entry.engine_id):
            raise ValueError(f"{ADAPTER_MODULE}: backend entry with python engine id "
                             f"{entry.engine_id}")
    return BackendAnswer(entries=entries, adapter=adapter)
