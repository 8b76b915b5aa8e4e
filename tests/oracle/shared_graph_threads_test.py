"""One graph shared by threads: planned once, each plan built once, every result right.

Sixteen threads make the first `execute` of one unplanned graph at the same moment (a
barrier releases them); the engine's build is slow, so without the graph's planning lock
several threads would plan it and compile the same plan. CPU only (TorchMatmulEngine).
"""
from __future__ import annotations

import threading
import time

import pytest

torch = pytest.importorskip("torch")

from tests.oracle.fake_backend import install_no_backend  # noqa: E402
from tests.oracle.matmul_graphs import matmul_graph, operands, rel_error  # noqa: E402
from tests.oracle.torch_matmul_engine import MatmulKnobs, TorchMatmulEngine  # noqa: E402

THREADS = 16


class _SlowBuildEngine(TorchMatmulEngine):
    def build_plan(self, graph, plan, ctx=None):
        time.sleep(0.05)  # a JIT compile: the window in which other threads arrive
        return super().build_plan(graph, plan, ctx)


@pytest.fixture(autouse=True)
def no_backend(monkeypatch):
    install_no_backend(monkeypatch)


def _run_threads(work) -> list[BaseException]:
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def body(i: int) -> None:
        barrier.wait()
        try:
            work(i)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_first_executes_from_many_threads_plan_and_build_once():
    engine = _SlowBuildEngine(block_ks=(None,))
    g, a, b, c = matmul_graph(engine=engine)
    ta, tb, _ = operands(a, b, c, torch.float32, 0)
    outs = [torch.full(tuple(c.dim), float("nan")) for _ in range(THREADS)]
    errors = _run_threads(lambda i: g.execute({a: ta, b: tb, c: outs[i]}))
    assert errors == []
    events = [event for event, _ in engine.calls]
    assert events.count("propose") == 1
    assert events.count("build") == 1
    assert events.count("execute") == THREADS
    assert all(rel_error(out, ta, tb) < 1e-5 for out in outs)


def test_a_planned_graph_shared_by_threads_builds_each_plan_once():
    engine = _SlowBuildEngine(block_ks=(None, 4))
    g, a, b, c = matmul_graph(engine=engine, k=8)
    g.create_execution_plans()
    ta, tb, _ = operands(a, b, c, torch.float32, 1)
    errors = _run_threads(lambda i: g.execute_plan_at_index(
        {a: ta, b: tb, c: torch.empty(tuple(c.dim))},
        torch.empty(4096, dtype=torch.uint8), index=i % 2))
    assert errors == []
    builds = [knobs for event, knobs in engine.calls if event == "build"]
    assert sorted(builds, key=repr) == sorted((MatmulKnobs(None), MatmulKnobs(4)), key=repr)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
