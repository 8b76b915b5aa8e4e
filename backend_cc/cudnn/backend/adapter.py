"""`CudnnBackendAdapter`: the cuDNN backend as one more plan source of the router.

It implements the seam documented in cudnn/engines/backend_source.py (router/):
- `unavailable_reason()`: None when the extension imports, a cuDNN 9 library loads and a
  cuDNN handle can be created (a GPU is present); else why not. The router then offers no
  backend entries and shows this reason in `graph.explain_plans()`.
- `backend_plan_entries(graph, heuristics)`: lowers the frozen graph once (kept in
  `graph.lifecycle.planning.lowered`), builds cuDNN's operation graph and answers with the
  entries of its PlanBook (plan_book.py: heur modes A / B / FALLBACK, OPENSOURCE and the
  delegating BACKEND_HEURISTIC_ENGINE_ID entry). Asked again for the same graph, it gives
  the same entries without asking cuDNN again.
- `plan_name`, `check_support`, `build_plan` (one build at the entry's backend index;
  the delegating entry builds the first config that builds), `knobs_to_public` /
  `knobs_from_public` (knobs.py), `behavior_notes`, `create_plan` (replay of a recorded
  (engine id, knobs)), `build_operation_graph` (lower early).

Declines (docs/ENGINE_CONTRACT.md §2): lowering that fails with
cudnnGraphNotSupportedError, RuntimeError (cuDNN refused a descriptor), ValueError (the
C++ builder refused a value: rank > 8, a zero extent) or AttributeError (all three logged
at WARNING), or ImportError declines the backend for the graph, and leaves no
lowered graph behind (nor any layout copied back into the IR); AssertionError, KeyError and
TypeError are bugs and propagate. Plan creation and building decline only with
cudnnGraphNotSupportedError.

`BackendAccess` is how the adapter reaches the extension and handles; tests hand it a
stand-in (a recording extension, no GPU needed).
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cudnn.backend import handles, knobs, loader
from cudnn.backend.compiled_plan import BackendPlan
from cudnn.backend.lowered_graph import LoweredGraph
from cudnn.backend.lowering import lower
from cudnn.backend.plan_book import PlanBook
from cudnn.engines import engine_ids
from cudnn.engines.base import CompiledPlan, ExecutionContext, PlanConfig
from cudnn.ops.enums import behavior_note
from cudnn.ops.errors import cudnnGraphNotSupportedError

if TYPE_CHECKING:
    from cudnn import pygraph

_log = logging.getLogger(__name__)

#: lowering failures that mean "the backend declines this graph" (section 8.2). ValueError
#: is the C++ builder refusing a value the IR allows but cuDNN does not (rank > 8, a zero
#: extent): a decline with that reason, so the plan list can fall back to python engines.
_LOWERING_DECLINES: tuple[type[BaseException], ...] = (RuntimeError, ValueError, ImportError,
                                                       AttributeError)


class BackendAccess:
    """The extension (through cudnn.backend.loader) and cuDNN handles of this process."""

    def __init__(self) -> None:
        self._probe: str | None = None
        self._probed = False

    def unavailable_reason(self) -> str | None:
        reason = loader.unavailable_reason()
        if reason:
            return f"cuDNN backend unavailable: {reason}"
        if not self._probed:  # the first answer stands for the process, like the loader's
            self._probed = True
            try:
                handles.default_handle()
            except RuntimeError as exc:
                self._probe = f"cuDNN backend unavailable: no usable GPU ({exc})"
        return self._probe

    def extension(self) -> Any:
        return loader.load()

    def handle_for(self, graph: pygraph) -> int:
        """The handle a graph lowers with: its own, else this thread's default handle."""
        own = handles.handle_address(graph.handle)
        return handles.default_handle() if own is None else own


class CudnnBackendAdapter:
    name = "cudnn_backend"

    def __init__(self, access: Any = None) -> None:
        self.access = BackendAccess() if access is None else access

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    # -- availability and lowering ------------------------------------------------------
    def unavailable_reason(self) -> str | None:
        return self.access.unavailable_reason()

    def lowered(self, graph: pygraph) -> LoweredGraph:
        """The graph's lowered backend graph, made (and its operation graph built) once."""
        planning = graph.lifecycle.planning
        if planning.lowered is not None:
            if not isinstance(planning.lowered, LoweredGraph):
                raise TypeError(f"graph '{graph.name}' holds a lowered object of type "
                                f"{type(planning.lowered).__name__}, not a LoweredGraph")
            return planning.lowered
        try:
            made = lower(graph, self.access.extension(), handle=self.access.handle_for(graph))
            made.build_operation_graph()
        except cudnnGraphNotSupportedError:
            raise
        except _LOWERING_DECLINES as exc:
            # ImportError is an expected absence; the others may hide a real problem
            level = logging.INFO if isinstance(exc, ImportError) else logging.WARNING
            _log.log(level, "cuDNN backend declines graph '%s': %s: %s", graph.name,
                     type(exc).__name__, exc)
            raise cudnnGraphNotSupportedError(
                f"the cuDNN backend could not lower graph '{graph.name}': "
                f"{type(exc).__name__}: {exc}") from exc
        made.copy_back_layouts()
        made.plan_book = PlanBook(made.backend)
        planning.lowered = made
        return made

    def build_operation_graph(self, graph: pygraph) -> None:
        self.lowered(graph)

    def backend_plan_entries(self, graph: pygraph, heuristics: Any) -> list[PlanConfig]:
        return list(self.lowered(graph).plan_book.entries(heuristics or ()))

    # -- one entry ---------------------------------------------------------------------
    def _index(self, graph: pygraph, plan: PlanConfig) -> int:
        lowered = self.lowered(graph)
        if plan.engine_id == engine_ids.BACKEND_HEURISTIC_ENGINE_ID:
            return lowered.plan_book.delegated_index()
        if plan.cpp_index is None:
            raise ValueError(f"backend plan {plan!r} has no cpp_index (backend entries come "
                             "from backend_plan_entries() or create_execution_plan())")
        return plan.cpp_index

    def plan_name(self, graph: pygraph, plan: PlanConfig) -> str:
        if plan.engine_id == engine_ids.BACKEND_HEURISTIC_ENGINE_ID:
            return "backend_heuristics"
        return str(self.lowered(graph).backend.get_plan_name_at_index(self._index(graph, plan)))

    def check_support(self, graph: pygraph, plan: PlanConfig) -> None:
        index = self._index(graph, plan)
        self.lowered(graph).backend.check_support_at_index(index)

    def build_plan(self, graph: pygraph, plan: PlanConfig,
                   ctx: ExecutionContext | None = None) -> CompiledPlan:
        lowered = self.lowered(graph)
        index = self._index(graph, plan)
        lowered.backend.build_plan_at_index(index)
        return BackendPlan(lowered, index, str(lowered.backend.get_plan_name_at_index(index)))

    def behavior_notes(self, graph: pygraph, plan: PlanConfig) -> tuple[behavior_note, ...]:
        notes = self.lowered(graph).backend.get_behavior_notes_for_plan_at_index(
            self._index(graph, plan))
        return tuple(behavior_note(int(n)) for n in notes)

    # -- knobs and replay --------------------------------------------------------------
    def _knob_names(self) -> dict[str, int]:
        return dict(self.access.extension().backend_knob_types())

    def knobs_to_public(self, plan: PlanConfig) -> dict[Any, int]:
        return knobs.to_public(plan.knobs, self._knob_names())

    def knobs_from_public(self, public: Mapping[Any, int] | None) -> dict[int, int]:
        return knobs.to_native(public, self._knob_names())

    def create_plan(self, graph: pygraph, engine_id: int, knob_values: Any = None) -> PlanConfig:
        """Append one explicit backend plan (replay of `get_engine_and_knobs_at_index`)."""
        if engine_id == engine_ids.BACKEND_HEURISTIC_ENGINE_ID:
            if knob_values:
                raise ValueError("the delegating backend entry (-1) takes no knobs")
            self.lowered(graph)
            return PlanConfig(engine_id)
        if not engine_ids.is_backend_engine(engine_id):
            raise ValueError(f"create_execution_plan: {engine_id} is not a cuDNN backend engine "
                             f"id (backend ids are in [0, {engine_ids.CPP_OSS_ENGINE_ID_BASE}))")
        native = self.knobs_from_public(knob_values)
        lowered = self.lowered(graph)
        index = lowered.backend.create_execution_plan(engine_id, native)
        return lowered.plan_book.entry_at(index)
