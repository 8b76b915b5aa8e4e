"""The cost model behind heuristics_sort: python plans ranked by their engine's predicted
time, merged with the backend's entries in cuDNN's order; explain_plans() shows every
entry's time and its source."""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from cudnn.engines.manifest import register_backend  # noqa: E402
from tests.oracle.fake_backend import (FakeBackendAdapter, install_fake_backend,  # noqa: E402
                                       install_no_backend)
from tests.oracle.matmul_graphs import matmul_graph  # noqa: E402
from tests.oracle.torch_matmul_engine import TorchMatmulEngine  # noqa: E402
from tests.oracle.tuning_engines import PredictingMatmulEngine  # noqa: E402


@pytest.fixture(autouse=True)
def no_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDNN_AUTOTUNE_CACHE", str(tmp_path / "autotune"))


@pytest.fixture
def no_backend(monkeypatch):
    install_no_backend(monkeypatch)


def names(g):
    return [g.get_plan_name_at_index(i) for i in range(g.get_execution_plan_count())]


def test_python_plans_are_ranked_by_prediction(no_backend):
    engine = PredictingMatmulEngine({None: 3e-3, 16: 1e-3, 4: 2e-3})
    g, *_ = matmul_graph(k=32, engine=engine)
    g.create_execution_plans()
    assert [p.knobs.block_k for p in g.plans] == [16, 4, None]


def test_ties_keep_the_claim_order_and_unpredicted_plans_come_last(no_backend):
    first = PredictingMatmulEngine({None: None, 16: 2e-3, 4: 2e-3}, engine_id=30000)
    second = TorchMatmulEngine(engine_id=30100, block_ks=(8,))  # no model at all
    g, *_ = matmul_graph(k=32, engine=first)
    register_backend(g, second)
    g.create_execution_plans()
    assert [(p.engine_id, p.knobs.block_k) for p in g.plans] == [
        (30000, 16), (30000, 4), (30000, None), (30100, 8)]


def test_backend_entries_keep_cudnns_order_after_the_claiming_engines(monkeypatch):
    install_fake_backend(monkeypatch, FakeBackendAdapter(engine_ids=(7, 3)))
    g, *_ = matmul_graph(k=32, engine=PredictingMatmulEngine({None: 1e-3, 16: 5e-3, 4: 2e-3}))
    g.create_execution_plans()
    assert [p.engine_id for p in g.plans] == [30000, 30000, 30000, 7, 3]
    ex = g.explain_plans()
    assert [row.estimate.source for row in ex.plans[3:]] == ["cuDNN's order"] * 2
    text = ex.render()
    assert "predicted 1.000 ms (oracle table)" in text
    assert "time unknown (cuDNN's order)" in text


class PredictingBackend(FakeBackendAdapter):
    def __init__(self, times, **kw):
        super().__init__(**kw)
        self.times = times

    def predict_time(self, graph, plan):
        return self.times.get(plan.engine_id)


def test_backend_predictions_merge_without_reordering_the_backend(monkeypatch):
    # cuDNN says 7 before 3; 7 is predicted slower than 3 but stays first among the backend
    # entries: the merge interleaves the two runs, it never sorts cuDNN's list.
    install_fake_backend(monkeypatch, PredictingBackend({7: 1.5e-3, 3: 0.5e-3},
                                                        engine_ids=(7, 3)))
    g, *_ = matmul_graph(k=32, engine=PredictingMatmulEngine({None: 1e-3, 16: 2e-3, 4: 3e-3}))
    g.create_execution_plans()
    assert [(p.engine_id, getattr(p.knobs, "block_k", None)) for p in g.plans] == [
        (30000, None), (7, None), (3, None), (30000, 16), (30000, 4)]
    assert "predicted 0.500 ms (cuDNN backend model)" in g.explain_plans().render()


def test_a_declining_prediction_is_unknown_and_a_bad_one_is_a_bug(no_backend):
    g, *_ = matmul_graph(k=32, engine=PredictingMatmulEngine(
        {None: NotImplementedError("no model for this shape"), 16: 1e-3, 4: 2e-3}))
    g.create_execution_plans()
    assert [p.knobs.block_k for p in g.plans] == [16, 4, None]
    rows = g.explain_plans().plans
    assert rows[2].estimate.seconds is None and "no model" in rows[2].estimate.source
    for bad in (-1.0, math.nan, "fast", True):
        g, *_ = matmul_graph(k=32, engine=PredictingMatmulEngine({None: bad}))
        with pytest.raises(TypeError, match="predict_time must return"):
            g.create_execution_plans()


def test_the_seam_can_still_be_replaced(monkeypatch, no_backend):
    from cudnn.engines import heuristics
    monkeypatch.setattr(heuristics, "heuristics_sort",
                        lambda graph, py, backend: list(reversed([*py, *backend])))
    g, *_ = matmul_graph(k=32, engine=PredictingMatmulEngine({None: 1e-3, 16: 2e-3, 4: 3e-3}))
    g.create_execution_plans()
    assert [p.knobs.block_k for p in g.plans] == [4, 16, None]


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
