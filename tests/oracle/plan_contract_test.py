"""The dispatch contract end to end on CPU, proven with the TorchMatmulEngine oracle.

Planning (one-shot, freezing), ranking, build walk with declines, pinning, execution with
variant packs (numerics against a float64 product), workspace plumbing, handles and
streams, compiled-plan caching, replay, and the backend seam (a fake adapter that records
every call). Policy overrides are in router_policy_test.py.
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import cudnn  # noqa: E402
from cudnn.engines import graph_api  # noqa: E402
from cudnn.engines.base import ExecutionContext, PlanConfig  # noqa: E402
from cudnn.engines.manifest import register_backend  # noqa: E402
from cudnn.engines.router import Router  # noqa: E402
from cudnn.ops.enums import build_plan_policy, knob_type  # noqa: E402
from tests.oracle.fake_backend import (FakeBackendAdapter, install_fake_backend,  # noqa: E402
                                       install_no_backend)
from tests.oracle.matmul_graphs import (REL_BOUND, matmul_graph,  # noqa: E402
                                        operands, rel_error, workspace_for)
from tests.oracle.torch_matmul_engine import MatmulKnobs, TorchMatmulEngine  # noqa: E402

D = cudnn.data_type


@pytest.fixture(autouse=True)
def no_backend(monkeypatch):
    install_no_backend(monkeypatch)


# -- planning and ranking ------------------------------------------------------------------
def test_planning_ranks_every_proposed_config_in_proposal_order():
    engine = TorchMatmulEngine(block_ks=(None, 8, 4))
    g, *_ = matmul_graph(engine=engine)
    assert g.get_execution_plan_count() == 0 and g.plans == []
    g.create_execution_plans()
    assert g.plans == [PlanConfig(30000, MatmulKnobs(bk)) for bk in (None, 8, 4)]
    assert [g.get_plan_name_at_index(i) for i in range(3)] == [
        "matmul_torch_oracle[TILEK=0]", "matmul_torch_oracle[TILEK=8]",
        "matmul_torch_oracle[TILEK=4]"]
    assert g.get_engine_and_knobs_at_index(2) == (30000, {knob_type.TILEK: 4})
    assert g.selected_engine is engine
    assert engine.calls == [("propose", "mm_graph")]


def test_python_plans_rank_before_the_backend_entries(monkeypatch):
    adapter = install_fake_backend(monkeypatch, FakeBackendAdapter(engine_ids=(7, 3)))
    g, *_ = matmul_graph(engine=TorchMatmulEngine(block_ks=(None,)))
    g.create_execution_plans([cudnn.heur_mode.A])
    assert [p.engine_id for p in g.plans] == [30000, 7, 3]
    assert [p.cpp_index for p in g.plans] == [None, 0, 1]
    assert g.get_plan_name_at_index(2) == "eng3"
    assert adapter.calls == [("entries", (cudnn.heur_mode.A,))]


def test_planning_is_one_shot_and_freezes_the_graph():
    g, a, b, c = matmul_graph(engine=TorchMatmulEngine())
    g.create_execution_plans()
    assert g.is_frozen and g.state.name == "planned"
    with pytest.raises(RuntimeError, match="one-shot"):
        g.create_execution_plans()
    with pytest.raises(cudnn.GraphFrozenError):
        a.set_dim([2, 5, 13])
    with pytest.raises(cudnn.GraphFrozenError):
        g.matmul(a, b)
    with pytest.raises(cudnn.GraphFrozenError):
        g.set_router(Router())
    with pytest.raises(RuntimeError, match="after create_execution_plans"):
        register_backend(g, TorchMatmulEngine(engine_id=30100))
    assert a.dim == (2, 5, 12)


def test_empty_plan_list_names_every_reason_and_keeps_the_one_shot():
    engine = TorchMatmulEngine()
    g = cudnn.pygraph(name="pw", io_data_type=D.FLOAT)
    x = g.tensor([4, 4], data_type=D.FLOAT, name="x")
    g.relu(x).set_output(True)
    register_backend(g, engine)
    with pytest.raises(cudnn.cudnnGraphNotSupportedError) as err:
        g.create_execution_plans()
    text = str(err.value)
    assert "matmul_torch_oracle (30000): declined" in text
    assert "serves single-node matmul graphs" in text
    assert "backend adapter not installed" in text
    assert not g.state.planned and g.is_frozen
    with pytest.raises(cudnn.cudnnGraphNotSupportedError):
        g.create_execution_plans()  # still not planned: asking again is allowed


# -- build, execute, numerics ----------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("index", [0, 1, 2])
def test_every_plan_matches_the_float64_product(dtype, index):
    g, a, b, c = matmul_graph(dtype, batch=3, m=9, k=33, n=6,
                              engine=TorchMatmulEngine(block_ks=(None, 16, 5)))
    g.create_execution_plans()
    ta, tb, tc = operands(a, b, c, dtype, seed=100 + index)
    g.execute_plan_at_index({a: ta, b: tb, c: tc}, workspace_for(g, index), index=index)
    assert rel_error(tc, ta, tb) < REL_BOUND[dtype]
    assert g.lifecycle.planning.selected_index == 0  # at-index execution selects nothing


def test_execute_builds_on_demand_and_accepts_uid_and_name_keys():
    g, a, b, c = matmul_graph(engine=TorchMatmulEngine(block_ks=(None,)))
    ta, tb, tc = operands(a, b, c, torch.float32, seed=1)
    g.execute({a.uid: ta, "B": tb, c: tc})
    assert g.state.name == "built"
    assert rel_error(tc, ta, tb) < REL_BOUND[torch.float32]
    tc2 = torch.zeros_like(tc)
    g.execute([ta, tb, tc2], tensor_uids=[a.uid, b.uid, c.uid])
    assert torch.equal(tc, tc2)


def test_variant_pack_starts_from_auto_bindings_and_caller_keys_win():
    ta = torch.randn(2, 5, 12)
    tb = torch.randn(2, 12, 7)
    g = cudnn.pygraph(io_data_type=D.FLOAT, compute_data_type=D.FLOAT)
    c = g.matmul(ta, tb, name="mm")
    c.set_output(True)
    register_backend(g, TorchMatmulEngine(block_ks=(None,)))
    tc = torch.empty(2, 5, 7)
    g.execute({c: tc})
    assert rel_error(tc, ta, tb) < 1e-5
    other_a = torch.randn(2, 5, 12)
    a_tensor = g.nodes[0].inputs["A"]
    g.execute({a_tensor: other_a, c: tc})
    assert rel_error(tc, other_a, tb) < 1e-5


def test_variant_pack_errors_name_the_problem():
    g, a, b, c = matmul_graph(engine=TorchMatmulEngine(block_ks=(None,)))
    other, oa, *_ = matmul_graph(name="other")
    ta, tb, tc = operands(a, b, c, torch.float32, seed=2)
    with pytest.raises(ValueError, match="no buffer for output port 'C'"):
        g.execute({a: ta, b: tb})
    with pytest.raises(ValueError, match="belongs to another graph"):
        g.execute({oa: ta, b: tb, c: tc})
    with pytest.raises(KeyError, match="uid 999"):
        g.execute({999: ta, b: tb, c: tc})
    with pytest.raises(KeyError, match="no tensor named 'nope'"):
        g.execute({"nope": ta, b: tb, c: tc})
    with pytest.raises(ValueError, match="duplicates"):
        g.execute([ta, tb], tensor_uids=[a.uid, a.uid])
    with pytest.raises(TypeError, match="__dlpack__"):
        g.execute({a: [[1.0]], b: tb, c: tc})


def test_inputs_that_require_grad_are_detached_and_outputs_written_in_place():
    g, a, b, c = matmul_graph(engine=TorchMatmulEngine(block_ks=(None,)))
    ta, tb, tc = operands(a, b, c, torch.float32, seed=3)
    ta.requires_grad_(True)
    storage = tc.data_ptr()
    g.execute({a: ta, b: tb, c: tc})
    assert tc.data_ptr() == storage and not tc.requires_grad
    assert rel_error(tc, ta.detach(), tb) < 1e-5


# -- the build walk ---------------------------------------------------------------------------
def test_build_walk_skips_declining_configs_and_selects_the_first_that_builds():
    engine = TorchMatmulEngine(block_ks=(64, 12, 4))  # K = 12: 64 and 12 do not split it
    g, a, b, c = matmul_graph(engine=engine)
    g.build_plans()
    assert g.lifecycle.planning.selected_index == 2 and g.state.name == "built"
    assert [knobs.block_k for event, knobs in engine.calls if event == "build"] == [64, 12, 4]
    ta, tb, tc = operands(a, b, c, torch.float32, seed=4)
    g.execute({a: ta, b: tb, c: tc}, workspace=workspace_for(g))
    assert rel_error(tc, ta, tb) < 1e-5


def test_nothing_builds_lists_every_failure():
    g, *_ = matmul_graph(engine=TorchMatmulEngine(block_ks=(64, 12)))
    with pytest.raises(cudnn.cudnnGraphNotSupportedError) as err:
        g.build_plans()
    text = str(err.value)
    assert "no plan in the list could be built" in text
    assert "[0] matmul_torch_oracle[TILEK=64]: NotImplementedError" in text
    assert "[1] matmul_torch_oracle[TILEK=12]" in text
    assert g.state.name == "planned"


class _ExplodingBuild(TorchMatmulEngine):
    def build_plan(self, graph, plan, ctx=None):
        if plan.knobs.block_k is None:
            raise RuntimeError("driver exploded")
        return super().build_plan(graph, plan, ctx)


def test_a_bug_in_build_plan_propagates_instead_of_walking_on():
    g, *_ = matmul_graph(engine=_ExplodingBuild(block_ks=(None, 4)))
    with pytest.raises(RuntimeError, match="driver exploded"):
        g.build_plans()
    assert g.state.name == "planned"


class _ExplodingPropose(TorchMatmulEngine):
    def propose_plans(self, graph):
        raise KeyError("bug in the engine")


def test_a_bug_in_propose_plans_aborts_planning():
    g, *_ = matmul_graph(engine=_ExplodingPropose())
    with pytest.raises(KeyError, match="bug in the engine"):
        g.create_execution_plans()
    assert not g.state.planned


def test_build_all_builds_every_entry_and_keeps_the_selection():
    engine = TorchMatmulEngine(block_ks=(None, 12, 4))
    g, *_ = matmul_graph(engine=engine)
    g.create_execution_plans()
    g.build_plans(build_plan_policy.ALL)
    assert sorted(g.lifecycle.planning.compiled_plans) == [0, 2]
    assert g.lifecycle.planning.selected_index == 0


def test_compiled_plans_are_built_once_per_graph_and_index():
    engine = TorchMatmulEngine(block_ks=(None, 4))
    g, a, b, c = matmul_graph(engine=engine)
    ta, tb, tc = operands(a, b, c, torch.float32, seed=5)
    for _ in range(3):
        g.execute({a: ta, b: tb, c: tc})
        g.execute_plan_at_index({a: ta, b: tb, c: tc}, workspace_for(g, 1), index=1)
    builds = [knobs for event, knobs in engine.calls if event == "build"]
    assert builds == [MatmulKnobs(None), MatmulKnobs(4)]
    g2, a2, b2, c2 = matmul_graph(engine=engine, name="second")
    g2.execute({a2: ta, b2: tb, c2: tc})
    assert len([1 for event, _ in engine.calls if event == "build"]) == 3


# -- pinning ----------------------------------------------------------------------------------
def test_a_pinned_plan_that_declines_raises_its_decline():
    g, *_ = matmul_graph(engine=TorchMatmulEngine(block_ks=(None, 64)))
    g.create_execution_plans()
    assert g.select_plan(1) is g
    with pytest.raises(NotImplementedError, match="block_k 64 does not split K = 12"):
        g.build_plans()
    g.select_plan(0)
    g.build_plans()
    assert g.lifecycle.planning.selected_index == 0


def test_select_plan_checks_state_and_index():
    g, *_ = matmul_graph(engine=TorchMatmulEngine(block_ks=(None,)))
    with pytest.raises(RuntimeError, match="create_execution_plans"):
        g.select_plan(0)
    g.create_execution_plans()
    for bad in (1, -1):
        with pytest.raises(IndexError, match="out of range"):
            g.select_plan(bad)
    with pytest.raises(IndexError):
        g.get_plan_name_at_index(-1)


def test_select_plan_after_build_moves_execution_to_the_pinned_plan():
    engine = TorchMatmulEngine(block_ks=(None, 4))
    g, a, b, c = matmul_graph(engine=engine)
    ta, tb, tc = operands(a, b, c, torch.float32, seed=6)
    g.execute({a: ta, b: tb, c: tc})
    g.select_plan(1)
    assert g.state.name == "planned"
    g.build()
    g.execute({a: ta, b: tb, c: tc}, workspace=workspace_for(g))
    assert [d[0] for event, d in engine.calls if event == "execute"] == [None, 4]
    assert rel_error(tc, ta, tb) < 1e-5


def test_build_plan_at_index_builds_and_selects():
    g, *_ = matmul_graph(engine=TorchMatmulEngine(block_ks=(None, 4, 64)))
    g.create_execution_plans()
    g.build_plan_at_index(1)
    assert g.lifecycle.planning.selected_index == 1 and g.state.name == "built"
    with pytest.raises(NotImplementedError):
        g.build_plan_at_index(2)


# -- workspace -------------------------------------------------------------------------------
def test_workspace_sizes_reach_the_caller_and_the_engine_uses_the_buffer():
    g, a, b, c = matmul_graph(batch=2, m=5, k=12, n=7,
                              engine=TorchMatmulEngine(block_ks=(4,)))
    with pytest.raises(RuntimeError, match="Call build"):
        g.get_workspace_size()
    g.build()
    need = 2 * 5 * 7 * 4
    assert g.get_workspace_size() == need == g.get_workspace_size_plan_at_index(0)
    ta, tb, tc = operands(a, b, c, torch.float32, seed=7)
    with pytest.raises(ValueError, match=f"needs {need} bytes of workspace but execute"):
        g.execute({a: ta, b: tb, c: tc})
    with pytest.raises(ValueError, match=f"holds {need - 1} bytes"):
        g.execute({a: ta, b: tb, c: tc}, workspace=torch.empty(need - 1, dtype=torch.uint8))
    ws = torch.zeros(need, dtype=torch.uint8)
    g.execute({a: ta, b: tb, c: tc}, workspace=ws)
    assert rel_error(tc, ta, tb) < 1e-5
    assert torch.equal(ws.view(torch.float32).view(2, 5, 7), tc)  # the accumulator lived there


# -- handles, streams, overrides -------------------------------------------------------------
class _Handle:
    def __init__(self, stream):
        self.stream = stream


def test_the_stream_comes_from_the_handle():
    engine = TorchMatmulEngine(block_ks=(None,))
    g, a, b, c = matmul_graph(engine=engine)
    ta, tb, tc = operands(a, b, c, torch.float32, seed=8)
    g.execute({a: ta, b: tb, c: tc})
    g.execute({a: ta, b: tb, c: tc}, handle=_Handle("stream-7"))
    assert [d[1] for event, d in engine.calls if event == "execute"] == [None, "stream-7"]
    with pytest.raises(TypeError, match="stream of handle"):
        g.execute({a: ta, b: tb, c: tc}, handle=object())


def test_the_graph_handle_is_the_default_handle():
    engine = TorchMatmulEngine(block_ks=(None,))
    g, a, b, c = matmul_graph(engine=engine, handle=_Handle("graph-stream"))
    ta, tb, tc = operands(a, b, c, torch.float32, seed=9)
    g.execute({a: ta, b: tb, c: tc})
    assert engine.calls[-1] == ("execute", (None, "graph-stream"))


def test_overrides_travel_on_the_context_and_are_checked():
    seen = []

    class Recording(TorchMatmulEngine):
        def build_plan(self, graph, plan, ctx=None):
            compiled = super().build_plan(graph, plan, ctx)
            original = compiled.execute
            compiled.execute = lambda gr, data, c: (seen.append(c), original(gr, data, c))
            return compiled

    g, a, b, c = matmul_graph(engine=Recording(block_ks=(None,)))
    ta, tb, tc = operands(a, b, c, torch.float32, seed=10)
    g.execute({a: ta, b: tb, c: tc}, override_uids=[a.uid], override_shapes=[[2, 5, 12]],
              override_strides=[[60, 12, 1]])
    ctx = seen[-1]
    assert isinstance(ctx, ExecutionContext)
    assert ctx.override_uids == (a.uid,) and ctx.override_shapes == ((2, 5, 12),)
    with pytest.raises(ValueError, match="equal lengths"):
        g.execute({a: ta, b: tb, c: tc}, override_uids=[a.uid], override_shapes=[])
    with pytest.raises(ValueError, match="no tensor with uid 4242"):
        g.execute({a: ta, b: tb, c: tc}, override_uids=[4242], override_shapes=[[1]])


# -- replay ------------------------------------------------------------------------------------
def test_a_recorded_engine_and_knobs_replay_on_a_fresh_graph():
    g, *_ = matmul_graph(engine=TorchMatmulEngine(block_ks=(None, 6, 4)))
    g.create_execution_plans()
    engine_id, knobs = g.get_engine_and_knobs_at_index(1)
    g2, a, b, c = matmul_graph(engine=TorchMatmulEngine(block_ks=(None,)), name="replay")
    g2.create_execution_plan(engine_id, knobs)
    assert g2.state.planned and g2.is_frozen
    assert g2.plans == [PlanConfig(30000, MatmulKnobs(6))]
    g2.select_plan(g2.get_execution_plan_count() - 1)
    g2.build_plans()
    ta, tb, tc = operands(a, b, c, torch.float32, seed=11)
    g2.execute({a: ta, b: tb, c: tc}, workspace=workspace_for(g2))
    assert rel_error(tc, ta, tb) < 1e-5
    with pytest.raises(ValueError, match="no engine owns python engine id 31234"):
        g2.create_execution_plan(31234)


def test_check_support_notes_and_delegating_entries(monkeypatch):
    class Noted(TorchMatmulEngine):
        behavior_notes = (cudnn.behavior_note.RUNTIME_COMPILATION,)

    install_fake_backend(monkeypatch, FakeBackendAdapter(engine_ids=(-1,)))
    g, *_ = matmul_graph(engine=Noted(block_ks=(None,)))
    g.check_support()  # plans first, then re-affirms the selected python engine
    assert g.state.planned
    assert g.get_behavior_notes() == [cudnn.behavior_note.RUNTIME_COMPILATION]
    assert g.get_plan_name_at_index(1) == "backend_heuristics"
    with pytest.raises(NotImplementedError, match="no replayable"):
        g.get_engine_and_knobs_at_index(1)
    with pytest.raises(NotImplementedError, match="no behavior notes"):
        g.get_behavior_notes_for_plan_at_index(1)
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="cannot append plans"):
        g.create_execution_plan(12)


# -- the backend seam --------------------------------------------------------------------------
def test_a_python_routed_graph_never_reaches_the_backend_when_running(monkeypatch):
    adapter = install_fake_backend(monkeypatch, FakeBackendAdapter(engine_ids=(5,)))
    g, a, b, c = matmul_graph(engine=TorchMatmulEngine(block_ks=(None,)))
    g.create_execution_plans()
    asked_for_planning = list(adapter.calls)
    ta, tb, tc = operands(a, b, c, torch.float32, seed=12)
    g.build()
    g.execute({a: ta, b: tb, c: tc})
    g.execute_plan_at_index({a: ta, b: tb, c: tc}, index=0)
    assert adapter.calls == asked_for_planning == [("entries", ())]
    assert rel_error(tc, ta, tb) < 1e-5


def test_a_backend_plan_runs_through_the_adapter_with_the_uid_pack(monkeypatch):
    adapter = install_fake_backend(monkeypatch, FakeBackendAdapter(engine_ids=(5, 9)))
    engine = TorchMatmulEngine(block_ks=(None,))
    g, a, b, c = matmul_graph(engine=engine)
    g.create_execution_plans()
    g.select_plan(2)
    ta, tb, tc = operands(a, b, c, torch.float32, seed=13)
    g.execute({a: ta, b: tb, c: tc})
    assert adapter.calls[1:] == [("check_support", 1), ("build", 1),
                                 ("execute", (1, sorted([a.uid, b.uid, c.uid])))]
    assert not [e for e, _ in engine.calls if e in ("build", "execute")]
    assert g.selected_engine is adapter


def test_a_backend_decline_at_check_support_lets_the_walk_reach_python(monkeypatch):
    class Declining(FakeBackendAdapter):
        def check_support(self, graph, plan):
            raise cudnn.cudnnGraphNotSupportedError("no engine config today")

        def build_plan(self, graph, plan, ctx):
            raise cudnn.cudnnGraphNotSupportedError("no engine config today")

    install_fake_backend(monkeypatch, Declining(engine_ids=(5,)))

    class BackendFirst(Router):
        def plan(self, graph, engines):
            return [*graph_api.backend_plan_entries(graph), *self.python_plans(graph, engines)]

    g, a, b, c = matmul_graph(engine=TorchMatmulEngine(block_ks=(None,)), router=BackendFirst())
    g.build()
    assert g.lifecycle.planning.selected_index == 1


def test_the_backend_answer_is_cached_per_graph_and_declines_are_recorded(monkeypatch):
    adapter = install_fake_backend(monkeypatch, FakeBackendAdapter(decline="no lowering"))
    g, *_ = matmul_graph(engine=TorchMatmulEngine(block_ks=(None,)))
    assert g.backend_plan_entries() == [] and g.is_frozen
    g.create_execution_plans()
    assert adapter.calls == [("entries", ())]
    assert "backend: declined: cudnnGraphNotSupportedError: no lowering" in str(g.explain_plans())


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
