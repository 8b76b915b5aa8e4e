"""The explainer on a graph with both sides present: the oracle engine (three knob
configs, one of which a pinned index later refuses) and a fake backend with two entries."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cudnn  # noqa: E402
from cudnn.engines.manifest import register_backend  # noqa: E402
from tests.oracle.fake_backend import FakeBackendAdapter, install_fake_backend  # noqa: E402
from tests.oracle.torch_matmul_engine import TorchMatmulEngine  # noqa: E402

D = cudnn.data_type


class PickyOracle(TorchMatmulEngine):
    name = "matmul_picky_oracle"

    def check_support(self, graph):
        super().check_support(graph)
        raise NotImplementedError(f"{self.name}: only serves K >= 1024")


def test_explanation_lists_both_sides_with_ranks(monkeypatch):
    install_fake_backend(monkeypatch, FakeBackendAdapter(engine_ids=(7, 3)))
    g = cudnn.pygraph(name="explained", io_data_type=D.FLOAT, compute_data_type=D.FLOAT)
    a = g.tensor([4, 16], name="A")
    b = g.tensor([16, 8], name="B")
    g.matmul(a, b, name="mm").set_output(True)
    register_backend(g, TorchMatmulEngine(block_ks=(None, 8)))
    register_backend(g, PickyOracle(engine_id=30100))
    ex = g.explain_plans()
    oracle, picky = ex.engines
    assert (oracle.name, oracle.origin, oracle.status) == ("matmul_torch_oracle", "registered",
                                                           "claimed")
    assert [(p.rank, p.knobs) for p in oracle.proposed] == [
        (0, "MatmulKnobs(block_k=None)"), (1, "MatmulKnobs(block_k=8)")]
    assert picky.status == "declined" and "only serves K >= 1024" in picky.reason
    assert ex.backend.declined is None and ex.backend.ranks == (2, 3)
    assert [(p.name, p.side, p.cpp_index) for p in ex.plans] == [
        ("matmul_torch_oracle[TILEK=0]", "python", None),
        ("matmul_torch_oracle[TILEK=8]", "python", None),
        ("eng7", "backend", 0), ("eng3", "backend", 1)]
    text = ex.render()
    print(text)  # the README sample comes from this output (pytest -s)
    assert "backend: 2 entries, ranks 2, 3" in text
    assert "   3  eng3  [backend 3] cpp_index=1 knobs={'SPLIT_K': 1}" in text
    g.select_plan(1)
    assert "plan list (4 plans, selected 1):" in str(g.explain_plans())


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
