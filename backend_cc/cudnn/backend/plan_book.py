"""`PlanBook`: the router entries of one lowered graph, made from its own plan list.

The backend_graph keeps one growing list of engine configs (indices never move); every
router entry of a backend plan points into it by `cpp_index`. The book:
- asks cuDNN's heuristics one mode at a time, each mode at most once per graph (a second
  query would append duplicates), remembering which indices each mode added;
- turns the requested modes into entries, in mode order, deduplicated by (engine id,
  knobs) with the first index kept. Modes: the requested ones, or (A, FALLBACK) when none
  were; OPENSOURCE is not a cuDNN heuristic and asks for the delegating entry instead;
- puts the delegating entry (BACKEND_HEURISTIC_ENGINE_ID, no cpp_index) first when
  OPENSOURCE was requested, or when the modes answered but proposed nothing. Building it
  asks A and FALLBACK (if not asked yet) and builds the first config that builds.
A mode cuDNN declines is skipped; when every requested mode declines, the last decline is
raised (the backend declines the graph).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cudnn.engines import engine_ids
from cudnn.engines.base import PlanConfig
from cudnn.ops.enums import heur_mode
from cudnn.ops.errors import cudnnGraphNotSupportedError

DEFAULT_MODES = (heur_mode.A, heur_mode.FALLBACK)
#: cuDNN's support checks drop engine configs without a word in the error text; its debug
#: log has the reason for each one (layout, graph pattern, architecture, ...).
CUDNN_LOG_HINT = ("cuDNN logs its reason for every engine config it rejects when the process "
                  "runs with CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=stderr")
#: what the delegating entry consults, in order, when it is built.
DELEGATE_MODES = (heur_mode.A, heur_mode.FALLBACK)


class PlanBook:
    def __init__(self, backend: Any) -> None:
        self.backend = backend
        #: heur_mode -> indices it added ([] when it proposed nothing or declined)
        self.spans: dict[heur_mode, tuple[int, ...]] = {}
        self.declines: dict[heur_mode, str] = {}
        self._entries: list[PlanConfig] | None = None
        self._delegated: int | None = None

    def query(self, mode: heur_mode) -> tuple[int, ...]:
        if mode not in self.spans:
            try:
                created = tuple(self.backend.create_execution_plans([int(mode)]))
            except cudnnGraphNotSupportedError as exc:
                self.declines[mode] = f"heur_mode {mode.name}: {exc}"
                created = ()
            self.spans[mode] = created
        return self.spans[mode]

    def entry_at(self, index: int) -> PlanConfig:
        engine_id, knobs = self.backend.get_engine_and_knobs_at_index(index)
        if not engine_ids.is_backend_engine(int(engine_id)):
            raise ValueError(f"backend plan {index} reports engine id {engine_id}, outside the "
                             f"backend range [0, {engine_ids.CPP_OSS_ENGINE_ID_BASE})")
        return PlanConfig(int(engine_id), dict(sorted(knobs.items())), cpp_index=index)

    def entries(self, heuristics: Iterable[heur_mode]) -> list[PlanConfig]:
        """The entries for the requested modes; computed once, later calls get the same list
        (whatever they ask: the backend's answer is per graph)."""
        if self._entries is None:
            self._entries = self._make_entries(tuple(heuristics))
        return self._entries

    def _make_entries(self, requested: tuple[heur_mode, ...]) -> list[PlanConfig]:
        modes = list(dict.fromkeys(requested or DEFAULT_MODES))
        delegate = heur_mode.OPENSOURCE in modes
        concrete = [m for m in modes if m is not heur_mode.OPENSOURCE]
        entries: list[PlanConfig] = []
        seen: set[tuple[int, tuple[tuple[int, int], ...]]] = set()
        for mode in concrete:
            for index in self.query(mode):
                entry = self.entry_at(index)
                key = (entry.engine_id, tuple(entry.knobs.items()))
                if key not in seen:
                    seen.add(key)
                    entries.append(entry)
        if concrete and all(m in self.declines for m in concrete):
            raise cudnnGraphNotSupportedError(self.declines[concrete[-1]])
        if delegate or not entries:
            entries.insert(0, PlanConfig(engine_ids.BACKEND_HEURISTIC_ENGINE_ID))
        return entries

    def delegated_index(self) -> int:
        """The backend index the delegating entry runs: the first config that builds."""
        if self._delegated is None:
            for mode in DELEGATE_MODES:
                self.query(mode)
            failures = []
            for index in range(self.backend.get_execution_plan_count()):
                try:
                    self.backend.check_support_at_index(index)
                except cudnnGraphNotSupportedError as exc:
                    failures.append(f"[{index}] {self.backend.get_plan_name_at_index(index)}: "
                                    f"{exc}")
                    continue
                self._delegated = index
                break
            else:
                asked = ", ".join(m.name for m in self.spans)
                parts = failures or [f"cuDNN proposed no engine config (heur modes {asked}; "
                                     "its heuristics leave out the configs it cannot run)"]
                raise cudnnGraphNotSupportedError(
                    "the delegating backend entry found no engine config that builds: "
                    + "; ".join([*parts, *self.declines.values(), CUDNN_LOG_HINT]))
        return self._delegated
