"""The engine contract types and resolve_node_buffers, without any framework."""
from __future__ import annotations

import pytest

import cudnn
from cudnn.engines.base import (BaseEngine, EagerPlan, ExecutionContext, PlanConfig,
                                is_decline, public_knobs_repr, resolve_node_buffers)
from cudnn.ops.enums import knob_type

D = cudnn.data_type


# -- PlanConfig / ExecutionContext ------------------------------------------------------------
def test_plan_config_is_frozen_and_checked():
    plan = PlanConfig(20101, {"x": 1})
    assert plan == PlanConfig(20101, {"x": 1}) and plan.cpp_index is None
    with pytest.raises(AttributeError):
        plan.engine_id = 3
    with pytest.raises(TypeError, match="engine_id must be an int"):
        PlanConfig("20101")
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError, match="cpp_index"):
            PlanConfig(5, cpp_index=bad)


def test_execution_context_overrides_are_normalized_and_checked():
    ctx = ExecutionContext(override_uids=[3, 4], override_shapes=[[1, 2], (3,)],
                           override_strides=[[2, 1], [1]])
    assert ctx.override_uids == (3, 4) and ctx.override_shapes == ((1, 2), (3,))
    assert ctx.has_overrides and not ExecutionContext().has_overrides
    with pytest.raises(ValueError, match="equal lengths"):
        ExecutionContext(override_uids=[3], override_shapes=[[1], [2]])
    with pytest.raises(ValueError, match="need override_uids"):
        ExecutionContext(override_shapes=[[1]])
    with pytest.raises(TypeError, match="must be a sequence"):
        ExecutionContext(override_uids=3)
    with pytest.raises(AttributeError):
        ctx.workspace = 1


# -- BaseEngine defaults -----------------------------------------------------------------------
class Eager(BaseEngine):
    name = "eager"
    default_knobs = {knob_type.TILE_SIZE: 64, knob_type.STAGES: 3}

    def __init__(self):
        self.engine_id = 30000
        self.ran = []

    def get_workspace_size(self):
        return 128

    def execute(self, graph, data, ctx):
        self.ran.append((graph, dict(data), ctx))


def test_default_propose_build_and_eager_execution():
    engine = Eager()
    (plan,) = engine.propose_plans(graph=None)
    assert plan == PlanConfig(30000, Eager.default_knobs)
    compiled = engine.build_plan(None, plan)
    assert isinstance(compiled, EagerPlan) and compiled.get_workspace_size() == 128
    ctx = ExecutionContext(workspace="ws")
    compiled.execute("graph", {1: "buf"}, ctx)
    assert engine.ran == [("graph", {1: "buf"}, ctx)]
    assert engine.plan_name(plan) == "eager[STAGES=3, TILE_SIZE=64]"
    assert engine.plan_name(PlanConfig(30000)) == "eager"
    assert engine.knobs_from_public(engine.knobs_to_public(plan.knobs)) == plan.knobs
    assert repr(engine) == "Eager(name='eager', engine_id=30000)"


def test_an_engine_without_execute_or_build_plan_fails_loudly():
    class Hollow(BaseEngine):
        name = "hollow"
        engine_id = 30001

    with pytest.raises(NotImplementedError, match="must implement execute"):
        Hollow().build_plan(None, PlanConfig(30001)).execute(None, {}, ExecutionContext())
    with pytest.raises(ValueError, match="has no engine_id"):
        BaseEngine().propose_plans(None)
    with pytest.raises(TypeError, match="must override knobs_to_public"):
        Hollow().knobs_to_public(object())


def test_owned_ids_and_public_knob_names():
    e = Eager()
    assert list(e.owned_ids()) == [30000] and e.owns_id(30000) and not e.owns_id(30001)
    e.id_end = 30003
    assert e.owns_id(30002) and not e.owns_id(30003)
    assert public_knobs_repr({2: 7, knob_type.SWIZZLE: 1, 99_999: 4}) == \
        "99999=4, SWIZZLE=1, TILE_SIZE=7"


def test_decline_types():
    assert is_decline(NotImplementedError()) and is_decline(cudnn.cudnnGraphNotSupportedError())
    assert not is_decline(RuntimeError()) and not is_decline(ImportError())


# -- resolve_node_buffers ------------------------------------------------------------------
class Buf:
    """Exports __dlpack__; optionally requires grad (detach returns a plain copy)."""

    def __init__(self, label, requires_grad=False):
        self.label, self.requires_grad = label, requires_grad
        self.detached = 0

    def __dlpack__(self, stream=None):
        raise AssertionError("not consumed here")

    def detach(self):
        self.detached += 1
        return Buf(self.label + "/detached")


class Cai:
    __cuda_array_interface__ = {"shape": (3, 4), "typestr": "<f4", "data": (0, False)}


def two_node_graph():
    g = cudnn.pygraph(io_data_type=D.FLOAT, intermediate_data_type=D.FLOAT)
    x = g.tensor([2, 3], name="x")
    w = g.tensor([3, 4], name="w")
    h = g.matmul(x, w, name="mm")        # virtual intermediate
    y = g.relu(h, name="act")
    y.set_output(True)
    s = g.tensor_scalar(2.0, name="two")
    z = g.mul(y, s, name="scale")
    z.set_output(True)
    g.validate()
    return g, x, w, h, y, z, s


def test_nodes_get_their_ports_buffers():
    g, x, w, h, y, z, s = two_node_graph()
    bufs = {x.uid: Buf("x"), w.uid: Cai(), y.uid: Buf("y"), z.uid: Buf("z")}
    out = resolve_node_buffers(g, bufs)
    mm, act, scale = (g.get_node(n) for n in ("mm", "act", "scale"))
    assert dict(out[mm].inputs) == {"A": bufs[x.uid], "B": bufs[w.uid]}
    assert dict(out[mm].outputs) == {}  # virtual and unbound: engine-internal
    assert dict(out[act].outputs) == {"OUT_0": bufs[y.uid]}
    assert out[scale].input("b") == 2.0  # the embedded scalar
    assert out[act].output("OUT_0") is bufs[y.uid]
    with pytest.raises(ValueError, match="node 'mm': no buffer bound for output port 'C'"):
        out[mm].output("C")


def test_a_missing_non_virtual_buffer_names_node_port_and_tensor():
    g, x, w, h, y, z, s = two_node_graph()
    with pytest.raises(ValueError, match=r"node 'mm': no buffer for input port 'B' "
                                         r"\(tensor 'w', uid \d+\)"):
        resolve_node_buffers(g, {x.uid: Buf("x"), y.uid: Buf("y"), z.uid: Buf("z")})
    with pytest.raises(ValueError, match="node 'scale': no buffer for output port 'OUT_0'"):
        resolve_node_buffers(g, {x.uid: Buf("x"), w.uid: Buf("w"), y.uid: Buf("y")})


def test_buffers_must_speak_dlpack_or_cuda_array_interface():
    g, x, w, h, y, z, s = two_node_graph()
    with pytest.raises(TypeError, match="output port 'OUT_0'.*is a int"):
        resolve_node_buffers(g, {x.uid: Buf("x"), w.uid: Buf("w"), y.uid: 0x7F00, z.uid: Buf("z")})


class Shaped(Buf):
    """A buffer that reports dims and a dtype, as torch and numpy arrays do."""

    def __init__(self, label, shape, dtype=D.FLOAT):
        super().__init__(label)
        self.shape, self.dtype = shape, dtype


def test_a_buffer_must_have_the_declared_dims_and_dtype():
    g, x, w, h, y, z, s = two_node_graph()
    good = {x.uid: Shaped("x", (2, 3)), w.uid: Cai(), y.uid: Shaped("y", (2, 4)),
            z.uid: Shaped("z", (1, 1, 2, 4))}  # y broadcast with a rank-4 scalar
    resolve_node_buffers(g, good)
    with pytest.raises(ValueError, match=r"port 'OUT_0'.*has dims \[2, 4\]; the graph "
                                         r"declares \[1, 1, 2, 4\]"):
        resolve_node_buffers(g, {**good, z.uid: Shaped("z", (2, 4))})
    with pytest.raises(ValueError, match=r"node 'mm': the buffer for input port 'A' "
                                         r"\(tensor 'x', uid \d+\) has dims \[3, 2\]; "
                                         r"the graph declares \[2, 3\]"):
        resolve_node_buffers(g, {**good, x.uid: Shaped("x", (3, 2))})
    with pytest.raises(ValueError, match="output port 'OUT_0'.* has dtype HALF; the graph "
                                         "declares FLOAT"):
        resolve_node_buffers(g, {**good, z.uid: Shaped("z", (1, 1, 2, 4), D.HALF)})
    cai = Cai()
    cai.__cuda_array_interface__ = {**Cai.__cuda_array_interface__, "shape": (4, 3)}
    with pytest.raises(ValueError, match="port 'B'.*has dims \\[4, 3\\]"):
        resolve_node_buffers(g, {**good, w.uid: cai})
    # a call's override dims replace the declared ones for that uid
    ctx = ExecutionContext(override_uids=[x.uid], override_shapes=[[3, 2]])
    resolve_node_buffers(g, {**good, x.uid: Shaped("x", (3, 2))}, ctx)


def test_requires_grad_buffers_are_detached_once_per_call():
    g, x, w, h, y, z, s = two_node_graph()
    y_buf = Buf("y", requires_grad=True)  # read by 'scale', written by 'act'
    out = resolve_node_buffers(g, {x.uid: Buf("x"), w.uid: Buf("w"), y.uid: y_buf,
                                   z.uid: Buf("z")})
    act, scale = g.get_node("act"), g.get_node("scale")
    assert y_buf.detached == 1
    assert out[act].output("OUT_0") is out[scale].input("a")
    assert out[act].output("OUT_0").label == "y/detached"


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
