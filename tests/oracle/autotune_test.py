"""Autotuning on CPU with the oracle engines and an injected clock: the walk (declines,
failures, ties, filters), the selection, the persistent cache (hits, misses, corrupt and
stale entries, a fresh process) and concurrent writers."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import cudnn  # noqa: E402
from cudnn.engines.autotune import (Autotune, AutotuneCacheWarning, ClockTimer,  # noqa: E402
                                    DeviceId)
from cudnn.engines.autotune_cache import (AutotuneCache, CacheKey, PlanKey,  # noqa: E402
                                          Record)
from tests.oracle.fake_backend import install_no_backend  # noqa: E402
from tests.oracle.matmul_graphs import matmul_graph, operands  # noqa: E402
from tests.oracle.tuning_engines import FakeClock, TimedMatmulEngine  # noqa: E402

MS = 1e-3


@pytest.fixture(autouse=True)
def setup(monkeypatch, tmp_path):
    install_no_backend(monkeypatch)
    monkeypatch.setenv("CUDNN_AUTOTUNE_CACHE", str(tmp_path / "autotune"))


def tuned_graph(costs, block_ks=(None, 16, 4), k=32, **kw):
    clock = FakeClock()
    engine = TimedMatmulEngine(clock, costs, block_ks=block_ks)
    g, a, b, c = matmul_graph(k=k, engine=engine, **kw)
    ta, tb, tc = operands(a, b, c, torch.float32, 0)
    return g, engine, clock, {a: ta, b: tb, c: tc}


def cache_files(tmp_path):
    return sorted((tmp_path / "autotune").glob("*.json"))


def test_the_fastest_plan_is_selected_and_recorded(tmp_path):
    g, engine, clock, data = tuned_graph({None: 3 * MS, 16: 1 * MS, 4: 2 * MS})
    report = g.autotune(data, timer=ClockTimer(clock), warmup=2, reps=5)
    assert report.kind == "measured" and report.winner == 1
    assert [t.seconds for t in report.trials] == pytest.approx([3 * MS, 1 * MS, 2 * MS])
    assert g.state.built and g.lifecycle.planning.selected_index == 1
    assert engine.executions().count(16) == 7  # 2 warm-up + 5 timed
    text = g.explain_plans().render()
    assert "*  1  matmul_timed_oracle[TILEK=16]" in text
    assert "measured 1.000 ms (measured by autotune)" in text
    assert "autotune: measured 3 of 3 plans in this process, selected 1; recorded in" in text
    (path,) = cache_files(tmp_path)
    data_json = json.loads(path.read_text())
    assert data_json["winner"]["knobs"] == [["TILEK", 16]]
    assert data_json["key"]["device"] == "cpu"
    # the tuned graph executes its winner
    g.execute(data, torch.empty(g.get_workspace_size(), dtype=torch.uint8))
    assert engine.executions()[-1] == 16


def test_a_later_graph_takes_the_recorded_winner_without_timing(tmp_path):
    g, _, clock, data = tuned_graph({None: 3 * MS, 16: 2 * MS, 4: 1 * MS})
    g.autotune(data, timer=ClockTimer(clock))
    g2, engine2, clock2, data2 = tuned_graph({None: 3 * MS, 16: 2 * MS, 4: 1 * MS})
    g2.create_execution_plans()
    assert [p.knobs.block_k for p in g2.plans] == [4, None, 16]
    assert engine2.executions() == [] and clock2.reads == 0
    ex = g2.explain_plans()
    assert ex.autotune.kind == "recorded"
    assert ex.plans[0].estimate.source == "autotune cache"
    assert "autotune: recorded winner at rank 0, selected without timing" in ex.render()
    g2.build_plans()
    g2.execute(data2, torch.empty(g2.get_workspace_size(), dtype=torch.uint8))
    assert engine2.executions() == [4]


def test_another_shape_or_device_misses():
    g, _, clock, data = tuned_graph({None: 3 * MS, 16: 2 * MS, 4: 1 * MS})
    g.autotune(data, timer=ClockTimer(clock))
    other, *_ = tuned_graph({}, m=6)
    other.create_execution_plans()
    assert other.explain_plans().autotune is None
    assert [p.knobs.block_k for p in other.plans] == [None, 16, 4]
    g3, _, clock3, data3 = tuned_graph({None: 3 * MS, 16: 2 * MS, 4: 1 * MS})
    g3.autotune(data3, timer=ClockTimer(clock3), device=DeviceId("Fake GPU", 90))
    same, *_ = tuned_graph({})
    same.create_execution_plans()  # a cpu graph: the cpu record, not the Fake GPU one
    assert same.explain_plans().autotune.note.endswith("on cpu (SM 0)")


def test_build_declines_failures_and_execute_declines_are_skipped():
    costs = {None: RuntimeError("kernel fault"), 16: NotImplementedError("not today"),
             4: 2 * MS, 8: 3 * MS}
    # block_k 40 does not split K = 32: its build declines
    g, engine, clock, data = tuned_graph(costs, block_ks=(None, 16, 40, 4, 8))
    with pytest.warns(RuntimeWarning, match=r"plan \[0\] .* failed and is skipped: "
                                            "RuntimeError: kernel fault"):
        report = g.autotune(data, timer=ClockTimer(clock), reps=3, warmup=1)
    status = [(t.index, t.status) for t in report.trials]
    assert status == [(0, "failed"), (1, "declined"), (2, "declined"), (3, "timed"),
                      (4, "timed")]
    assert "at execute: NotImplementedError: not today" in report.trials[1].reason
    assert "does not split K" in report.trials[2].reason
    assert report.winner == 3


def test_ties_go_to_the_earlier_entry_and_filters_are_respected():
    g, _, clock, data = tuned_graph({None: 2 * MS, 16: 1 * MS, 4: 1 * MS})
    assert g.autotune(data, timer=ClockTimer(clock), cache=False).winner == 1
    g, _, clock, data = tuned_graph({None: 2 * MS, 16: 1 * MS, 4: 1 * MS})
    g.create_execution_plans()
    g.deselect_engines(["TILEK=16"])
    report = g.autotune(data, timer=ClockTimer(clock), cache=False)
    assert report.trials[1].status == "barred" and report.winner == 2


def test_nothing_timed_is_an_error():
    g, _, clock, data = tuned_graph({None: NotImplementedError("no"),
                                     16: NotImplementedError("no")}, block_ks=(None, 16))
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="no plan could be timed"):
        g.autotune(data, timer=ClockTimer(clock))
    assert not g.state.built


def test_build_plans_with_an_autotune_policy_generates_the_buffers(tmp_path):
    g, engine, clock, _ = tuned_graph({None: 2 * MS, 16: 3 * MS, 4: 1 * MS})
    g.build_plans(policy=Autotune(timer=ClockTimer(clock), reps=2, warmup=0))
    assert g.lifecycle.planning.selected_index == 2 and g.state.built
    assert len(cache_files(tmp_path)) == 1
    with pytest.raises(TypeError, match="comes alone"):
        g.build_plans(Autotune(), cudnn.build_plan_policy.ALL)


def test_the_cache_can_be_turned_off(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDNN_AUTOTUNE_CACHE", "off")
    g, _, clock, data = tuned_graph({None: 3 * MS, 16: 1 * MS, 4: 2 * MS})
    report = g.autotune(data, timer=ClockTimer(clock))
    assert report.cache_path is None and "no cache" in report.note
    assert not (tmp_path / "autotune").exists()


def _tune_once(tmp_path, costs=None):
    g, _, clock, data = tuned_graph(costs or {None: 3 * MS, 16: 2 * MS, 4: 1 * MS})
    g.autotune(data, timer=ClockTimer(clock))
    (path,) = cache_files(tmp_path)
    return path


@pytest.mark.parametrize("damage", ["truncate", "garbage", "edit", "format", "empty"])
def test_a_corrupt_entry_is_ignored_with_a_warning(tmp_path, damage):
    path = _tune_once(tmp_path)
    text = path.read_text()
    if damage == "truncate":
        path.write_text(text[: len(text) // 2])
    elif damage == "garbage":
        path.write_bytes(os.urandom(64))
    elif damage == "edit":  # a valid JSON record whose winner was changed by hand
        path.write_text(text.replace('"TILEK",\n     4', '"TILEK",\n     16', 1)
                        .replace('"TILEK", 4', '"TILEK", 16'))
        assert path.read_text() != text
    elif damage == "format":
        data = json.loads(text)
        data["format"] = 999
        path.write_text(json.dumps(data))
    else:
        path.write_text("")
    g, engine, *_ = tuned_graph({})
    with pytest.warns(AutotuneCacheWarning, match="ignoring"):
        g.create_execution_plans()
    assert [p.knobs.block_k for p in g.plans] == [None, 16, 4]
    assert g.explain_plans().autotune is None


def test_a_stale_entry_is_ignored_with_a_warning(tmp_path):
    _tune_once(tmp_path)
    # a new engine configuration was never timed: the record cannot say it is slower
    g, *_ = tuned_graph({}, block_ks=(None, 16, 4, 8))
    with pytest.warns(AutotuneCacheWarning, match=r"stale record .*TILEK=8\]'\] were not tried"):
        g.create_execution_plans()
    assert [p.knobs.block_k for p in g.plans] == [None, 16, 4, 8]


def test_the_recorded_winner_is_reused_in_a_fresh_process(tmp_path):
    _tune_once(tmp_path)
    script = textwrap.dedent("""
        import sys, warnings
        sys.path[:0] = {paths!r}
        from cudnn.engines.autotune import AutotuneCacheWarning
        warnings.simplefilter("error", AutotuneCacheWarning)
        from tests.oracle.fake_backend import install_no_backend
        from tests.oracle.matmul_graphs import matmul_graph
        from tests.oracle.tuning_engines import FakeClock, TimedMatmulEngine
        import pytest
        mp = pytest.MonkeyPatch()
        install_no_backend(mp)
        engine = TimedMatmulEngine(FakeClock(), {{}})
        g, *_ = matmul_graph(k=32, engine=engine)
        g.create_execution_plans()
        print(g.get_plan_name_at_index(0), g.explain_plans().autotune.kind,
              len(engine.executions()))
    """).format(paths=list(sys.path))
    env = {**os.environ, "CUDNN_AUTOTUNE_CACHE": str(tmp_path / "autotune")}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["matmul_timed_oracle[TILEK=4]", "recorded", "0"]


def _record(cache_key, winner_knob):
    plans = [PlanKey(30000, (("TILEK", k),), f"p[TILEK={k}]") for k in (0, 16, 4)]
    winner = next(p for p in plans if p.knobs[0][1] == winner_knob)
    return Record(cache_key, winner, tuple((p, 1e-3) for p in plans), tuple(plans), 0.0)


def test_concurrent_writers_and_readers_never_see_a_partial_record(tmp_path):
    folder = tmp_path / "shared"
    key = CacheKey("sig", DeviceId("Fake GPU", 90), "test")
    writer = textwrap.dedent("""
        import sys
        sys.path[:0] = {paths!r}
        from cudnn.engines.autotune_cache import AutotuneCache, CacheKey, DeviceId, PlanKey, Record
        key = CacheKey("sig", DeviceId("Fake GPU", 90), "test")
        plans = [PlanKey(30000, (("TILEK", k),), f"p[TILEK={{k}}]") for k in (0, 16, 4)]
        cache = AutotuneCache({folder!r})
        for i in range(60):
            w = plans[(i + int(sys.argv[1])) % 3]
            cache.store(Record(key, w, tuple((p, 1e-3) for p in plans), tuple(plans), i))
    """).format(paths=list(sys.path), folder=str(folder))
    procs = [subprocess.Popen([sys.executable, "-c", writer, str(n)]) for n in range(3)]
    seen: list = []
    errors: list = []

    def read(reader: AutotuneCache) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                while any(p.poll() is None for p in procs):
                    record = reader.load(key)
                    if record is not None:
                        seen.append(record.winner.knobs)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

    threads = [threading.Thread(target=read, args=(AutotuneCache(folder),)) for _ in range(2)]
    for t in threads:
        t.start()
    AutotuneCache(folder).store(_record(key, 16))  # this process writes too
    for p in procs:
        assert p.wait(timeout=300) == 0
    for t in threads:
        t.join()
    assert not errors, errors
    final = AutotuneCache(folder).load(key)
    assert final is not None and final.key == key
    assert not [f for f in os.listdir(folder) if f.startswith(".tmp-")]
    assert all(k in {(("TILEK", 0),), (("TILEK", 16),), (("TILEK", 4),)} for k in seen)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
