"""torch is optional: torch dtypes, torch.Size and torch tensors are accepted where the
classic API accepts them (skipped when torch is not installed)."""
import pytest

import cudnn

torch = pytest.importorskip("torch", exc_type=ImportError)
D = cudnn.data_type


def test_torch_dtypes_and_sizes():
    g = cudnn.pygraph(io_data_type=torch.float16, intermediate_data_type=torch.float32)
    assert g.context.io_data_type is D.HALF and g.context.compute_data_type is D.HALF
    t = g.tensor(torch.Size([2, 3]), data_type=torch.bfloat16)
    assert list(t.dim) == [2, 3] and t.data_type is D.BFLOAT16
    t.set_data_type(torch.int32).set_dim(torch.Size([6]))
    assert t.data_type is D.INT32 and list(t.dim) == [6]
    out = g.exp(g.tensor([4]), compute_data_type=torch.float32)
    assert g.nodes[0].compute_data_type is D.FLOAT and out is not None
    with pytest.raises(cudnn.OpTypeError, match="set_data_type"):
        t.set_data_type(torch.complex64)


def test_torch_tensors_are_auto_described_and_bound():
    g = cudnn.pygraph()
    x = torch.zeros(4, 6, dtype=torch.float16).t()  # non-contiguous view
    w = torch.zeros(4, 5, dtype=torch.float16)
    y = g.matmul(x, w)
    node = g.nodes[0]
    a = node.inputs["A"]
    assert a.name == "matmul.0::A" and list(a.dim) == [6, 4] and list(a.stride) == [1, 6]
    assert a.data_type is D.HALF and not a.is_pass_by_value
    assert g.auto_bindings() == {a.uid: x, node.inputs["B"].uid: w}
    assert list(y.dim) == [6, 5]
    scale = g.scale(g.tensor([2, 2]), torch.tensor([0.5]))
    assert g.nodes[1].inputs["scale"].is_pass_by_value and scale is not None


def test_tensor_like_from_torch():
    g = cudnn.pygraph()
    t = g.tensor_like(torch.ones(2, 3, 4, dtype=torch.bfloat16), name="x")
    assert (list(t.dim), list(t.stride), t.data_type) == ([2, 3, 4], [12, 4, 1], D.BFLOAT16)
    s = g.tensor_scalar(torch.tensor(3, dtype=torch.int32))
    assert s.data_type is D.INT32


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
