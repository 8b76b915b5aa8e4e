"""The engine contract: what a python engine implements and what it receives.

- `PlanConfig(engine_id, knobs, cpp_index=None)`: one candidate plan. An engine may offer
  several that differ only in knobs (its native tuning config, any type).
- `BaseEngine`: `check_support(graph)` (decline by raising a decline type), then
  `propose_plans(graph)` (default: one plan with `default_knobs`), `build_plan(graph,
  plan, ctx)` (the expensive step, once per graph and plan index, result cached on the
  graph) returning a `CompiledPlan`, whose `execute(graph, data, ctx)` runs on the caller's
  `{uid: buffer}` pack. Eager engines implement `execute` and `get_workspace_size`
  instead of `build_plan`.
- `CompiledPlan.direct_launch(graph, data)` (optional): the plan's launch with its checks
  done once, for a caller that runs one graph many times with fresh buffers of the same
  layout (the torch ops); see `DirectLaunch`.
- `ExecutionContext`: handle, stream, workspace and execute-time shape overrides. Engines
  use no hidden stream, allocate no hidden workspace and read no private graph state.
- `BaseEngine.predict_time(graph, plan)` (optional): the engine's own estimate, in
  seconds, of one execution of `plan` on `graph`, from the graph's facts alone (shapes,
  dtypes, the handle's device); None when it has no model. The router ranks python plans
  by it (cost_model.py); explain_plans() shows it with its source.
- Declines: only `NotImplementedError` and `cudnnGraphNotSupportedError` mean "this engine
  does not serve this graph"; any other exception is a bug and propagates.
Engines are stateless and shared by every graph; the manifest (or `register_backend`)
gives each instance its `engine_id`.
"""
from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from cudnn.engines.engine_ids import as_engine_id
from cudnn.engines.node_buffers import NodeBuffers, resolve_node_buffers
from cudnn.ops.enums import knob_type
from cudnn.ops.errors import cudnnGraphNotSupportedError

if TYPE_CHECKING:
    from cudnn import pygraph

#: Exceptions that mean "declined" (routing), never "failed".
DECLINE_TYPES: tuple[type[Exception], ...] = (NotImplementedError, cudnnGraphNotSupportedError)


def is_decline(exc: BaseException) -> bool:
    return isinstance(exc, DECLINE_TYPES)


@dataclass(frozen=True)
class PlanConfig:
    engine_id: int
    knobs: Any = None
    #: backend entries only: the position in the lowered graph's own plan list.
    cpp_index: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "engine_id", as_engine_id(self.engine_id, "PlanConfig"))
        if self.cpp_index is not None and (
                isinstance(self.cpp_index, bool) or not isinstance(self.cpp_index, numbers.Integral)
                or self.cpp_index < 0):
            raise ValueError(f"PlanConfig: cpp_index must be None or an int >= 0, got "
                             f"{self.cpp_index!r}")


def _as_tuple(values: Sequence[Any] | None, what: str) -> tuple[Any, ...] | None:
    if values is None:
        return None
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"ExecutionContext: {what} must be a sequence, got "
                        f"{type(values).__name__}")
    return tuple(tuple(int(n) for n in v) if isinstance(v, Sequence) else int(v)
                 for v in values)


@dataclass(frozen=True)
class ExecutionContext:
    """Everything an engine may use besides the graph and the buffers.

    `stream` is resolved from `handle` by the router (None = the framework's default
    stream). `workspace` is the caller's scratch buffer (None when none was passed).
    Overrides (dynamic shapes): `override_uids[i]` takes dims `override_shapes[i]` and
    strides `override_strides[i]` for this call only.
    """
    handle: Any = None
    stream: Any = None
    workspace: Any = None
    override_uids: tuple[int, ...] | None = None
    override_shapes: tuple[tuple[int, ...], ...] | None = None
    override_strides: tuple[tuple[int, ...], ...] | None = None

    def __post_init__(self) -> None:
        if self.override_uids is None and self.override_shapes is None and self.override_strides is None:
            return  # every execute builds one: the common case normalises nothing
        uids = _as_tuple(self.override_uids, "override_uids")
        shapes = _as_tuple(self.override_shapes, "override_shapes")
        strides = _as_tuple(self.override_strides, "override_strides")
        lengths = {len(v) for v in (uids, shapes, strides) if v is not None}
        if len(lengths) > 1:
            raise ValueError("ExecutionContext: override_uids, override_shapes and "
                             "override_strides must have equal lengths, got "
                             f"{[None if v is None else len(v) for v in (uids, shapes, strides)]}")
        if uids is None and (shapes is not None or strides is not None):
            raise ValueError("ExecutionContext: override_shapes/override_strides need "
                             "override_uids naming the tensors they change")
        object.__setattr__(self, "override_uids", uids)
        object.__setattr__(self, "override_shapes", shapes)
        object.__setattr__(self, "override_strides", strides)

    @property
    def has_overrides(self) -> bool:
        return bool(self.override_uids)


@dataclass(frozen=True)
class DirectLaunch:
    """A plan's launch with every per-call check already done, for one buffer layout.

    What `CompiledPlan.direct_launch` returns. The caller owes each call of `launch`
    buffers (in `uids` order) with the dims, strides, dtype and device the graph declares
    for those uids, each base address equal to `alignment` modulo 16, on the device that
    is current; it passes a workspace of at least the plan's size (or None when that is
    0) and the raw CUDA stream handle (an int; 0 for CPU). Nothing is checked again: a
    buffer outside that contract is undefined behaviour, so callers key their own cache
    on exactly these properties and fall back to `execute` otherwise. With
    `takes_addresses`, `launch` receives each buffer's base address (an int) instead of
    the buffer: the caller reads them anyway to check the alignment.
    """
    uids: tuple[int, ...]
    alignment: tuple[int, ...]
    launch: Callable[[Sequence[Any], Any, int], None]
    takes_addresses: bool = False


class CompiledPlan(ABC):
    """A built plan. Per-call state must not live on it: two threads may execute one
    plan at once with different buffers."""

    def get_workspace_size(self) -> int:
        """Bytes of `ctx.workspace` that `execute` needs."""
        return 0

    def direct_launch(self, graph: pygraph, data: Mapping[int, Any]) -> DirectLaunch | None:
        """Optional fast path: after an `execute` with `data` ({uid: buffer}) returned, a
        DirectLaunch that repeats it for buffers laid out like these (None: not offered,
        the default). Plans whose execute re-derives nothing per call gain nothing."""
        return None

    @abstractmethod
    def execute(self, graph: pygraph, data: Mapping[int, Any], ctx: ExecutionContext) -> None:
        """Write results into the caller's output buffers, on `ctx.stream`."""


class EagerPlan(CompiledPlan):
    """The default compiled plan: delegates to the engine's eager hooks."""

    def __init__(self, engine: BaseEngine, plan: PlanConfig) -> None:
        self.engine = engine
        self.plan = plan

    def get_workspace_size(self) -> int:
        return self.engine.get_workspace_size()

    def execute(self, graph: pygraph, data: Mapping[int, Any], ctx: ExecutionContext) -> None:
        self.engine.execute(graph, data, ctx)

    def __repr__(self) -> str:
        return f"EagerPlan({self.engine!r}, {self.plan!r})"


class BaseEngine:
    #: stable, append-only identifier; plan names derive from it.
    name: ClassVar[str] = "base"
    #: set on the instance by the manifest or register_backend; None is rejected.
    engine_id: int | None = None
    #: out-of-tree engines may own a block [engine_id, id_end); None = just engine_id.
    id_end: int | None = None
    #: knobs of the default propose_plans().
    default_knobs: Any = None
    behavior_notes: tuple[Any, ...] = ()
    numerical_notes: tuple[Any, ...] = ()

    # -- identity --------------------------------------------------------------------
    def require_id(self) -> int:
        if self.engine_id is None:
            raise ValueError(f"engine '{self.name}' has no engine_id (engines get theirs from "
                             "the manifest or register_backend)")
        return as_engine_id(self.engine_id, f"engine '{self.name}'")

    def owned_ids(self) -> range:
        first = self.require_id()
        end = first + 1 if self.id_end is None else as_engine_id(self.id_end, self.name)
        if end <= first:
            raise ValueError(f"engine '{self.name}': id_end {end} must exceed engine_id {first}")
        return range(first, end)

    def owns_id(self, engine_id: int) -> bool:
        return engine_id in self.owned_ids()

    # -- planning ----------------------------------------------------------------------
    def check_support(self, graph: pygraph) -> None:
        """Raise NotImplementedError / cudnnGraphNotSupportedError to decline."""

    def propose_plans(self, graph: pygraph) -> list[PlanConfig]:
        """The configs to rank for `graph` (several knob configs are welcome)."""
        self.check_support(graph)
        return [PlanConfig(self.require_id(), self.default_knobs)]

    def build_plan(self, graph: pygraph, plan: PlanConfig,
                   ctx: ExecutionContext | None = None) -> CompiledPlan:
        """Compile `plan` for `graph` (may decline like check_support)."""
        return EagerPlan(self, plan)

    def predict_time(self, graph: pygraph, plan: PlanConfig) -> float | None:
        """Optional cost model: predicted seconds of one `execute` of `plan` on `graph`.

        Read only what planning knows (the graph's dims, dtypes, attributes and its
        handle's device); touch no buffer and launch nothing: it runs on every planning.
        None (the default) means "no model": the plan keeps its claim order after the
        plans that have a prediction. A decline type raised here also means None.
        `predict_source` names the model in explanations.
        """
        return None

    #: where this engine's predictions come from, as explain_plans() shows it.
    predict_source: str = ""

    # -- eager hooks -------------------------------------------------------------------
    def get_workspace_size(self) -> int:
        return 0

    def execute(self, graph: pygraph, data: Mapping[int, Any], ctx: ExecutionContext) -> None:
        raise NotImplementedError(f"engine '{self.name}' must implement execute() or "
                                  "build_plan()")

    # -- knobs -------------------------------------------------------------------------
    def knobs_to_public(self, knobs: Any) -> dict[Any, int]:
        """Native knobs as `{cudnn.knob_type (or int): int}` (autotune records)."""
        if knobs is None:
            return {}
        if isinstance(knobs, Mapping):
            return dict(knobs)
        raise TypeError(f"engine '{self.name}' has knobs of type {type(knobs).__name__}; "
                        "it must override knobs_to_public()")

    def knobs_from_public(self, public: Mapping[Any, int]) -> Any:
        """Inverse of knobs_to_public (replay of a recorded plan)."""
        return dict(public) if public else None

    def plan_name(self, plan: PlanConfig) -> str:
        public = self.knobs_to_public(plan.knobs)
        return self.name if not public else f"{self.name}[{public_knobs_repr(public)}]"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, engine_id={self.engine_id!r})"


def public_knobs_repr(public: Mapping[Any, int]) -> str:
    """'NAME=v, NAME2=w', sorted by knob name."""
    def label(key: Any) -> str:
        if isinstance(key, knob_type):
            return key.name
        try:
            return knob_type(key).name
        except ValueError:
            return str(key)
    return ", ".join(f"{name}={value}" for name, value in
                     sorted((label(k), v) for k, v in public.items()))


__all__ = [
    "DECLINE_TYPES", "BaseEngine", "CompiledPlan", "DirectLaunch", "EagerPlan",
    "ExecutionContext", "NodeBuffers", "PlanConfig", "is_decline", "public_knobs_repr", "resolve_node_buffers",
]
