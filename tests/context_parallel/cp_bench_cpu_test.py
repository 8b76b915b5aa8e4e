"""bench/context_parallel_bench.py in its CPU mode (two gloo ranks, float64, the test-only
reference engines, a tiny shape): the script the GPU runner times context parallelism
with runs end to end and prints its table. The numbers mean nothing here."""
from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest
import torch.distributed as dist

BENCH = Path(os.path.abspath(__file__)).parents[2] / "bench" / "context_parallel_bench.py"


def _bench_module():
    # the ranks are spawned and import the module by name: its folder goes on sys.path
    # (multiprocessing hands the parent's sys.path to spawned processes)
    if str(BENCH.parent) not in sys.path:
        sys.path.insert(0, str(BENCH.parent))
    spec = importlib.util.spec_from_file_location("context_parallel_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("family", ["gdn2"])
def test_bench_runs_on_cpus(family, capfd):
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    bench = _bench_module()
    assert bench.main(["--cpu-reference", "--family", family, "--tokens-per-rank", "11",
                       "--heads", "2", "--k", "4", "--v", "3", "--reps", "1",
                       "--warmup", "1"]) == 0
    out = capfd.readouterr().out
    assert f"context parallelism: {family}, one sequence of 2 x 11 tokens" in out
    for step in ("fwd", "fwd+bwd"):
        assert re.search(rf"^{re.escape(step)} +one rank .* \| CP .* Mtok/s \| speedup .*"
                         r"communication .* waiting", out, re.M), out


def test_bench_refuses_one_rank():
    with pytest.raises(SystemExit):
        _bench_module().main(["--world", "1"])


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
