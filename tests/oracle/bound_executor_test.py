"""The bound executor (router bound_executor.py): a built graph's plan bound once, then
executed with uid-keyed packs, on the CPU oracle engine (numerics vs float64)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from cudnn.engines.bound_executor import bind_executor  # noqa: E402
from tests.oracle.fake_backend import install_no_backend  # noqa: E402
from tests.oracle.plan_contract_test import REL_BOUND, matmul_graph, operands, rel_error  # noqa: E402
from tests.oracle.torch_matmul_engine import TorchMatmulEngine  # noqa: E402


@pytest.fixture(autouse=True)
def no_backend(monkeypatch):
    install_no_backend(monkeypatch)


def built_graph(block_k):
    g, a, b, c = matmul_graph(engine=TorchMatmulEngine(block_ks=(block_k,)))
    g.create_execution_plans()
    g.build_plans()
    return g, a, b, c


@pytest.mark.parametrize("block_k", [None, 4], ids=["no_workspace", "workspace"])
def test_bound_executor_matches_graph_execute_on_fresh_inputs(block_k):
    g, a, b, c = built_graph(block_k)
    run = bind_executor(g)
    assert run.workspace_size == g.get_workspace_size()
    assert run.plan_name == g.get_plan_name_at_index(g.lifecycle.planning.selected_index)
    for seed in range(3):
        ta, tb, tc = operands(a, b, c, torch.float32, seed=seed)
        ws = torch.empty(max(run.workspace_size, 1), dtype=torch.uint8)
        run({a.uid: ta, b.uid: tb, c.uid: tc}, ws)
        assert rel_error(tc, ta, tb) < REL_BOUND[torch.float32]
        expected = torch.full_like(tc, float("nan"))
        g.execute({a: ta, b: tb, c: expected}, ws)
        assert torch.equal(tc, expected)


def test_bound_executor_checks_workspace_and_uids():
    g, a, b, c = built_graph(4)
    run = bind_executor(g)
    ta, tb, tc = operands(a, b, c, torch.float32, seed=0)
    small = torch.empty(run.workspace_size - 1, dtype=torch.uint8)
    with pytest.raises(ValueError, match=f"needs {run.workspace_size} bytes"):
        run({a.uid: ta, b.uid: tb, c.uid: tc}, small)
    with pytest.raises(ValueError, match="got none"):
        run({a.uid: ta, b.uid: tb, c.uid: tc}, None)
    ws = torch.empty(run.workspace_size, dtype=torch.uint8)
    stray = max(t.uid for t in g.all_tensors()) + 1
    with pytest.raises(KeyError, match=f"uids \\[{stray}\\]"):
        run({a.uid: ta, b.uid: tb, c.uid: tc, stray: tc}, ws)


def test_bind_executor_refuses_a_graph_that_is_not_built():
    g, *_ = matmul_graph(engine=TorchMatmulEngine(block_ks=(None,)))
    g.create_execution_plans()
    with pytest.raises(RuntimeError, match="not built yet"):
        bind_executor(g)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
