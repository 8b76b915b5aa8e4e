"""Autotuning: time every plan of a graph, select the fastest, remember the winner.

`graph.autotune(data=None, workspace=None, handle=None, **options)` (or
`graph.build_plans(policy=Autotune(...))`):
1. plans the graph if needed, then builds every entry of the plan list that builds
   (entries barred by the user's filters are skipped; a build decline or a workspace over
   the limit is recorded);
2. times each built plan on the caller's buffers (`data`, a variant pack as execute()
   takes) or, for tensors the caller left out, generated ones: `warmup` runs, then `reps`
   timed runs (CUDA events on a GPU, a host clock elsewhere, or the `timer` given);
   the plan's time is the median. A decline while executing skips the plan; any other
   exception also skips it, with a warning (a tuning run must not die of one bad plan);
3. selects the fastest (a tie goes to the earlier entry: the cost model's order) as
   build_plans() would select the first that builds (not pinned);
4. writes a record (autotune_cache.py) keyed by the graph's signature, the device's name
   and SM, and the library version, naming the winner by `(engine_id, public knobs)`.
Planning a graph with the same key later (in any process) finds the record: the
recorded winner moves to the front of the plan list without timing, and explain_plans()
says so. A record is used only if every plan of the new list was among the timed ones
and the winner is in it; otherwise it is stale and ignored with a warning.

Seams for machines without a GPU and for tests: `timer` (anything with
`time(run, warmup, reps) -> [seconds]`; `ClockTimer(clock)` takes an injected clock),
`device` (a DeviceId), `cache` (a folder, an AutotuneCache, or False). The torch side
(CUDA events, device names, generated buffers) is reached by module path, like the
backend adapter: `RUNTIME_MODULE`, imported only when timing or when torch is already
loaded, so the router imports no framework.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cudnn.engines.autotune_cache import (AutotuneCache, AutotuneCacheWarning, CacheKey,
                                          DeviceId, PlanKey, Record, cache_for,
                                          default_cache, now)
from cudnn.engines.base import DECLINE_TYPES, ExecutionContext, PlanConfig
from cudnn.engines.cost_model import MEASURED, RECORDED, Estimate, set_estimate
from cudnn.engines.planning_state import router_state
from cudnn.ops.errors import cudnnGraphNotSupportedError

if TYPE_CHECKING:
    from cudnn import pygraph

#: the torch side of autotuning (device identity, CUDA-event timer, generated buffers)
RUNTIME_MODULE = "cudnn.linear_attention.common.autotune_runtime"
#: the distribution whose version keys the records
DISTRIBUTION = "cudnn-pygraph"

__all__ = ["Autotune", "AutotuneCache", "AutotuneCacheWarning", "AutotuneReport",
           "ClockTimer", "DeviceId", "Trial", "autotune", "graph_signature",
           "library_version", "recorded_winner"]


# -- policy and timers --------------------------------------------------------------------
class ClockTimer:
    """Times `run` with a host clock (`time.perf_counter` unless injected); `sync()` (if
    given) is called after the warm-up and after each run, before the clock is read."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter,
                 sync: Callable[[], None] | None = None) -> None:
        self.clock = clock
        self.sync = sync

    def time(self, run: Callable[[], None], warmup: int, reps: int) -> list[float]:
        for _ in range(warmup):
            run()
        if self.sync is not None:
            self.sync()
        samples = []
        for _ in range(reps):
            t0 = self.clock()
            run()
            if self.sync is not None:
                self.sync()
            samples.append(self.clock() - t0)
        return samples

    def __repr__(self) -> str:
        return f"ClockTimer({getattr(self.clock, '__name__', self.clock)!r})"


@dataclass(frozen=True)
class Autotune:
    """An autotune policy for `build_plans(policy=...)` / `graph.autotune(**fields)`."""
    warmup: int = 3
    reps: int = 10
    #: `time(run, warmup, reps) -> [seconds]`; None: CUDA events on a GPU, else ClockTimer.
    timer: Any = None
    #: True: the default cache (autotune_cache.default_directory); False/None: none;
    #: a folder path or an AutotuneCache.
    cache: Any = True
    #: the device the timings belong to; None: from the graph's handle / the runtime.
    device: DeviceId | None = None

    def __post_init__(self) -> None:
        for name in ("warmup", "reps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"Autotune: {name} must be an int >= 0, got {value!r}")
        if self.reps < 1:
            raise ValueError("Autotune: reps must be >= 1 (the median needs a sample)")
        if self.timer is not None and not callable(getattr(self.timer, "time", None)):
            raise TypeError(f"Autotune: timer {self.timer!r} has no time(run, warmup, reps)")

    def resolved_cache(self) -> AutotuneCache | None:
        if self.cache is True:
            return default_cache()
        if self.cache is False or self.cache is None:
            return None
        if isinstance(self.cache, AutotuneCache):
            return self.cache
        return cache_for(self.cache)


@dataclass(frozen=True)
class Trial:
    """One entry of the plan list in an autotune run."""
    index: int
    name: str
    status: str                   # "timed", "barred", "declined", "failed"
    seconds: float | None = None  # the median, when timed
    reason: str | None = None
    samples: tuple[float, ...] = ()


@dataclass(frozen=True)
class AutotuneReport:
    """What autotuning did for one graph: measured here, or a recorded winner applied."""
    kind: str                      # "measured" or "recorded"
    winner: int | None             # plan-list index of the winner
    trials: tuple[Trial, ...] = ()
    #: the record's file (written or read), None when no cache was used
    cache_path: str | None = None
    note: str = ""

    def render_lines(self) -> list[str]:
        if self.kind == "recorded":
            return [f"autotune: recorded winner at rank {self.winner}, selected without "
                    f"timing ({self.note}; {self.cache_path})"]
        lines = [f"autotune: measured {sum(t.status == 'timed' for t in self.trials)} of "
                 f"{len(self.trials)} plans in this process, selected {self.winner}"
                 + (f"; {self.note}" if self.note else "")]
        for t in self.trials:
            what = (f"{t.seconds * 1e3:.3f} ms (median of {len(t.samples)})"
                    if t.status == "timed" else f"{t.status}: {t.reason}")
            lines.append(f"  [{t.index}] {t.name}: {what}")
        return lines


# -- keys -----------------------------------------------------------------------------------
_LIBRARY_VERSION: str | None = None


def library_version() -> str:
    """The installed distribution's version, else "source" (a checkout)."""
    global _LIBRARY_VERSION
    if _LIBRARY_VERSION is None:
        import cudnn
        version = getattr(cudnn, "__version__", None)
        if not version:
            try:
                from importlib import metadata
                version = metadata.version(DISTRIBUTION)
            except Exception:  # noqa: BLE001 - not installed, or broken metadata
                version = "source"
        _LIBRARY_VERSION = str(version)
    return _LIBRARY_VERSION


def graph_signature(graph: pygraph) -> str:
    """A hash of what decides which plan is fastest: per node its op, attributes and
    compute dtype; per tensor (numbered by first use) dims, strides, dtype, virtual,
    by-value, ragged offset; the graph's default dtypes. Names and uids are left out."""
    numbers: dict[int, int] = {}
    parts: list[str] = []

    def tensor_no(t: Any) -> int:
        n = numbers.get(id(t))
        if n is None:
            n = numbers[id(t)] = len(numbers)
            offset = t.ragged_offset
            parts.append(f"T{n}:{tuple(t.dim)}:{tuple(t.stride)}:{_dt(t.data_type)}:"
                         f"{int(t.is_virtual)}{int(t.is_pass_by_value)}:"
                         f"{'-' if offset is None else tensor_no(offset)}")
        return n

    ctx = graph.context
    parts.append(f"G:{_dt(ctx.io_data_type)}:{_dt(ctx.intermediate_data_type)}:"
                 f"{_dt(ctx.compute_data_type)}")
    for node in graph.nodes:
        ins = ",".join(f"{p}={tensor_no(t)}" for p, t in sorted(node.inputs.items()))
        outs = ",".join(f"{p}={tensor_no(t)}" for p, t in sorted(node.outputs.items()))
        params = ",".join(f"{k}={v!r}" for k, v in sorted(node.params.items()))
        parts.append(f"N:{node.spec.name}:{_dt(node.compute_data_type)}:{ins}:{outs}:{params}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _dt(dt: Any) -> str:
    return "-" if dt is None else getattr(dt, "name", str(dt))


def _runtime(load: bool) -> Any:
    """The torch runtime module; with load=False only when torch is already imported."""
    if not load and "torch" not in sys.modules:
        return None
    try:
        return importlib.import_module(RUNTIME_MODULE)
    except ImportError:
        return None


def device_identity(graph: pygraph, ctx: ExecutionContext | None = None,
                    load: bool = False) -> DeviceId | None:
    """The device of this graph's plans: the handle's `device_identity()`, else the
    runtime's answer for the handle (None: unknown, then nothing is looked up or
    recorded)."""
    handle = ctx.handle if ctx is not None and ctx.handle is not None else graph.handle
    own = getattr(handle, "device_identity", None)
    found = own() if callable(own) else None
    if found is None:
        runtime = _runtime(load)
        found = None if runtime is None else runtime.device_identity(handle)
    if found is None or isinstance(found, DeviceId):
        return found
    name, sm = found
    return DeviceId(str(name), int(sm))


def _knobs_key(public: Mapping[Any, int]) -> tuple[tuple[str, int], ...]:
    def label(key: Any) -> str:
        return getattr(key, "name", None) or str(int(key))
    return tuple(sorted((label(k), int(v)) for k, v in public.items()))


def plan_key(graph: pygraph, plan: PlanConfig) -> PlanKey:
    from cudnn.engines.plan_sources import source_of
    source = source_of(graph, plan)
    try:
        knobs: tuple[tuple[str, int], ...] | None = _knobs_key(source.public_knobs(graph, plan))
    except (NotImplementedError, TypeError):
        knobs = None
    return PlanKey(plan.engine_id, knobs, source.plan_name(graph, plan))


# -- planning: the recorded winner -----------------------------------------------------------
def recorded_winner(graph: pygraph, plans: list[PlanConfig]) -> list[PlanConfig]:
    """`plans` with the recorded winner first when this graph's key has a usable record
    (see the module docstring); the list unchanged otherwise."""
    if len(plans) < 2:
        return plans
    cache = default_cache()
    if cache is None:
        return plans
    try:
        device = device_identity(graph)
    except Exception as exc:  # noqa: BLE001 - a failing probe must not fail planning
        warnings.warn(f"autotune cache: not consulted, the device is unknown "
                      f"({type(exc).__name__}: {exc})", AutotuneCacheWarning, stacklevel=2)
        return plans
    if device is None:
        return plans
    key = CacheKey(graph_signature(graph), device, library_version())
    record = cache.load(key)
    if record is None:
        return plans
    keys = [plan_key(graph, p) for p in plans]
    tried = set(record.tried)
    untried = [k.name for k in keys if k not in tried]
    if record.winner not in keys or untried:
        why = (f"plans {untried} were not tried when it was made" if untried
               else f"its winner {record.winner.name} is not in the plan list")
        warnings.warn(f"autotune cache: ignoring the stale record {cache.path_of(key)}: "
                      f"{why}", AutotuneCacheWarning, stacklevel=2)
        return plans
    index = keys.index(record.winner)
    winner = plans[index]
    out = [winner, *plans[:index], *plans[index + 1:]]
    set_estimate(graph, winner, Estimate(record.winner_seconds(), RECORDED))
    router_state(graph).autotune = AutotuneReport(
        "recorded", 0, cache_path=str(cache.path_of(key)),
        note=f"{record.winner.name} measured fastest of {len(record.measured)} on "
             f"{device.name} (SM {device.sm})")
    return out


# -- tuning ------------------------------------------------------------------------------------
def autotune(graph: pygraph, policy: Autotune | None = None, data: Any = None,
             workspace: Any = None, ctx: ExecutionContext | None = None,
             tensor_uids: Any = None) -> AutotuneReport:
    """Time every plan that builds, select the fastest, record it (module docstring).
    Holds the graph's planning lock: threads sharing a graph plan it once and never
    interleave their selections."""
    with graph.lifecycle.planning.lock:
        return _autotune(graph, policy, data, workspace, ctx, tensor_uids)


def _autotune(graph: pygraph, policy: Autotune | None, data: Any, workspace: Any,
              ctx: ExecutionContext | None, tensor_uids: Any) -> AutotuneReport:
    from cudnn.engines.plan_filters import barred_reason, check_workspace_limit
    from cudnn.engines.plan_list import compiled_plan, plan_name_at, workspace_size_of
    from cudnn.engines.planning import plan_graph
    from cudnn.engines.variant_pack import make_context, normalize_variant_pack

    policy = Autotune() if policy is None else policy
    if not graph.lifecycle.state.planned:
        plan_graph(graph)
    ctx = make_context(graph) if ctx is None else ctx
    runtime = None
    timer = policy.timer
    if timer is None:
        runtime = _runtime(load=True)
        if runtime is None:
            raise RuntimeError("autotune: no timer was given and the torch runtime "
                               f"({RUNTIME_MODULE}) cannot be imported")
        timer = runtime.make_timer(graph, ctx)
    pack = normalize_variant_pack(graph, data, tensor_uids)
    missing = [t.uid for t in graph.all_tensors()
               if not t.is_virtual and not t.is_pass_by_value and t.uid not in pack]
    if missing:
        runtime = runtime or _runtime(load=True)
        if runtime is None:
            raise ValueError(f"autotune: no buffers for uids {missing} and no runtime to "
                             "generate them: pass them in data")
        pack.update(runtime.generated_buffers(graph, missing, ctx))
    planning = graph.lifecycle.planning
    trials: list[Trial] = []
    for index in range(len(planning.plans)):
        name = plan_name_at(graph, index)
        barred = barred_reason(graph, index)
        if barred is not None:
            trials.append(Trial(index, name, "barred", reason=barred))
            continue
        try:
            compiled = compiled_plan(graph, index, ctx)
            size = workspace_size_of(compiled, ctx)
            check_workspace_limit(graph, index, size)
        except DECLINE_TYPES as exc:
            trials.append(Trial(index, name, "declined", reason=f"{type(exc).__name__}: {exc}"))
            continue
        scratch = workspace
        if size and not _big_enough(workspace, size):
            runtime = runtime or _runtime(load=True)
            if runtime is None:
                trials.append(Trial(index, name, "declined",
                                    reason=f"needs {size} bytes of workspace and none was "
                                           "given"))
                continue
            scratch = runtime.workspace(size, graph, ctx)
        run_ctx = dataclasses.replace(ctx, workspace=scratch if size else workspace)
        trials.append(_time_one(graph, index, name, compiled, pack, run_ctx, timer, policy))
    timed = [t for t in trials if t.status == "timed"]
    if not timed:
        raise cudnnGraphNotSupportedError(
            "autotune: no plan could be timed: "
            + "; ".join(f"[{t.index}] {t.name}: {t.status}: {t.reason}" for t in trials))
    best = min(timed, key=lambda t: (t.seconds, t.index))
    planning.selected_index = best.index
    planning.pinned = False
    graph.lifecycle.mark_built()
    for t in timed:
        set_estimate(graph, planning.plans[t.index], Estimate(t.seconds, MEASURED))
    path, note = _record(graph, policy, ctx, trials, best)
    report = AutotuneReport("measured", best.index, tuple(trials), path, note)
    router_state(graph).autotune = report
    return report


def _big_enough(workspace: Any, size: int) -> bool:
    if workspace is None:
        return False
    from cudnn.engines.variant_pack import buffer_bytes
    nbytes = buffer_bytes(workspace)
    return nbytes is None or nbytes >= size  # a raw address is taken on trust


def _time_one(graph: pygraph, index: int, name: str, compiled: Any, pack: dict[int, Any],
              ctx: ExecutionContext, timer: Any, policy: Autotune) -> Trial:
    def run() -> None:
        compiled.execute(graph, pack, ctx)
    try:
        samples = [float(s) for s in timer.time(run, policy.warmup, policy.reps)]
    except DECLINE_TYPES as exc:
        return Trial(index, name, "declined", reason=f"at execute: {type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001 - one failing plan must not end the tuning
        warnings.warn(f"autotune: plan [{index}] {name} failed and is skipped: "
                      f"{type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=3)
        return Trial(index, name, "failed", reason=f"{type(exc).__name__}: {exc}")
    if not samples:
        return Trial(index, name, "failed", reason="the timer returned no samples")
    return Trial(index, name, "timed", statistics.median(samples), samples=tuple(samples))


def _record(graph: pygraph, policy: Autotune, ctx: ExecutionContext, trials: list[Trial],
            best: Trial) -> tuple[str | None, str]:
    cache = policy.resolved_cache()
    if cache is None:
        return None, "not recorded (no cache)"
    device = policy.device or device_identity(graph, ctx, load=True)
    if device is None:
        return None, "not recorded (the device is unknown)"
    plans = graph.lifecycle.planning.plans
    tried = [t for t in trials if t.status != "barred"]
    keys = {t.index: plan_key(graph, plans[t.index]) for t in tried}
    if keys[best.index].knobs is None:
        return None, "not recorded (the winner has no replayable knobs)"
    key = CacheKey(graph_signature(graph), device, library_version())
    record = Record(key, keys[best.index],
                    tuple((keys[t.index], t.seconds) for t in tried if t.status == "timed"),
                    tuple(keys[t.index] for t in tried), now())
    path = cache.store(record)
    return str(path), f"recorded in {path}"
