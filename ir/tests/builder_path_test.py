"""The builders' one-pass path (op_binders: a builder generated per OpSpec) makes the graph
the general path makes, names nodes in O(1), and keeps a graph's per-node cost flat in its
size."""
from __future__ import annotations

import random
import time

import pytest

import cudnn
import ir_op_cases
from cudnn import op_binders, op_builder, validation
from cudnn.ops.registry import all_specs
from cudnn.graph_types import Tensor
from cudnn.nodes import Node
from cudnn.ops import pointwise
from cudnn.ops.op_spec import OpCall, PortView

D = cudnn.data_type


def chain(n: int, names: bool = False) -> cudnn.pygraph:
    g = cudnn.pygraph(io_data_type=D.HALF, intermediate_data_type=D.FLOAT,
                      compute_data_type=D.FLOAT)
    x = g.tensor(name="x", dim=[2, 3, 4], stride=[12, 4, 1], data_type=D.HALF)
    b = g.tensor(name="b", dim=[1, 3, 1], stride=[3, 1, 1], data_type=D.HALF)
    y = x
    for i in range(n):
        kind = i % 3
        name = f"n{i}" if names else ""
        if kind == 0:
            y = g.add(a=y, b=b, name=name)
        elif kind == 1:
            y = g.relu(input=y, negative_slope=0.1, name=name, compute_data_type=D.HALF)
        else:
            y = g.mul(y, b, name=name)
    y.set_output(True)
    return g


def describe(g: cudnn.pygraph) -> list:
    rows = []
    for node in g.nodes:
        ports = {p: (t.name, tuple(t.dim), tuple(t.stride), t.data_type, t.is_virtual,
                     t.dim_assigned, t.stride_assigned, t.uid)
                 for p, t in (*node.inputs.items(), *node.outputs.items())}
        rows.append((node.name, node.spec.name, dict(node.params), node.compute_data_type,
                     ports))
    return rows


def general_only(monkeypatch) -> None:
    monkeypatch.setattr(op_builder, "_BINDERS", {pointwise.ADD: op_builder._no_binder,
                                                 pointwise.RELU: op_builder._no_binder,
                                                 pointwise.MUL: op_builder._no_binder})


@pytest.mark.parametrize("names", [False, True])
def test_the_one_pass_path_builds_what_the_general_path_builds(monkeypatch, names):
    fast = chain(7, names)
    general_only(monkeypatch)
    slow = chain(7, names)
    assert describe(fast) == describe(slow)
    fast.validate()
    slow.validate()
    assert describe(fast) == describe(slow)


def _graph_of(case, seed: int) -> tuple[cudnn.pygraph, object]:
    g = cudnn.pygraph(io_data_type=D.HALF, intermediate_data_type=D.FLOAT)
    built = case.make(g, random.Random(seed))
    result = getattr(g, case.op)(*built.args, **built.kwargs)
    return g, result


def _described(g: cudnn.pygraph, result) -> tuple:
    outs = result if isinstance(result, list) else [result]
    return (describe(g), [None if t is None else t.uid for t in outs],
            [(t.name, t.uid, t.data_type, t.data_type_provisional) for t in g.all_tensors()],
            dict(g._op_counters), g._uids.next_auto)


@pytest.mark.parametrize("seed", (0, 1))
@pytest.mark.parametrize("case", ir_op_cases.all_cases(), ids=lambda c: f"{c.op}-{c.id}")
def test_every_op_builds_the_same_graph_on_both_paths(monkeypatch, case, seed):
    g, result = _graph_of(case, seed)
    fast = _described(g, result)
    monkeypatch.setattr(op_builder, "_BINDERS", {spec: op_builder._no_binder
                                                 for spec in all_specs().values()})
    g, result = _graph_of(case, seed)
    assert _described(g, result) == fast
    g.validate()


def _equal_dims_graph(edit: str) -> cudnn.pygraph:
    """Nodes whose inputs have equal dims, then `edit`ed before validate (re-inferred)."""
    g = cudnn.pygraph(io_data_type=D.HALF, intermediate_data_type=D.FLOAT)
    x = g.tensor(name="x", dim=[2, 3, 4], stride=[12, 4, 1])
    b = g.tensor(name="b", dim=[2, 3, 4], stride=[12, 4, 1], data_type=D.FLOAT)
    y = g.add(a=x, b=b)
    z = g.relu(input=y, upper_clip=6.0)
    w = g.mul(z, b)
    w.set_output(True)
    if edit == "inputs":  # all three re-infer [5, 3, 4]
        x.set_dim([5, 3, 4])
        b.set_dim([5, 3, 4])
    elif edit == "broadcast":  # add's inputs differ: the check and inference run
        x.set_dim([1, 3, 4])
    elif edit == "caller_set":  # a caller-set output is checked, not re-inferred
        y.set_dim([2, 3, 4])
    return g


@pytest.mark.parametrize("edit", ["none", "inputs", "broadcast", "caller_set"])
def test_validate_infers_the_same_with_and_without_the_equal_dims_shortcut(monkeypatch, edit):
    fast = _equal_dims_graph(edit)
    fast.validate()
    monkeypatch.setattr(validation, "_FACTS", {})
    monkeypatch.setattr(validation, "decided_by_equal_dims", lambda spec: False)
    slow = _equal_dims_graph(edit)
    slow.validate()
    assert describe(fast) == describe(slow)
    if edit == "inputs":
        assert tuple(fast.nodes[-1].outputs["OUT_0"].dim) == (5, 3, 4)


def test_validate_still_rejects_a_wrong_caller_set_output_of_equal_inputs():
    g = _equal_dims_graph("none")
    g.nodes[0].outputs["OUT_0"].set_dim([2, 3, 5])
    with pytest.raises(cudnn.OpValueError, match="dims"):
        g.validate()


def test_specs_with_only_tensor_inputs_have_a_one_pass_builder():
    with_binder = {name for name, spec in all_specs().items()
                   if op_binders.binder(spec) is not None}
    assert {spec.name for spec in pointwise.SPECS} <= with_binder
    assert "matmul" in with_binder


def test_a_one_pass_builder_leaves_bad_calls_to_the_general_path():
    g = cudnn.pygraph()
    x = g.tensor(name="x", dim=[4, 2], stride=[2, 1], data_type=D.FLOAT)
    bind = op_binders.binder(pointwise.ADD)
    other = cudnn.pygraph().tensor(name="o", dim=[4, 2], stride=[2, 1])
    for args in ({"a": x, "b": None}, {"a": x, "b": other}, {"a": x, "b": x, "out_dims": [4, 2]},
                 {"a": x, "b": x, "unexpected": {"c": 1}}, {"a": x, "b": x, "name": 3},
                 {"a": x, "b": [1.0]}):
        assert bind(g, args) is op_binders.GENERAL, args
    assert g.nodes == [] and len(g.all_tensors()) == 1


def test_fast_views_equal_the_dataclass_constructors():
    g = chain(1)
    node = g.nodes[0]
    call = node.op_call()
    assert call == OpCall(pointwise.ADD, {"a": PortView((2, 3, 4), D.HALF),
                                          "b": PortView((1, 3, 1), D.HALF)}, {}, {}, {},
                          frozenset())


def test_outputs_and_nodes_are_the_guarded_classes():
    g = chain(2)
    out = g.nodes[0].outputs["OUT_0"]
    assert type(out) is Tensor and type(g.nodes[0]) is Node
    with pytest.raises(AttributeError):
        out.whatever = 1
    with pytest.raises(AttributeError):
        g.nodes[0].name = "other"
    out.dim[0] = 2  # an in-place edit counts as caller-set
    assert out.dim_assigned


def test_names_caller_chosen_and_automatic_never_collide():
    g = cudnn.pygraph()
    x = g.tensor(name="x", dim=[4], stride=[1], data_type=D.FLOAT)
    g.relu(input=x, name="relu.1")
    y = g.relu(input=x)
    z = g.relu(input=x)
    assert [n.name for n in g.nodes] == ["relu.1", "relu.0", "relu.2"]
    assert g.get_node("relu.2").outputs["OUT_0"] is z and g.get_node("relu.0").outputs["OUT_0"] is y
    assert g.get_node("nope") is None
    with pytest.raises(cudnn.OpValueError, match="node name not yet used"):
        g.relu(input=x, name="relu.2")


def test_errors_come_from_the_general_path_and_leave_the_graph_unchanged():
    g = cudnn.pygraph()
    x = g.tensor(name="x", dim=[4, 2], stride=[2, 1], data_type=D.FLOAT)
    y = g.tensor(name="y", dim=[3, 2], stride=[2, 1], data_type=D.FLOAT)
    with pytest.raises(cudnn.OpValueError, match="broadcast"):
        g.add(a=x, b=y)
    other = cudnn.pygraph().tensor(name="o", dim=[4, 2], stride=[2, 1])
    with pytest.raises(cudnn.OpValueError, match="a tensor of this graph"):
        g.add(a=x, b=other)
    assert g.nodes == [] and len(g.all_tensors()) == 2


def test_per_node_cost_is_flat_in_the_graph_size():
    def per_node(n: int) -> float:
        best = float("inf")
        for _ in range(3):
            t0 = time.process_time()
            chain(n)
            best = min(best, (time.process_time() - t0) / n)
        return best
    per_node(50)
    small, large = per_node(200), per_node(2000)
    assert large < 3 * small, (small, large)  # a scan per node would make it ~10x


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
