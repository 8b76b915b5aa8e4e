"""Which python engines exist: engine families and their slots, as data.

A family owns one id block (engine_ids.py) and is anchored on node types: a graph whose
anchored nodes all belong to one family is offered that family's engines, in slot order.
A slot names its engine by module path and class name; nothing is imported until a graph
of that family is planned. A module that cannot be imported (the engine or one of its
optional dependencies is not installed) makes that engine *absent*, with the reason kept
for the explainer and the "no plan" error; it never breaks planning. Any other failure
while importing or constructing an engine is a bug and propagates.

Slots are fixed forever: append new engines, never reorder or reuse a slot.
Out-of-tree engines join one graph through `register_backend(graph, engine)`, with ids
from OUT_OF_TREE_ID_BASE (30000) up.
"""
from __future__ import annotations

import importlib
import logging
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cudnn.engines import engine_ids
from cudnn.engines.base import BaseEngine
from cudnn.engines.planning_state import facts_for
from cudnn.ops.node_type import NodeType

if TYPE_CHECKING:
    from cudnn import pygraph

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EngineSlot:
    name: str          # manifest name, `<op>_<dsl>`; the engine class's `name`
    slot: int          # position in the family block: engine_id = family base + slot
    module: str        # import path of the engine module
    class_name: str    # `<Op><Dsl>Engine`


@dataclass(frozen=True)
class EngineFamily:
    name: str
    engine_id: int                 # block base
    anchors: frozenset[NodeType]   # node types that route a graph to this family
    engine_slots: tuple[EngineSlot, ...]

    @property
    def id_end(self) -> int:
        return self.engine_id + engine_ids.FAMILY_BLOCK

    @property
    def slots(self) -> dict[str, EngineSlot]:
        return {s.name: s for s in self.engine_slots}

    def owns(self, engine_id: int) -> bool:
        return self.engine_id <= engine_id < self.id_end

    def id_of(self, slot: EngineSlot) -> int:
        return self.engine_id + slot.slot


def _la_anchors(prefix: str) -> frozenset[NodeType]:
    return frozenset(NodeType[f"{prefix}{suffix}"]
                     for suffix in ("", "_BWD", "_SUMMARY", "_SUMMARY_BWD"))


_FROST = "cudnn.linear_attention.frost"
_CUTILE = "cudnn.linear_attention.cutile"

MANIFEST: tuple[EngineFamily, ...] = (
    EngineFamily("gdn", engine_ids.GDN_ID_BASE, _la_anchors("GDN"), (
        EngineSlot("gdn_frost", 0, f"{_FROST}.gdn_engine", "GdnFrostEngine"),
        EngineSlot("gdn_cutile", 1, f"{_CUTILE}.gdn_engine", "GdnCuTileEngine"),
        EngineSlot("gdn_summary_frost", 2, f"{_FROST}.gdn_summary_engine",
                   "GdnSummaryFrostEngine"),
        EngineSlot("gdn_frost_decode", 3, f"{_FROST}.decode_engine", "GdnFrostDecodeEngine"),
    )),
    EngineFamily("kda", engine_ids.KDA_ID_BASE, _la_anchors("KDA"), (
        EngineSlot("kda_frost", 0, f"{_FROST}.kda_engine", "KdaFrostEngine"),
        EngineSlot("kda_cutile", 1, f"{_CUTILE}.kda_engine", "KdaCuTileEngine"),
        EngineSlot("kda_summary_frost", 2, f"{_FROST}.kda_summary_engine",
                   "KdaSummaryFrostEngine"),
        EngineSlot("kda_frost_decode", 3, f"{_FROST}.decode_engine", "KdaFrostDecodeEngine"),
    )),
    EngineFamily("gdn2", engine_ids.GDN2_ID_BASE, _la_anchors("GDN2"), (
        EngineSlot("gdn2_frost", 0, f"{_FROST}.gdn2_engine", "Gdn2FrostEngine"),
        EngineSlot("gdn2_summary_frost", 1, f"{_FROST}.gdn2_summary_engine",
                   "Gdn2SummaryFrostEngine"),
        EngineSlot("gdn2_frost_decode", 2, f"{_FROST}.decode_engine", "Gdn2FrostDecodeEngine"),
    )),
)


def check_manifest(manifest: Iterable[EngineFamily]) -> None:
    """ValueError for a manifest that breaks the id rules (run at import and in tests)."""
    seen_names: set[str] = set()
    anchored: dict[NodeType, str] = {}
    for fam in manifest:
        if engine_ids.RESERVED_FAMILY_BLOCKS.get(fam.name) != fam.engine_id:
            raise ValueError(f"family '{fam.name}' must use its reserved block base "
                             f"{engine_ids.RESERVED_FAMILY_BLOCKS.get(fam.name)}, "
                             f"not {fam.engine_id}")
        slots = [s.slot for s in fam.engine_slots]
        if len(set(slots)) != len(slots) or any(not 0 <= s < engine_ids.FAMILY_BLOCK
                                                for s in slots):
            raise ValueError(f"family '{fam.name}': slots {slots} must be distinct and in "
                             f"[0, {engine_ids.FAMILY_BLOCK})")
        for s in fam.engine_slots:
            if s.name in seen_names:
                raise ValueError(f"engine name '{s.name}' appears twice in the manifest")
            seen_names.add(s.name)
        for node_type in fam.anchors:
            if node_type in anchored:
                raise ValueError(f"{node_type.name} anchors both '{anchored[node_type]}' "
                                 f"and '{fam.name}'")
            anchored[node_type] = fam.name


check_manifest(MANIFEST)


# -- families of a graph -------------------------------------------------------------
def families_of(graph: pygraph) -> list[EngineFamily]:
    types = {node.node_type for node in graph.nodes}
    return [fam for fam in MANIFEST if fam.anchors & types]


def family_for(graph: pygraph) -> EngineFamily | None:
    """The one family anchored by the graph's nodes; None for zero or several (memoized
    on a validated graph)."""
    found = facts_for(graph, families_of)
    return found[0] if len(found) == 1 else None


def family_of_id(engine_id: int) -> EngineFamily | None:
    return next((fam for fam in MANIFEST if fam.owns(engine_id)), None)


# -- lazy engine loading -------------------------------------------------------------
@dataclass(frozen=True)
class EngineAbsence:
    """A manifest engine that could not be loaded in this process, and why."""
    name: str
    engine_id: int
    reason: str


_LOADED: dict[tuple[str, str, str, int], BaseEngine | EngineAbsence] = {}


def clear_engine_cache() -> None:
    """Forget loaded engines and absences (tests; after installing a package)."""
    _LOADED.clear()


def load_engine(family: EngineFamily, slot: EngineSlot) -> BaseEngine | EngineAbsence:
    """The engine instance for `slot` (cached per process), or why it is absent."""
    key = (slot.module, slot.class_name, slot.name, family.id_of(slot))
    if key not in _LOADED:
        _LOADED[key] = _load(family, slot)
    return _LOADED[key]


def _load(family: EngineFamily, slot: EngineSlot) -> BaseEngine | EngineAbsence:
    engine_id = family.id_of(slot)
    try:
        module = importlib.import_module(slot.module)
        cls = getattr(module, slot.class_name, None)
        if cls is None:
            raise ImportError(f"module '{slot.module}' has no class '{slot.class_name}'")
        engine = cls()
    except ImportError as exc:
        reason = f"not installed: {type(exc).__name__}: {exc}"
        _log.info("engine %s (%d) is absent: %s", slot.name, engine_id, reason)
        return EngineAbsence(slot.name, engine_id, reason)
    if not isinstance(engine, BaseEngine):
        raise TypeError(f"manifest engine '{slot.name}': {slot.module}.{slot.class_name} "
                        "is not a cudnn.engines.base.BaseEngine")
    if engine.name != slot.name:
        raise ValueError(f"manifest engine '{slot.name}': class {slot.class_name} declares "
                         f"name '{engine.name}'")
    engine.engine_id = engine_id
    return engine


def manifest_engines(graph: pygraph) -> tuple[list[BaseEngine], list[EngineAbsence]]:
    """The graph's family engines that loaded (slot order), and the absent ones."""
    family = family_for(graph)
    engines: list[BaseEngine] = []
    absences: list[EngineAbsence] = []
    if family is None:
        return engines, absences
    for slot in sorted(family.engine_slots, key=lambda s: s.slot):
        loaded = load_engine(family, slot)
        (absences if isinstance(loaded, EngineAbsence) else engines).append(loaded)
    return engines, absences


def engine_for_id(engine_id: int) -> BaseEngine | None:
    """The manifest engine owning `engine_id` (replay on any graph), None if unknown or
    absent."""
    family = family_of_id(engine_id)
    if family is None:
        return None
    slot = next((s for s in family.engine_slots if family.id_of(s) == engine_id), None)
    if slot is None:
        return None
    loaded = load_engine(family, slot)
    return None if isinstance(loaded, EngineAbsence) else loaded


# -- out-of-tree engines ---------------------------------------------------------------
_REGISTERED: weakref.WeakKeyDictionary[pygraph, tuple[BaseEngine, ...]] = \
    weakref.WeakKeyDictionary()


def register_backend(graph: pygraph, engine: BaseEngine) -> pygraph:
    """Offer an out-of-tree python engine to `graph` (before planning).

    Rules: a BaseEngine with an int engine_id >= OUT_OF_TREE_ID_BASE, outside every
    in-tree family block; ids unique per graph and declared blocks disjoint.
    """
    if graph.lifecycle.state.planned:
        raise RuntimeError("register_backend() after create_execution_plans(): planning is "
                           "one-shot; register engines on a new graph before planning")
    if not isinstance(engine, BaseEngine):
        raise TypeError(f"register_backend: expected a cudnn.engines.base.BaseEngine, got "
                        f"{type(engine).__name__}")
    if engine.engine_id is None:
        raise ValueError(f"register_backend: engine '{engine.name}' has engine_id None; "
                         f"out-of-tree engines take ids from {engine_ids.OUT_OF_TREE_ID_BASE}")
    first = engine_ids.as_engine_id(engine.engine_id, f"register_backend('{engine.name}')")
    if first < engine_ids.PYTHON_ENGINE_ID_BASE:
        raise ValueError(f"register_backend: engine '{engine.name}' has engine_id {first}, "
                         f"which is not a python engine id (python ids start at "
                         f"{engine_ids.PYTHON_ENGINE_ID_BASE}; out-of-tree engines take ids "
                         f"from {engine_ids.OUT_OF_TREE_ID_BASE})")
    reserved = engine_ids.reserved_family_of(first)
    if reserved is not None:
        base = engine_ids.RESERVED_FAMILY_BLOCKS[reserved]
        raise ValueError(f"register_backend: engine_id {first} of engine '{engine.name}' lies "
                         f"in the block [{base}, {base + engine_ids.FAMILY_BLOCK}) the "
                         f"manifest reserves for '{reserved}'")
    if not engine_ids.is_out_of_tree_engine(first):
        raise ValueError(f"register_backend: engine_id {first} of engine '{engine.name}' is "
                         f"in the in-tree python range; out-of-tree engines take ids from "
                         f"{engine_ids.OUT_OF_TREE_ID_BASE}")
    ids = engine.owned_ids()
    current = _REGISTERED.get(graph, ())
    for other in current:
        if other.require_id() == first:
            raise ValueError(f"register_backend: engine_id {first} is already registered on "
                             f"this graph (engine '{other.name}')")
        theirs = other.owned_ids()
        if ids.start < theirs.stop and theirs.start < ids.stop:
            raise ValueError(f"register_backend: ids [{ids.start}, {ids.stop}) of engine "
                             f"'{engine.name}' overlap [{theirs.start}, {theirs.stop}) of "
                             f"engine '{other.name}'")
    _REGISTERED[graph] = (*current, engine)
    return graph


def registered_backends(graph: pygraph) -> tuple[BaseEngine, ...]:
    return _REGISTERED.get(graph, ())
