"""`graph.explain_plans()`: why the plan list of a graph looks the way it does.

For every candidate engine: claimed (with each proposed plan's knobs and its rank in the
list), declined (with the decline message) or absent (not installed, with the import
error); then the backend's answer (its entries and their ranks, or why it offered none)
and the plan list itself, each entry with its time and where it came from (an engine's
prediction, cuDNN's order, an autotune measurement or record), then what autotuning did.
An unplanned graph is planned first (which freezes it, as
`create_execution_plans()` would); if planning finds no plan, the explanation carries
that error instead of raising it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cudnn.engines import engine_ids, manifest
from cudnn.engines.backend_source import backend_answer
from cudnn.engines.autotune import AutotuneReport
from cudnn.engines.base import PlanConfig
from cudnn.engines.cost_model import Estimate, estimate_of
from cudnn.engines.plan_filters import barred_reason
from cudnn.engines.plan_list import plan_name_at
from cudnn.engines.planning import plan_graph
from cudnn.engines.planning_state import router_state
from cudnn.engines.router import candidate_engines, propose, router_for
from cudnn.ops.errors import cudnnGraphNotSupportedError

if TYPE_CHECKING:
    from cudnn import pygraph


@dataclass(frozen=True)
class ProposedPlan:
    rank: int | None      # position in the plan list; None when the router dropped it
    knobs: str


@dataclass(frozen=True)
class EngineRow:
    name: str
    engine_id: int | None
    origin: str           # "manifest", "registered" or "replayed"
    status: str           # "claimed", "declined", "absent" or "no plans"
    reason: str | None = None
    proposed: tuple[ProposedPlan, ...] = ()


@dataclass(frozen=True)
class BackendRow:
    declined: str | None
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class PlanRow:
    rank: int
    name: str
    engine_id: int
    side: str
    knobs: str
    cpp_index: int | None
    #: why the user's filters exclude this entry (plan_filters.py), or None.
    barred: str | None = None
    #: the entry's time and its source (cost_model.Estimate), None when not ranked here.
    estimate: Estimate | None = None


@dataclass(frozen=True)
class PlanExplanation:
    graph_name: str
    nodes: tuple[str, ...]
    node_types: tuple[str, ...]
    family: str | None
    router: str
    engines: tuple[EngineRow, ...]
    backend: BackendRow | None
    plans: tuple[PlanRow, ...]
    selected_index: int | None
    error: str | None
    #: what autotuning did (autotune.AutotuneReport), or None.
    autotune: AutotuneReport | None = None

    def render(self) -> str:
        lines = [f"graph '{self.graph_name}': {', '.join(self.nodes) or 'no nodes'}",
                 f"  family: {self.family or 'none'}; router: {self.router}"]
        lines.append(f"python engines ({len(self.engines)}):")
        for row in self.engines:
            ident = "-" if row.engine_id is None else str(row.engine_id)
            head = f"  {row.status:<9} {row.name} [{ident}, {row.origin}]"
            lines.append(head + (f": {row.reason}" if row.reason else ""))
            for p in row.proposed:
                rank = "unranked" if p.rank is None else f"rank {p.rank}"
                lines.append(f"              {rank:<9} knobs={p.knobs}")
        if not self.engines:
            kinds = "/".join(sorted(set(self.node_types)))
            lines.append(f"  (none: no engine family is anchored on {kinds or 'an empty graph'} "
                         "and no engine was registered on the graph)")
        if self.backend is not None:
            if self.backend.declined is not None:
                lines.append(f"backend: declined: {self.backend.declined}")
            else:
                ranks = ", ".join(map(str, self.backend.ranks)) or "none"
                lines.append(f"backend: {len(self.backend.ranks)} entries, ranks {ranks}")
        if self.error is not None and self.backend is None:  # validation refused the graph
            lines.append(f"plan list: none, the graph did not validate: {self.error}")
        elif self.error is not None:
            lines.append(f"plan list: empty ({self.error.split(':')[0]}: no engine proposed a "
                         "plan, for the reasons above)")
        else:
            lines.append(f"plan list ({len(self.plans)} plans, selected {self.selected_index}):")
            for row in self.plans:
                mark = "*" if row.rank == self.selected_index else " "
                cpp = "" if row.cpp_index is None else f" cpp_index={row.cpp_index}"
                barred = "" if row.barred is None else f"  ({row.barred})"
                lines.append(f"  {mark}{row.rank:>3}  {row.name}  [{row.side} "
                             f"{row.engine_id}]{cpp} knobs={row.knobs}{barred}")
                if row.estimate is not None:
                    lines.append(f"         {row.estimate.render()}")
        if self.autotune is not None:
            lines.extend(self.autotune.render_lines())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()


def explain(graph: pygraph) -> PlanExplanation:
    error = None
    if not graph.lifecycle.state.planned:
        try:
            plan_graph(graph)
        except cudnnGraphNotSupportedError as exc:
            error = f"{type(exc).__name__}: {exc}"
    nodes = tuple(f"{n.name} ({n.node_type.name})" for n in graph.nodes)
    node_types = tuple(n.node_type.name for n in graph.nodes)
    family = manifest.family_for(graph)
    state = graph.lifecycle.state
    if not state.validated:  # validation itself refused the graph
        return PlanExplanation(graph.name, nodes, node_types, None, repr(router_for(graph)), (),
                               None, (), None, error)
    plans = list(graph.lifecycle.planning.plans) if state.planned else []
    return PlanExplanation(
        graph_name=graph.name, nodes=nodes, node_types=node_types, family=None if family is None else family.name,
        router=repr(router_for(graph)), engines=tuple(_engine_rows(graph, plans)),
        backend=_backend_row(graph, plans), plans=tuple(_plan_rows(graph, plans)),
        selected_index=graph.lifecycle.planning.selected_index if state.planned else None,
        error=error, autotune=router_state(graph).autotune)


def _rank_of(plans: list[PlanConfig], plan: PlanConfig) -> int | None:
    for i, p in enumerate(plans):
        if p is plan:
            return i
    return next((i for i, p in enumerate(plans) if p == plan), None)


def _engine_rows(graph: pygraph, plans: list[PlanConfig]) -> list[EngineRow]:
    candidates = candidate_engines(graph)
    registered = set(map(id, manifest.registered_backends(graph)))
    rows = [EngineRow(a.name, a.engine_id, "manifest", "absent", a.reason)
            for a in candidates.absences]
    engines = [(e, "registered" if id(e) in registered else "manifest")
               for e in candidates.engines]
    engines += [(e, "replayed") for e in router_state(graph).replay_engines]
    for engine, origin in engines:
        proposal = propose(graph, engine)
        if proposal.declined is not None:
            rows.append(EngineRow(engine.name, engine.engine_id, origin, "declined",
                                  proposal.declined))
            continue
        proposed = tuple(ProposedPlan(_rank_of(plans, p), repr(p.knobs)) for p in proposal.plans)
        replayed = tuple(ProposedPlan(i, repr(p.knobs)) for i, p in enumerate(plans)
                         if origin == "replayed" and engine.owns_id(p.engine_id))
        status = "claimed" if proposed or replayed else "no plans"
        rows.append(EngineRow(engine.name, engine.engine_id, origin, status,
                              proposed=proposed or replayed))
    rows.sort(key=lambda r: -1 if r.engine_id is None else r.engine_id)
    return rows


def _backend_row(graph: pygraph, plans: list[PlanConfig]) -> BackendRow:
    answer = backend_answer(graph)
    ranks = tuple(i for i, p in enumerate(plans) if not engine_ids.is_python_engine(p.engine_id))
    return BackendRow(answer.declined, ranks)


def _plan_rows(graph: pygraph, plans: list[PlanConfig]) -> list[PlanRow]:
    return [PlanRow(i, plan_name_at(graph, i), p.engine_id, engine_ids.side_of(p.engine_id),
                    repr(p.knobs), p.cpp_index, barred_reason(graph, i), estimate_of(graph, p))
            for i, p in enumerate(plans)]
