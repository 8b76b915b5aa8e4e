"""DRAFT tests of cudnn.backend.lowering (issue 5 phase 2) against the IR.

They run once the IR (ops/, ir/) is on the path and skip before that, so this checkout
stays green while the layers land separately. CPU only: descriptors are finalized when a
libcudnn is reachable, nothing executes.
"""

import pytest

import cudnn
from cudnn.backend import loader

if not hasattr(cudnn, "pygraph"):
    pytest.skip("the IR (cudnn.pygraph) is not on this path yet", allow_module_level=True)

from cudnn.backend import lowering  # noqa: E402  (imports the IR's op schema)

EXT = loader.extension()
if EXT is None:
    raise ImportError("lowering tests need the built extension: " + loader.unavailable_reason())

DT = cudnn.data_type


def new_graph():
    return cudnn.pygraph(io_data_type=DT.HALF, intermediate_data_type=DT.FLOAT,
                         compute_data_type=DT.FLOAT)


def finalize_if_possible(lowered):
    if loader.is_available():
        lowered.backend.finalize_op_descriptors()


def test_matmul_chain_emits_one_builder_call_per_node_with_ir_uids():
    g = new_graph()
    a, b, bias = g.tensor(dim=[4, 16, 32]), g.tensor(dim=[4, 32, 8]), g.tensor(dim=[1, 1, 8])
    c = g.matmul(a, b)
    d = g.add(c, bias)
    y = g.relu(d, lower_clip=0.0)
    y.set_output(True)
    g.validate()
    lowered = lowering.lower(g, EXT)
    ops = lowered.backend.ops()
    assert [op["method"] for op in ops] == ["matmul", "add", "relu"]
    assert [op["name"] for op in ops] == [n.name for n in g.nodes]
    assert ops[2]["attrs"] == {"lower_clip": 0.0}
    assert {t.uid for t in (a, b, bias, c, d, y)} == set(lowered.backend.tensor_uids())
    assert lowered.tensors[y].get_is_virtual() is False and lowered.tensors[c].get_is_virtual()
    assert lowered.internal_uids == frozenset()
    # Inferred layouts stay provisional: C++ infers them itself and they agree.
    assert lowered.tensors[c].get_dim_assigned() is False
    assert lowered.tensors[c].get_dim() == list(c.dim)
    finalize_if_possible(lowered)


def test_float_attn_scale_becomes_an_internal_scalar_above_every_ir_uid():
    g = new_graph()
    q = g.tensor(dim=[1, 2, 64, 32])
    o, stats = g.sdpa(q, q, q, attn_scale=0.125, generate_stats=True)
    o.set_output(True)
    stats.set_output(True)
    g.validate()
    lowered = lowering.lower(g, EXT)
    (internal,) = lowered.internal_uids
    assert internal > max(t.uid for t in (q, o, stats))
    scale = lowered.backend.query_tensor_attributes_of_uid(internal)
    assert scale.get_pass_by_value() == 0.125 and scale.get_name() == "sdpa.0::attn_scale"
    # sdpa pushes dims and strides even when inferred
    assert lowered.tensors[o].get_dim_assigned() and lowered.tensors[o].get_stride_assigned()
    finalize_if_possible(lowered)


def test_push_ops_push_their_dims():
    g = new_graph()
    x = g.tensor(dim=[4, 64], data_type=DT.FLOAT)
    r = g.reduction(x, mode=cudnn.reduction_mode.ADD)
    r.set_dim([4, 1]).set_output(True)
    g.validate()
    lowered = lowering.lower(g, EXT)
    assert lowered.tensors[r].get_dim() == [4, 1]
    assert lowered.backend.ops()[0]["attrs"] == {"mode": cudnn.reduction_mode.ADD.value}


def test_backend_declines_surface_as_the_ir_error():
    g = new_graph()
    q = g.tensor(dim=[1, 2, 64, 32])
    o, _ = g.sdpa(q, q, q, use_causal_mask=True)
    o.set_output(True)
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="use_causal_mask=True"):
        lowering.lower(g, EXT)


def test_python_only_ops_decline_before_anything_is_built():
    g = new_graph()
    t, h, k = 64, 2, 64
    q = g.tensor(dim=[t, h, k])
    gate = g.tensor(dim=[t, h], data_type=DT.FLOAT)
    cu = g.tensor(dim=[2], data_type=DT.INT32)
    out = g.gdn(q, q, q, gate, gate, cu)
    (out[0] if isinstance(out, list) else out).set_output(True)
    reasons = lowering.no_lowering_reasons(g, EXT)
    assert reasons and reasons[0].startswith("No valid engine configs for GDN")
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="No valid engine configs for GDN"):
        lowering.lower(g, EXT)


def test_verify_uids_catches_a_backend_uid_that_drifted():
    g = new_graph()
    a = g.tensor(dim=[8, 8])
    y = g.relu(a)
    y.set_output(True)
    g.validate()
    lowered = lowering.lower(g, EXT)
    lowered.tensors[y].set_uid(y.uid + 100)
    with pytest.raises(AssertionError, match=f"IR uid {y.uid}, backend uid {y.uid + 100}"):
        lowering.verify_uids(lowered)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
