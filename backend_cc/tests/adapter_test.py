"""CudnnBackendAdapter through the router, on CPU: a recording stand-in answers for cuDNN's
heuristics, plan builds and executes (fake_cudnn.py); the lowering and the C++ recording
layer are real.
"""

import logging
import re

import pytest

import cudnn
from cudnn.backend import adapter as adapter_module
from cudnn.backend import knobs as knob_map
from cudnn.backend.adapter import CudnnBackendAdapter
from cudnn.backend.lowered_graph import LoweredGraph
from cudnn.engines import backend_source
from cudnn.engines.engine_ids import BACKEND_HEURISTIC_ENGINE_ID
from cudnn.engines.plan_sources import BackendSource
from fake_cudnn import REAL, CudnnScript, FakeAccess, FakeExtension, install_adapter

DT = cudnn.data_type
A, B, FALLBACK, OPENSOURCE = (cudnn.heur_mode.A, cudnn.heur_mode.B, cudnn.heur_mode.FALLBACK,
                              cudnn.heur_mode.OPENSOURCE)
KNOB = REAL.backend_knob_types()


def script(**kwargs):
    base = dict(proposals={A.value: [(3, {KNOB["TILE_SIZE"]: 2}), (7, {})],
                           FALLBACK.value: [(7, {}), (11, {KNOB["SPLIT_K"]: 4})],
                           B.value: [(5, {})]},
                workspace={3: 256, 7: 0, 11: 64})
    base.update(kwargs)
    return CudnnScript(**base)


@pytest.fixture
def backend(monkeypatch):
    """(adapter, fake extension) installed as the router's backend."""
    ext = FakeExtension(script())
    adapter = CudnnBackendAdapter(FakeAccess(ext, handle=0xABC))
    install_adapter(monkeypatch, adapter)
    return adapter, ext


def matmul_graph():
    g = cudnn.pygraph(io_data_type=DT.HALF, intermediate_data_type=DT.FLOAT,
                      compute_data_type=DT.FLOAT)
    a, b = g.tensor(dim=[2, 16, 32], name="a"), g.tensor(dim=[2, 32, 8], name="b")
    c = g.matmul(a, b)
    c.set_output(True)
    return g, a, b, c


def heuristic_calls(ext):
    (graph,) = ext.graphs
    return [args for name, args in graph.calls if name == "create_execution_plans"]


# -- entries -------------------------------------------------------------------------------
def test_default_modes_are_a_then_fallback_deduplicated_with_cpp_indices(backend):
    _, ext = backend
    g, *_ = matmul_graph()
    g.create_execution_plans()
    assert [(p.engine_id, p.cpp_index) for p in g.plans] == [(3, 0), (7, 1), (11, 3)]
    assert g.plans[0].knobs == {KNOB["TILE_SIZE"]: 2}
    assert heuristic_calls(ext) == [[A.value], [FALLBACK.value]]
    assert isinstance(g.lifecycle.planning.lowered, LoweredGraph)


def test_the_backend_is_asked_once_per_graph(backend):
    adapter, ext = backend
    g, *_ = matmul_graph()
    first = g.backend_plan_entries()
    assert g.backend_plan_entries() is first
    g.create_execution_plans()
    again = adapter.backend_plan_entries(g, (B,))  # a later question gets the same answer
    assert again == first
    assert len(ext.graphs) == 1 and heuristic_calls(ext) == [[A.value], [FALLBACK.value]]


def test_requested_modes_are_honoured_in_order(backend):
    _, ext = backend
    g, *_ = matmul_graph()
    g.create_execution_plans([B, A])
    assert [p.engine_id for p in g.plans] == [5, 3, 7]
    assert heuristic_calls(ext) == [[B.value], [A.value]]


def test_a_declining_mode_is_skipped(monkeypatch):
    ext = FakeExtension(script(declining_modes={A.value}))
    install_adapter(monkeypatch, CudnnBackendAdapter(FakeAccess(ext)))
    g, *_ = matmul_graph()
    g.create_execution_plans()
    assert [p.engine_id for p in g.plans] == [7, 11]


def test_every_mode_declining_is_a_backend_decline(monkeypatch):
    ext = FakeExtension(script(declining_modes={A.value, FALLBACK.value}))
    install_adapter(monkeypatch, CudnnBackendAdapter(FakeAccess(ext)))
    g, *_ = matmul_graph()
    assert g.backend_plan_entries() == []
    text = g.explain_plans().render()
    assert "backend: declined: cudnnGraphNotSupportedError: heur_mode FALLBACK" in text


def test_opensource_puts_the_delegating_entry_first(backend):
    g, *_ = matmul_graph()
    g.create_execution_plans([OPENSOURCE, A])
    assert [(p.engine_id, p.cpp_index) for p in g.plans] == \
        [(BACKEND_HEURISTIC_ENGINE_ID, None), (3, 0), (7, 1)]
    assert g.get_plan_name_at_index(0) == "backend_heuristics"


def test_the_delegating_entry_builds_the_first_config_that_builds(monkeypatch):
    ext = FakeExtension(script(unbuildable={3}))
    adapter = install_adapter(monkeypatch, CudnnBackendAdapter(FakeAccess(ext)))
    g, *_ = matmul_graph()
    g.create_execution_plans([OPENSOURCE])
    assert [p.engine_id for p in g.plans] == [BACKEND_HEURISTIC_ENGINE_ID]
    assert heuristic_calls(ext) == []  # nothing asked until the entry is built
    g.build_plans()
    (graph,) = ext.graphs
    assert heuristic_calls(ext) == [[A.value], [FALLBACK.value]]
    assert [a for n, a in graph.calls if n.endswith("_at_index")] == [0, 1, 1]
    assert g.selected_engine is adapter


def test_modes_that_propose_nothing_leave_the_delegating_entry(monkeypatch):
    ext = FakeExtension(script(proposals={}))
    install_adapter(monkeypatch, CudnnBackendAdapter(FakeAccess(ext)))
    g, *_ = matmul_graph()
    g.create_execution_plans()
    assert [p.engine_id for p in g.plans] == [BACKEND_HEURISTIC_ENGINE_ID]
    with pytest.raises(cudnn.cudnnGraphNotSupportedError) as declined:
        g.build_plans()
    text = str(declined.value)
    assert "cuDNN proposed no engine config (heur modes A, FALLBACK" in text
    # the user is told how to get cuDNN's own reasons, which its error text never carries
    assert "CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=stderr" in text


def test_configs_that_all_fail_to_build_name_each_failure_and_the_log_switch(monkeypatch):
    ext = FakeExtension(script(proposals={A.value: [(3, {})], FALLBACK.value: [(11, {})]},
                               unbuildable={3, 11}))
    install_adapter(monkeypatch, CudnnBackendAdapter(FakeAccess(ext)))
    g, *_ = matmul_graph()
    g.create_execution_plans([OPENSOURCE])
    with pytest.raises(cudnn.cudnnGraphNotSupportedError) as declined:
        g.build_plans()
    text = str(declined.value)
    assert "[0] eng3" in text and "[1] eng11" in text
    assert "proposed no engine config" not in text
    assert text.endswith("CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=stderr")


# -- building and executing -------------------------------------------------------------
class DevicePtr:
    def __init__(self, address):
        self.address = address

    def data_ptr(self):
        return self.address


class CudaArray:
    def __init__(self, address):
        self.__cuda_array_interface__ = {"data": (address, False), "shape": (4,),
                                         "typestr": "<f2", "version": 3}


def test_building_an_entry_is_one_build_at_its_index_and_execute_runs_it(backend):
    adapter, ext = backend
    g, a, b, c = matmul_graph()
    g.create_execution_plans()
    g.build_plans()
    (graph,) = ext.graphs
    assert [(n, x) for n, x in graph.calls if n.endswith("_at_index")] == \
        [("build_plan_at_index", 0)]
    assert g.get_workspace_size() == 256
    assert g.selected_engine is adapter
    assert isinstance(g.lifecycle.planning.lowered, LoweredGraph)
    g.execute({a: DevicePtr(0x1000), b: CudaArray(0x2000), c.uid: 0x3000}, DevicePtr(0x9000))
    name, (pack, workspace, index, handle) = graph.calls[-1]
    assert name == "execute_plan_at_index"
    assert pack == {a.uid: 0x1000, b.uid: 0x2000, c.uid: 0x3000}
    assert (workspace, index, handle) == (0x9000, 0, 0xABC)


def test_the_walk_moves_past_an_entry_cudnn_cannot_build(monkeypatch):
    ext = FakeExtension(script(unbuildable={3}))
    install_adapter(monkeypatch, CudnnBackendAdapter(FakeAccess(ext)))
    g, *_ = matmul_graph()
    g.create_execution_plans()
    g.build_plans()
    assert g.lifecycle.planning.selected_index == 1
    (graph,) = ext.graphs
    assert [x for n, x in graph.calls if n == "build_plan_at_index"] == [0, 1]


def test_a_pinned_entry_that_cannot_build_is_an_error(monkeypatch):
    ext = FakeExtension(script(unbuildable={3}))
    install_adapter(monkeypatch, CudnnBackendAdapter(FakeAccess(ext)))
    g, *_ = matmul_graph()
    g.create_execution_plans()
    g.select_plan(0)
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="eng3"):
        g.build_plans()


def test_check_support_reaffirms_the_selected_entry_at_its_index(monkeypatch):
    ext = FakeExtension(script(unbuildable={3}))
    install_adapter(monkeypatch, CudnnBackendAdapter(FakeAccess(ext)))
    g, *_ = matmul_graph()
    g.create_execution_plans()
    g.check_support()  # entry 0 declines, but the walk may still move on
    g.select_plan(1)
    g.check_support()
    (graph,) = ext.graphs
    assert [x for n, x in graph.calls if n == "check_support_at_index"] == [0, 1]
    g.select_plan(0)
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="eng3"):
        g.check_support()  # pinned: its decline is an error


def test_execute_refuses_shape_overrides(backend):
    g, a, b, c = matmul_graph()
    g.create_execution_plans([FALLBACK])
    g.build_plans()
    with pytest.raises(ValueError, match="no execute-time shape overrides"):
        g.execute({a: 1, b: 2, c: 3}, override_uids=[a.uid], override_shapes=[[2, 16, 32]],
                  override_strides=[[512, 32, 1]])


def test_unknown_graph_attributes_reach_the_lowered_backend_graph(backend):
    g, a, b, c = matmul_graph()
    with pytest.raises(AttributeError, match="only once the graph has been lowered"):
        _ = g.serialize
    g.create_execution_plans()
    assert set(g.tensor_uids()) == {a.uid, b.uid, c.uid}
    # serialize/deserialize pass through to the C++ graph (here: nothing built in C++ yet)
    with pytest.raises(RuntimeError, match="serialize\\(\\): no plan is built yet"):
        g.serialize()
    with pytest.raises(TypeError, match="deserialize\\(\\): data must be bytes"):
        g.deserialize(42)


def test_build_operation_graph_lowers_early_and_planning_reuses_it(backend):
    _, ext = backend
    g, *_ = matmul_graph()
    g.build_operation_graph()
    lowered = g.lifecycle.planning.lowered
    assert isinstance(lowered, LoweredGraph) and g.is_frozen
    g.create_execution_plans()
    assert g.lifecycle.planning.lowered is lowered and len(ext.graphs) == 1


# -- knobs, notes, replay -----------------------------------------------------------------
def test_knobs_are_reported_in_the_public_vocabulary(backend):
    g, *_ = matmul_graph()
    g.create_execution_plans()
    engine, public = g.get_engine_and_knobs_at_index(0)
    assert (engine, public) == (3, {cudnn.knob_type.TILE_SIZE: 2})
    _, legacy = g.get_engine_and_knobs_at_index(2)
    assert legacy == {knob_map.UNNAMED_KNOB_BASE + KNOB["SPLIT_K"]: 4}
    assert g.get_plan_name_at_index(0) == f"eng3_k{KNOB['TILE_SIZE']}=2"


def test_knob_maps_round_trip_and_refuse_python_engine_knobs():
    native = {KNOB["TILE_SIZE"]: 2, KNOB["SPLIT_K"]: 4, KNOB["STAGES"]: 3}
    public = knob_map.to_public(native, KNOB)
    assert public[cudnn.knob_type.STAGES] == 3
    assert knob_map.to_native(public, KNOB) == native
    assert knob_map.to_native({int(cudnn.knob_type.TILE_SIZE): 5}, KNOB) == {KNOB["TILE_SIZE"]: 5}
    with pytest.raises(ValueError, match="python-engine knob band"):
        knob_map.to_native({cudnn.knob_type.SPLIT_KV: 1}, KNOB)
    with pytest.raises(TypeError, match="keys must be"):
        knob_map.to_native({"TILE_SIZE": 1}, KNOB)


def test_a_recorded_plan_replays_with_native_knobs(backend):
    _, ext = backend
    g, *_ = matmul_graph()
    g.create_execution_plans()
    engine, public = g.get_engine_and_knobs_at_index(0)
    replay, *_ = matmul_graph()
    replay.create_execution_plan(engine, public)
    replay.select_plan(0)
    replay.build_plans()
    graph = ext.graphs[1]
    assert ("create_execution_plan", (3, {KNOB["TILE_SIZE"]: 2})) in graph.calls
    assert replay.plans[0].cpp_index == 0 and replay.plans[0].engine_id == 3
    assert [x for n, x in graph.calls if n == "build_plan_at_index"] == [0]


def test_behavior_notes_are_public_enum_members(monkeypatch):
    ext = FakeExtension(script(notes={3: [cudnn.behavior_note.RUNTIME_COMPILATION.value]}))
    install_adapter(monkeypatch, CudnnBackendAdapter(FakeAccess(ext)))
    g, *_ = matmul_graph()
    g.create_execution_plans()
    assert g.get_behavior_notes_for_plan_at_index(0) == [cudnn.behavior_note.RUNTIME_COMPILATION]
    assert g.get_behavior_notes_for_plan_at_index(1) == []


# -- declines and availability ------------------------------------------------------------
def test_an_unavailable_backend_offers_nothing_and_explains_why(monkeypatch):
    ext = FakeExtension(script())
    install_adapter(monkeypatch, CudnnBackendAdapter(FakeAccess(ext, unavailable="no GPU here")))
    g, *_ = matmul_graph()
    assert g.backend_plan_entries() == []
    assert "backend: declined: no GPU here" in g.explain_plans().render()
    assert ext.graphs == []


def test_the_real_access_says_why_it_cannot_run_here():
    reason = adapter_module.BackendAccess().unavailable_reason()
    try:
        import torch
        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if has_gpu:
        pytest.skip("this machine has a GPU: the backend may be available")
    assert reason is not None and reason.startswith("cuDNN backend unavailable:")


def test_the_default_adapter_is_the_routers_and_explains_itself_here():
    backend_source.reset_backend_adapter()
    adapter, reason = backend_source.backend_adapter()
    assert isinstance(adapter, CudnnBackendAdapter)
    if reason is None:
        pytest.skip("the backend is available on this machine")
    g, *_ = matmul_graph()
    assert g.backend_plan_entries() == []
    assert f"backend: declined: {reason}" in g.explain_plans().render()


def test_a_lowering_decline_leaves_no_lowered_graph(backend):
    _, ext = backend
    g = cudnn.pygraph(io_data_type=DT.HALF)
    x = g.tensor(dim=[1, 2, 4, 8])
    g.rope_backward(x, g.tensor(dim=[4, 1, 1, 8], data_type=DT.FLOAT)).set_output(True)
    assert g.backend_plan_entries() == []
    assert g.lifecycle.planning.lowered is None
    assert re.search(r"rope_backward.*9\.25", g.explain_plans().render())


class FailingBuild(FakeExtension):
    def __init__(self, fail):
        super().__init__(script())
        self.fail = fail

    def backend_graph(self, **kwargs):
        graph = super().backend_graph(**kwargs)
        fail = self.fail

        def build_operation_graph():
            fail(graph)
        graph.build_operation_graph = build_operation_graph
        return graph


def test_a_cudnn_failure_while_lowering_is_a_logged_decline(monkeypatch, caplog):
    def refuse(graph):
        raise REAL.CudnnBackendError("cudnnBackendFinalize: CUDNN_STATUS_BAD_PARAM")
    install_adapter(monkeypatch, CudnnBackendAdapter(FakeAccess(FailingBuild(refuse))))
    g, *_ = matmul_graph()
    with caplog.at_level(logging.WARNING, logger="cudnn.backend.adapter"):
        assert g.backend_plan_entries() == []
    assert "CUDNN_STATUS_BAD_PARAM" in caplog.text
    assert g.lifecycle.planning.lowered is None


def test_a_uid_the_backend_changed_while_building_fails_loudly(monkeypatch):
    def drift(graph):
        graph.real.ops()[0]["outputs"]["C"].set_uid(999)
    install_adapter(monkeypatch, CudnnBackendAdapter(FakeAccess(FailingBuild(drift))))
    g, *_ = matmul_graph()
    with pytest.raises(AssertionError, match="after build_operation_graph.*backend uid 999"):
        g.backend_plan_entries()


def test_linear_attention_is_declined_by_the_adapter_too():
    adapter = CudnnBackendAdapter(FakeAccess(FakeExtension(script())))
    g = cudnn.pygraph(io_data_type=DT.HALF)
    q = g.tensor(dim=[64, 2, 64])
    gate = g.tensor(dim=[64, 2], data_type=DT.FLOAT)
    out = g.gdn(q, q, q, gate, gate, g.tensor(dim=[2], data_type=DT.INT32))
    (out[0] if isinstance(out, list) else out).set_output(True)
    g.validate()
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="No valid engine configs for GDN"):
        adapter.backend_plan_entries(g, ())


def test_backend_entries_are_routed_to_the_adapter(backend):
    adapter, _ = backend
    g, *_ = matmul_graph()
    g.create_execution_plans()
    from cudnn.engines.plan_list import source_at
    source = source_at(g, 0)
    assert isinstance(source, BackendSource) and source.owner is adapter

@pytest.mark.parametrize("dims, reason", [([1] * 9, "dim must have 1..8 extents, got 9"),
                                          ([2, 0, 3], "every extent of dim must be > 0")])
def test_values_the_cpp_builder_refuses_are_a_decline_with_the_reason(backend, dims, reason):
    g = cudnn.pygraph(io_data_type=DT.FLOAT, compute_data_type=DT.FLOAT)
    y = g.relu(g.tensor(dims, name="x"))
    y.set_output(True)
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match=re.escape(reason)):
        g.create_execution_plans()
    assert "ValueError" in g.explain_plans().backend.declined


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
