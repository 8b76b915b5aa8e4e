"""Caller-set versus inferred (provisional) layouts, conditional outputs, ragged offsets."""
import numpy as np
import pytest

import cudnn

D = cudnn.data_type


def test_tensor_stride_is_provisional_unless_given():
    g = cudnn.pygraph()
    a = g.tensor([2, 3, 4])
    b = g.tensor([2, 3, 4], stride=[1, 2, 6])
    assert a.dim_assigned and not a.stride_assigned and list(a.stride) == [12, 4, 1]
    assert b.stride_assigned and list(b.stride) == [1, 2, 6]
    a.set_dim([5, 6])
    assert list(a.stride) == [6, 1] and not a.stride_assigned


def test_inferred_output_dims_follow_their_inputs_until_the_caller_sets_them():
    g = cudnn.pygraph(io_data_type=D.HALF)
    a, b = g.tensor([4, 8]), g.tensor([8, 3])
    c = g.matmul(a, b)
    assert list(c.dim) == [4, 3] and not c.dim_assigned
    a.set_dim([6, 8])
    g.validate()
    assert list(c.dim) == [6, 3] and list(c.stride) == [3, 1]
    c.set_dim([6, 3]).set_stride([1, 6])
    g.validate()
    assert list(c.dim) == [6, 3] and list(c.stride) == [1, 6]
    assert c.dim_assigned and c.stride_assigned


def test_backend_layout_sync_keeps_a_frozen_graph_immutable():
    g = cudnn.pygraph()
    a = g.tensor([2, 3])
    r = g.reshape(a, out_dims=[6])
    c = g.concatenate([a, a], axis=0)
    g.validate()
    g.lifecycle.freeze()
    c._provisional_dims((4, 3))  # what the backend's layout copy-back does
    assert c.dim == (4, 3) and c.stride == (3, 1) and not c.dim_assigned
    assert isinstance(r.dim, tuple)


def test_out_dims_sets_caller_layout():
    g = cudnn.pygraph()
    q = g.tensor([10, 2, 8])
    k = g.tensor([10, 2, 8])
    v = g.tensor([10, 2, 4])
    gate = g.tensor([10, 2])
    beta = g.tensor([10, 2])
    cu = g.tensor([3], data_type=D.INT32)
    o = g.gdn(q, k, v, gate, beta, cu, out_dims={"O": [10, 2, 4]})[0]
    assert o.dim_assigned and list(o.dim) == [10, 2, 4]
    with pytest.raises(cudnn.OpValueError, match="absent output 'final_state'"):
        g.gdn(q, k, v, gate, beta, cu, out_dims={"final_state": [2, 2, 4, 8]})


def test_in_place_edit_counts_as_caller_set():
    g = cudnn.pygraph()
    a, b = g.tensor([4, 8]), g.tensor([8, 3])
    c = g.matmul(a, b)
    c.dim[0] = 4
    assert c.dim_assigned
    c.stride.clear()
    c.stride.extend([1, 4])
    assert c.stride_assigned
    g.validate()
    assert list(c.stride) == [1, 4]


def test_conditional_outputs_are_none_and_unwired():
    g = cudnn.pygraph()
    q = g.tensor([6, 1, 4])
    v = g.tensor([6, 1, 4])
    gate, beta = g.tensor([6, 1]), g.tensor([6, 1])
    cu = g.tensor([2], data_type=D.INT32)
    outs = g.gdn(q, q, v, gate, beta, cu)
    assert outs[1:] == [None, None, None]
    assert set(g.nodes[0].outputs) == {"O"}
    outs = g.gdn(q, q, v, gate, beta, cu, output_final_state=True, checkpoint_every_n_tokens=2)
    assert outs[1] is not None and outs[2] is not None
    assert list(outs[2].dim) == [max(6 // 2 + 1, 1), 1, 4, 4]


def test_thd_ragged_offsets_on_inputs_and_outputs():
    g = cudnn.pygraph(io_data_type=D.HALF, intermediate_data_type=D.FLOAT)
    batch = 3
    x = g.tensor([batch, 2, 16, 8])
    offsets = g.tensor([batch + 1, 1, 1, 1], data_type=D.INT32, name="offsets")
    x.set_ragged_offset(offsets).set_ragged_offset_multiplier(2)
    y = g.exp(x)
    y.set_output(True).set_ragged_offset(offsets)
    g.validate()
    assert y.ragged_offset is offsets and x.ragged_offset_multiplier == 2
    assert offsets in g.get_inputs()
    bad = g.tensor([batch, 1, 1, 1], data_type=D.INT32)
    y.set_ragged_offset(bad)
    with pytest.raises(ValueError, match="B \\+ 1 = 4 entries"):
        g.validate()
    y.set_ragged_offset(g.tensor([batch + 1], data_type=D.FLOAT))
    with pytest.raises(ValueError, match="INT32 or INT64"):
        g.validate()
    with pytest.raises(cudnn.OpValueError, match="multiplier"):
        x.set_ragged_offset_multiplier(0)
    with pytest.raises(cudnn.OpValueError, match="same graph"):
        x.set_ragged_offset(cudnn.pygraph().tensor([4]))


def test_tensor_like_and_framework_arrays():
    g = cudnn.pygraph()
    arr = np.zeros((4, 6), dtype=np.float16)[:, ::2]
    t = g.tensor_like(arr)
    assert list(t.dim) == [4, 3] and list(t.stride) == [6, 2] and t.data_type == D.HALF
    assert t.dim_assigned and t.stride_assigned and not t.is_pass_by_value
    one = g.tensor_like(np.ones((1,), dtype=np.float32))
    assert one.is_pass_by_value
    copy = g.tensor_like(t, name="copy")
    assert list(copy.dim) == [4, 3] and copy.data_type == D.HALF and copy.name == "copy"
    s = g.tensor_scalar(0.5)
    assert s.is_pass_by_value and s.pass_by_value == 0.5 and list(s.dim) == [1, 1, 1, 1]
    assert s.data_type == D.FLOAT and s.name.startswith("scalar_")


def test_classic_graph_context_manager():
    handle = object()
    with cudnn.graph(handle, name="g", sm_count=8) as (g, tensors):
        tensors.append(g.tensor([2]))
        assert g.handle is handle and g.name == "g" and g.backend_options.sm_count == 8
        assert g.context.io_data_type == D.HALF and g.context.compute_data_type == D.FLOAT
    assert len(tensors) == 1


def test_dtype_defaults_and_fill():
    g = cudnn.pygraph(io_data_type=D.HALF, intermediate_data_type=D.FLOAT)
    a = g.tensor([2, 2])
    v = g.tensor([2, 2], is_virtual=True)
    assert a.data_type == D.HALF and v.data_type == D.FLOAT and a.data_type_provisional
    fixed = g.tensor([2, 2], data_type=D.BFLOAT16)
    assert not fixed.data_type_provisional
    out = g.add(a, fixed)
    assert out.data_type is None
    g.validate()
    assert out.data_type == D.FLOAT
    out.set_output(True)
    g.validate()
    assert out.data_type == D.HALF


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
