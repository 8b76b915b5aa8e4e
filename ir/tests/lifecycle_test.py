"""Graph lifecycle states, invalidation on mutation, and the whole-surface freeze."""
import subprocess
import sys
import types

import pytest

import cudnn
from cudnn import lifecycle, plan_api

D = cudnn.data_type


def _graph():
    g = cudnn.pygraph(io_data_type=D.HALF, intermediate_data_type=D.FLOAT)
    a = g.tensor([2, 3, 4], name="a")
    b = g.tensor([2, 4, 5], name="b")
    c = g.matmul(a, b, name="mm")
    d = g.relu(c, negative_slope=0.1, name="act")
    d.set_output(True)
    return g, a, b, c, d


def test_state_objects_follow_the_lifecycle():
    g, *_ = _graph()
    lc = g.lifecycle
    assert lc.state is lifecycle.BUILDING
    g.validate()
    assert lc.state is lifecycle.VALIDATED
    lc.freeze()
    assert lc.state is lifecycle.FROZEN and g.is_frozen
    lc.mark_planned()
    assert lc.state is lifecycle.PLANNED
    lc.mark_built()
    assert lc.state is lifecycle.BUILT and lc.state.built
    lc.unmark_built()
    assert lc.state is lifecycle.PLANNED


def test_invalid_transitions_raise():
    g, *_ = _graph()
    with pytest.raises(RuntimeError, match="from 'building' to 'planned'"):
        g.lifecycle.mark_planned()
    with pytest.raises(RuntimeError, match="from 'building' to 'frozen'"):
        g.lifecycle.freeze()


MUTATIONS = {
    "builder": lambda g, a, b, c, d: g.exp(d),
    "set_dim": lambda g, a, b, c, d: a.set_dim([2, 3, 4]),
    "attribute_write": lambda g, a, b, c, d: setattr(a, "data_type", D.FLOAT),
    "in_place_dim_edit": lambda g, a, b, c, d: a.dim.__setitem__(0, 2),
    "in_place_stride_edit": lambda g, a, b, c, d: a.stride.append(1),
    "context_write": lambda g, a, b, c, d: setattr(g.context, "io_data_type", D.BFLOAT16),
    "rename_tensor": lambda g, a, b, c, d: a.set_name("renamed"),
    "set_output": lambda g, a, b, c, d: c.set_output(True),
    "graph_name": lambda g, a, b, c, d: setattr(g, "name", "other"),
    "new_tensor": lambda g, a, b, c, d: g.tensor([1]),
}


@pytest.mark.parametrize("mutate", MUTATIONS.values(), ids=MUTATIONS.keys())
def test_mutation_after_validate_invalidates_validation(mutate):
    g, *ts = _graph()
    g.validate()
    assert g.state.validated
    mutate(g, *ts)
    assert g.state is lifecycle.BUILDING


def test_revalidation_sees_a_context_change():
    g, a, b, c, d = _graph()
    g.validate()
    assert c.data_type == D.FLOAT and d.data_type == D.HALF
    g.context.io_data_type = D.BFLOAT16
    g.context.intermediate_data_type = D.HALF
    g.validate()
    assert c.data_type == D.HALF and d.data_type == D.BFLOAT16


def test_failed_validation_leaves_the_graph_building():
    g, a, b, c, d = _graph()
    b.set_dim([2, 7, 5])
    with pytest.raises(ValueError, match="matmul.*'B'.*inner dimension"):
        g.validate()
    assert g.state is lifecycle.BUILDING


FROZEN_MUTATIONS = {
    "builder": lambda g, a, b, c, d, n: g.exp(d),
    "tensor_factory": lambda g, a, b, c, d, n: g.tensor([1]),
    "tensor_like": lambda g, a, b, c, d, n: g.tensor_like(a),
    "tensor_scalar": lambda g, a, b, c, d, n: g.tensor_scalar(1.0),
    "set_output": lambda g, a, b, c, d, n: c.set_output(True),
    "set_is_virtual": lambda g, a, b, c, d, n: c.set_is_virtual(False),
    "set_data_type": lambda g, a, b, c, d, n: a.set_data_type(D.FLOAT),
    "set_dim": lambda g, a, b, c, d, n: a.set_dim([2, 3, 4]),
    "set_stride": lambda g, a, b, c, d, n: a.set_stride([12, 4, 1]),
    "set_name": lambda g, a, b, c, d, n: a.set_name("x"),
    "set_uid": lambda g, a, b, c, d, n: a.set_uid(999),
    "set_ragged_offset": lambda g, a, b, c, d, n: a.set_ragged_offset(None),
    "set_ragged_offset_multiplier": lambda g, a, b, c, d, n: a.set_ragged_offset_multiplier(2),
    "set_reordering_type": lambda g, a, b, c, d, n: a.set_reordering_type(None),
    "set_is_pass_by_value": lambda g, a, b, c, d, n: a.set_is_pass_by_value(False),
    "set_alignment_value": lambda g, a, b, c, d, n: a.set_alignment_value(16),
    "tensor_attribute_write": lambda g, a, b, c, d, n: setattr(a, "dim", [2, 3, 4]),
    "tensor_unknown_attribute": lambda g, a, b, c, d, n: setattr(a, "whatever", 1),
    "node_attribute_write": lambda g, a, b, c, d, n: setattr(n, "name", "x"),
    "context_write": lambda g, a, b, c, d, n: setattr(g.context, "compute_data_type", D.FLOAT),
    "graph_attribute_write": lambda g, a, b, c, d, n: setattr(g, "name", "x"),
    "graph_unknown_attribute": lambda g, a, b, c, d, n: setattr(g, "whatever", 1),
    "set_router": lambda g, a, b, c, d, n: g.set_router(object()),
}


@pytest.mark.parametrize("mutate", FROZEN_MUTATIONS.values(), ids=FROZEN_MUTATIONS.keys())
def test_every_public_mutation_path_raises_after_freeze(mutate):
    g, a, b, c, d = _graph()
    node = g.get_node("mm")
    g.validate()
    g.lifecycle.freeze()
    with pytest.raises(cudnn.GraphFrozenError, match="graph is frozen"):
        mutate(g, a, b, c, d, node)


def test_structures_are_immutable_after_freeze_and_inspection_still_works():
    g, a, b, c, d = _graph()
    kept_dims = a.dim  # a live list handed out before the freeze
    node = g.get_node("mm")
    g.validate()
    g.lifecycle.freeze()
    with pytest.raises(TypeError):
        a.dim[0] = 9
    with pytest.raises(cudnn.GraphFrozenError):
        kept_dims[0] = 9
    with pytest.raises(TypeError):
        node.inputs["A"] = b
    with pytest.raises(TypeError):
        node.params["padding"] = 1.0
    with pytest.raises(TypeError):
        node.outputs["C"] = a
    assert a.dim == (2, 3, 4) and c.dim == (2, 3, 5) and a.get_dim() == [2, 3, 4]
    assert [n.name for n in g.nodes] == ["mm", "act"]
    assert "mm" in g.dump() and "digraph" in g.to_dot()
    assert g.find_tensor("a") is a and g.inspect()["state"] == "frozen"
    g.validate()  # validating a frozen graph is a no-op


def test_nodes_are_read_only_while_building():
    g, *_ = _graph()
    node = g.get_node("act")
    with pytest.raises(AttributeError, match="read-only"):
        node.name = "other"
    with pytest.raises(TypeError):
        node.params["negative_slope"] = 0.2
    assert g.nodes is not g.nodes and g.nodes == g.nodes


def test_plan_methods_delegate_to_the_router_module_at_call_time(monkeypatch):
    calls = []
    fake = types.ModuleType("fake_graph_api")
    fake.create_execution_plans = lambda graph, heuristics: calls.append(("plans", heuristics))
    fake.select_plan = lambda graph, index: calls.append(("select", index)) or graph
    fake.plans = lambda graph: ["p0"]
    monkeypatch.setitem(sys.modules, "fake_graph_api", fake)
    monkeypatch.setattr(plan_api, "ROUTER_API_MODULE", "fake_graph_api")
    g, *_ = _graph()
    g.create_execution_plans([cudnn.heur_mode.A])
    assert g.select_plan(2) is g
    assert g.plans == ["p0"]
    assert calls == [("plans", [cudnn.heur_mode.A]), ("select", 2)]
    with pytest.raises(NotImplementedError, match="build_plans"):
        g.build_plans()


def test_plan_methods_without_a_router_raise_import_error(monkeypatch):
    monkeypatch.setattr(plan_api, "ROUTER_API_MODULE", "cudnn._absent_router.graph_api")
    g, *_ = _graph()
    with pytest.raises(ImportError, match="router layer"):
        g.create_execution_plans()


def test_router_state_is_dropped_by_a_mutation():
    g, a, *_ = _graph()
    g.validate()
    g.lifecycle.planning.router_state = "facts of the validated graph"
    a.set_dim([2, 3, 4])
    assert g.lifecycle.planning.router_state is None


def test_router_override_is_stored_per_graph():
    marker = object()
    g = cudnn.pygraph(router=marker)
    assert g.lifecycle.planning.router is marker
    other = object()
    assert g.set_router(other) is g and g.lifecycle.planning.router is other


def test_import_cudnn_loads_no_router_engine_backend_or_torch():
    code = ("import sys, cudnn; bad = [m for m in sys.modules if m.startswith("
            "('torch', 'numpy', 'cudnn.engines', 'cudnn.backend', 'cudnn.linear_attention'))];"
            "print(bad); assert not bad")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=_env())
    assert done.returncode == 0, done.stdout + done.stderr


def _env():
    import os
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    return env


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
