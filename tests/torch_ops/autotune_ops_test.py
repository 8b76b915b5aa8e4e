"""The torch ops and autotuning, on a CPU with the reference engines: a recorded winner is
used without timing; with tuning opted in (set_autotune / CUDNN_AUTOTUNE=1) a new call
signature is tuned once, at its graph's build, and the winner recorded. The injected
clock decides what each plan "takes"."""
from __future__ import annotations

import contextlib

import pytest
import torch

from cudnn.engines.autotune import Autotune, ClockTimer
from cudnn.engines.base import PlanConfig
from cudnn.linear_attention import ops
from cudnn.linear_attention.ops._graph_runner import autotune_policy
from cudnn.ops.enums import knob_type
from tests.reference.inputs import InputConfig, make_inputs
from tests.reference.preprocess import Family
from tests.torch_ops.op_calls import call_op
from tests.torch_ops.reference_engine import reference_engine, reference_engines_installed

CONFIG = InputConfig(family=Family.GDN, seq_lens=(5, 3, 1), H=2, HV=2, K=8, V=4)


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


@contextlib.contextmanager
def two_plan_engine(costs, clock):
    """The gdn reference engine proposing two configs (TILEK 0 and 1); each execute
    advances `clock` by its config's cost."""
    with reference_engines_installed():
        engine = reference_engine("gdn")
        base_build = engine.build_plan
        executed: list[int] = []

        def propose_plans(graph):
            engine.check_support(graph)
            return [PlanConfig(engine.require_id(), {knob_type.TILEK: k}) for k in (0, 1)]

        def build_plan(graph, plan, ctx=None):
            inner = base_build(graph, plan, ctx)
            tile = plan.knobs[knob_type.TILEK]
            original = inner.execute

            def execute(graph, data, ctx):
                executed.append(tile)
                original(graph, data, ctx)
                clock.now += costs[tile]
            inner.execute = execute
            return inner

        engine.propose_plans = propose_plans
        engine.build_plan = build_plan
        try:
            yield engine, executed
        finally:
            del engine.propose_plans, engine.build_plan


@pytest.fixture(autouse=True)
def cache_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDNN_AUTOTUNE_CACHE", str(tmp_path / "autotune"))
    monkeypatch.delenv("CUDNN_AUTOTUNE", raising=False)
    yield tmp_path / "autotune"
    ops.set_autotune(None)


def entry_plan():
    (entry,) = [e for cache in ops.graph_caches() for e in cache.values()]
    return entry.plan


def test_tuning_is_off_by_default_and_opted_in_by_flag_or_environment(monkeypatch):
    assert autotune_policy() is None
    monkeypatch.setenv("CUDNN_AUTOTUNE", "1")
    assert autotune_policy() == Autotune()
    ops.set_autotune(False)
    assert autotune_policy() is None
    with pytest.raises(TypeError):
        ops.set_autotune("yes")


def test_a_new_signature_is_tuned_once_and_later_processes_reuse_the_winner(cache_folder):
    clock = Clock()
    inputs = make_inputs(CONFIG, seed=1)
    with two_plan_engine({0: 2e-3, 1: 1e-3}, clock) as (_, executed):
        call_op(inputs)  # tuning off: the first plan, nothing recorded
        assert entry_plan().endswith("[TILEK=0]") and not cache_folder.exists()
        ops.clear_graph_caches()
        ops.set_autotune(Autotune(timer=ClockTimer(clock), warmup=1, reps=3))
        executed.clear()
        out = call_op(inputs)
        assert entry_plan().endswith("[TILEK=1]")
        assert executed.count(0) == 4 and executed.count(1) == 5  # 4 timed, 1 for the call
        assert len(list(cache_folder.glob("*.json"))) == 1
        # a fresh cache of graphs (as a new process has), tuning off: the record decides
        ops.clear_graph_caches()
        ops.set_autotune(False)
        executed.clear()
        again = call_op(inputs)
        assert entry_plan().endswith("[TILEK=1]") and executed == [1]
    for a, b in zip(out, again):
        assert torch.equal(a, b)


def test_a_pinned_plan_name_is_never_tuned(cache_folder):
    clock = Clock()
    inputs = make_inputs(CONFIG, seed=2)
    with two_plan_engine({0: 2e-3, 1: 1e-3}, clock) as (engine, executed):
        ops.set_autotune(Autotune(timer=ClockTimer(clock), warmup=0, reps=1))
        call_op(inputs, plan_name=f"{engine.name}[TILEK=0]")
        assert executed == [0] and not cache_folder.exists()


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
