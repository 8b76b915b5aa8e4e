"""Ranking policy is pluggable at three levels (subclass, per graph, process-wide) and
through the heuristics seam; whatever a policy returns is checked before it is stored."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cudnn  # noqa: E402
from cudnn.engines import heuristics  # noqa: E402
from cudnn.engines import router as router_module  # noqa: E402
from cudnn.engines.base import PlanConfig  # noqa: E402
from cudnn.engines.manifest import register_backend  # noqa: E402
from cudnn.engines.router import Router  # noqa: E402
from tests.oracle.fake_backend import (FakeBackendAdapter, install_fake_backend,  # noqa: E402
                                       install_no_backend)
from tests.oracle.torch_matmul_engine import MatmulKnobs, TorchMatmulEngine  # noqa: E402

D = cudnn.data_type


@pytest.fixture(autouse=True)
def no_backend(monkeypatch):
    install_no_backend(monkeypatch)


def graph(*engines, **graph_kw):
    g = cudnn.pygraph(io_data_type=D.FLOAT, compute_data_type=D.FLOAT, **graph_kw)
    a = g.tensor([3, 8], data_type=D.FLOAT, name="A")
    b = g.tensor([8, 2], data_type=D.FLOAT, name="B")
    g.matmul(a, b, name="mm").set_output(True)
    for engine in engines:
        register_backend(g, engine)
    return g


def two_engines():
    return (TorchMatmulEngine(engine_id=30000, block_ks=(None, 4)),
            TorchMatmulEngine(engine_id=30100, block_ks=(2,)))


class Reversed(Router):
    def plan(self, graph, engines):
        return list(reversed(super().plan(graph, engines)))


class OnlyLast(Router):
    def python_plans(self, graph, engines):
        return super().python_plans(graph, engines)[-1:]


def ids_and_knobs(g):
    return [(p.engine_id, p.knobs.block_k) for p in g.plans]


def test_default_policy_keeps_candidate_order():
    g = graph(*two_engines())
    g.create_execution_plans()
    assert ids_and_knobs(g) == [(30000, None), (30000, 4), (30100, 2)]


def test_subclass_overriding_plan_reorders_the_list():
    g = graph(*two_engines(), router=Reversed())
    g.create_execution_plans()
    assert ids_and_knobs(g) == [(30100, 2), (30000, 4), (30000, None)]


def test_subclass_overriding_python_plans_filters_the_list():
    g = graph(*two_engines(), router=OnlyLast())
    g.create_execution_plans()
    assert ids_and_knobs(g) == [(30100, 2)]


def test_per_graph_router_via_set_router_beats_the_default(monkeypatch):
    monkeypatch.setattr(router_module, "default_router", OnlyLast())
    g = graph(*two_engines())
    assert g.set_router(Reversed()) is g
    g.create_execution_plans()
    assert ids_and_knobs(g) == [(30100, 2), (30000, 4), (30000, None)]
    g2 = graph(*two_engines())
    g2.create_execution_plans()
    assert ids_and_knobs(g2) == [(30100, 2)]


def test_process_wide_default_router_is_read_at_planning_time(monkeypatch):
    g = graph(*two_engines())  # created before the default changes
    monkeypatch.setattr(router_module, "default_router", Reversed())
    g.create_execution_plans()
    assert ids_and_knobs(g)[0] == (30100, 2)


def test_heuristics_sort_is_the_ranking_seam(monkeypatch):
    adapter = install_fake_backend(monkeypatch, FakeBackendAdapter(engine_ids=(4,)))
    seen = []

    def backend_first(g, python_plans, backend_plans):
        seen.append((len(python_plans), len(backend_plans)))
        return [*backend_plans, *python_plans]

    monkeypatch.setattr(heuristics, "heuristics_sort", backend_first)
    g = graph(*two_engines())
    g.create_execution_plans()
    assert [p.engine_id for p in g.plans] == [4, 30000, 30000, 30100]
    assert seen == [(3, 1)] and adapter.calls == [("entries", ())]


class Inventing(Router):
    def __init__(self, entries):
        self.entries = entries

    def plan(self, graph, engines):
        return self.entries


@pytest.mark.parametrize("entries, error, match", [
    ([PlanConfig(30500, None)], ValueError, "python engine id 30500"),
    ([PlanConfig(12, None)], ValueError, "backend offers no plans"),
    (["not a plan"], TypeError, "expected PlanConfig"),
    ([], cudnn.cudnnGraphNotSupportedError, "no engine"),
])
def test_a_policy_cannot_invent_entries(entries, error, match):
    g = graph(TorchMatmulEngine(), router=Inventing(entries))
    with pytest.raises(error, match=match):
        g.create_execution_plans()
    assert not g.state.planned


def test_a_router_without_plan_is_rejected():
    g = graph(TorchMatmulEngine(), router=object())
    with pytest.raises(TypeError, match="no plan"):
        g.create_execution_plans()


def test_a_proposal_with_a_foreign_engine_id_is_rejected():
    class Foreign(TorchMatmulEngine):
        def propose_plans(self, graph):
            return [PlanConfig(30001, MatmulKnobs())]

    g = graph(Foreign())
    with pytest.raises(ValueError, match="foreign engine_id 30001"):
        g.create_execution_plans()


def test_an_engine_owning_a_block_may_propose_any_id_in_it():
    class Block(TorchMatmulEngine):
        id_end = 30010

        def propose_plans(self, graph):
            return [PlanConfig(30003, MatmulKnobs()), PlanConfig(30000, MatmulKnobs(4))]

    g = graph(Block())
    g.create_execution_plans()
    assert [p.engine_id for p in g.plans] == [30003, 30000]
    assert g.get_plan_name_at_index(0) == "matmul_torch_oracle[TILEK=0]"


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
