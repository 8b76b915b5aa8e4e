"""What the composite sdpa_backward graph computes, on CPU: the recorded builder calls are
run by a float64 interpreter with cuDNN's descriptor memory semantics
(graph_interpreter.py) on fresh random inputs, and dQ/dK/dV are compared with torch
autograd of float64 softmax attention. This checks the math and every layout of the
lowering (the transposed K/V views, the P/dS transposes, the head-group sums), not cuDNN's
kernels; tests/backend/test_native_backend_lowering.py runs the real thing on a GPU.
"""
import math
import zlib

import pytest

torch = pytest.importorskip("torch", reason="the reference and the interpreter use torch")

import cudnn  # noqa: E402
from cudnn.backend import loader, lowering  # noqa: E402
from cudnn.backend.sdpa_bwd_route import choose_route  # noqa: E402

import graph_interpreter  # noqa: E402

EXT = loader.extension()
if EXT is None:
    raise ImportError("composite tests need the built extension: " + loader.unavailable_reason())

DT = cudnn.data_type


@pytest.fixture(autouse=True)
def h200_route(monkeypatch, request):
    monkeypatch.setattr(lowering, "route_for", lambda ext, handle: choose_route(91900, 90))
    torch.manual_seed(zlib.crc32(request.node.name.encode()))


def layout(b, h, s, d, order):
    """A [b, h, s, d] tensor in memory order BSHD or BHSD, fp16-representable values."""
    if order == "bshd":
        x = torch.randn(b, s, h, d).permute(0, 2, 1, 3)
    else:
        x = torch.randn(b, h, s, d)
    return x.half().double()


def reference(q, k, v, do, scale):
    """O, logsumexp stats and the gradients of float64 attention (grouped heads repeated)."""
    group = q.shape[1] // k.shape[1]
    q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
    kk, vv = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    s = (q @ kk.transpose(-1, -2)) * scale
    o = torch.softmax(s, dim=-1) @ vv
    o.backward(do)
    stats = torch.logsumexp(s, dim=-1, keepdim=True)
    return o.detach(), stats.detach(), (q.grad, k.grad, v.grad)


def ir_input(g, value, name, dt=DT.HALF):
    return g.tensor(dim=list(value.shape), stride=list(value.stride()), data_type=dt, name=name)


@pytest.mark.parametrize("b, h, hk, s_q, s_kv, d, d_v, order, scale", [
    (2, 4, 4, 16, 24, 8, 8, "bshd", 0.3),
    (1, 3, 3, 20, 20, 16, 8, "bhsd", 1 / math.sqrt(16)),
    (2, 4, 2, 12, 18, 8, 8, "bshd", 0.5),      # grouped query heads
    (1, 6, 1, 10, 14, 8, 12, "bhsd", 0.25),    # one K/V head for all query heads
    (1, 2, 2, 9, 11, 8, 8, "bshd", None),      # no attn_scale: 1
], ids=["mha_bshd", "mha_bhsd_dv_smaller", "gqa_bshd", "mqa_bhsd_dv_larger", "no_scale"])
def test_composite_graph_computes_the_attention_gradients(b, h, hk, s_q, s_kv, d, d_v,
                                                          order, scale):
    q, do = layout(b, h, s_q, d, order), layout(b, h, s_q, d_v, order)
    k, v = layout(b, hk, s_kv, d, order), layout(b, hk, s_kv, d_v, order)
    o, stats, grads = reference(q, k, v, do, 1.0 if scale is None else scale)

    g = cudnn.pygraph(io_data_type=DT.HALF, intermediate_data_type=DT.FLOAT,
                      compute_data_type=DT.FLOAT)
    feeds = {"q": q, "k": k, "v": v, "o": o.contiguous(), "dO": do, "stats": stats}
    ir = {n: ir_input(g, t, n, DT.FLOAT if n == "stats" else DT.HALF) for n, t in feeds.items()}
    kwargs = {} if scale is None else {"attn_scale": scale}
    outs = g.sdpa_backward(ir["q"], ir["k"], ir["v"], ir["o"], ir["dO"], ir["stats"], **kwargs)
    for t in outs:
        t.set_output(True)
    g.validate()
    lowered = lowering.lower(g, EXT)
    assert "composite" in lowered.notes[0]

    values = graph_interpreter.run(lowered.backend, {ir[n].uid: t for n, t in feeds.items()})
    for name, t, ref in zip(("dQ", "dK", "dV"), outs, grads):
        got = values[t.uid]
        assert list(got.shape) == list(t.dim) == list(ref.shape), name
        err = ((got - ref).abs().max() / ref.abs().max()).item()
        assert err < 1e-10, f"{name}: relative error {err:.3e}"


def test_the_interpreter_can_fail_a_wrong_graph(monkeypatch):
    """A transpose dropped from the lowering (dS^T laid out as if packed, i.e. dS's memory
    reread without transposing) is caught."""
    from cudnn.backend.sdpa_bwd_composite import CompositeSdpaBackward

    real_shape = CompositeSdpaBackward._shape

    def packed_ds_t(self, bt, dims, strides, dtype, step):
        return real_shape(self, bt, dims, None if step == "dS_T" else strides, dtype, step)

    monkeypatch.setattr(CompositeSdpaBackward, "_shape", packed_ds_t)
    with pytest.raises(AssertionError, match="dK: relative error"):
        test_composite_graph_computes_the_attention_gradients(1, 2, 2, 8, 12, 8, 8, "bshd", 0.5)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
