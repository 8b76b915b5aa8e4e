"""GPU suite: IR graphs built natively with cudnn.pygraph, planned by the router, lowered to
the cuDNN backend, executed on the GPU and checked against float64 torch references on
fresh random inputs. Every run asserts it went through the backend plan path
(native_runner.assert_backend_path); kernel names are not asserted.

Run on the GPU machine (no Bazel there), from the repository root:
  python3 -m pip install --no-build-isolation -e .    # the extension, built in place
  python3 -m pytest tests/backend -q -s
`-s` shows the result table (op, shape, relative error, bound, pass, plan; "decl" marks a
graph the backend declined where the test expects it, with the reason). SDPA backward runs
the native SDPA_BWD descriptor where cuDNN serves it (cuDNN >= 9.21 on sm_100+) and the
composite fused-attention graph elsewhere (e.g. the H200 with cuDNN 9.19); the test asserts
which one was lowered. `python3 tests/backend/sdpa_bwd_probe.py` shows what cuDNN itself
does with the native descriptor.
"""
import math

import pytest

torch = pytest.importorskip("torch", reason="the GPU suite needs torch")

import cudnn  # noqa: E402
from cudnn.backend import loader  # noqa: E402
from cudnn.backend.sdpa_bwd_route import choose_route  # noqa: E402
from tests.backend.native_runner import (  # noqa: E402
    check, declined, ir_input, run_on_backend)
from tests.backend.suite_fixtures import handle, result_table, seeded  # noqa: E402,F401
from tests.backend.suite_fixtures import gpu_suite_marks  # noqa: E402

pytestmark = gpu_suite_marks()

DT = cudnn.data_type
TRAINING = cudnn.norm_forward_phase.TRAINING
# Relative to the largest reference value: fp16 storage (2^-11) after fp32 accumulation
# leaves a few fp16 ulps on outputs; gradients go through more roundings.
FP16_OUT, FP16_GRAD, FP32_OUT = 5e-3, 2e-2, 1e-4
#: where inputs are made ("cpu" in the CPU dry run, native_dry_run_test.py).
DEVICE = "cuda"


def new_graph(handle, io=DT.HALF):
    return cudnn.pygraph(io_data_type=io, intermediate_data_type=DT.FLOAT,
                         compute_data_type=DT.FLOAT, handle=handle)


def randn(*shape, scale=1.0, dtype=torch.float16):
    return (torch.randn(*shape, device=DEVICE) * scale).to(dtype)


# -- matmul and pointwise -----------------------------------------------------------------
@pytest.mark.parametrize("a_shape, b_shape", [((3, 64, 128), (3, 128, 96)),
                                              ((64, 128), (3, 128, 96))],
                         ids=["batched", "broadcast_a"])
def test_matmul(handle, a_shape, b_shape):
    g = new_graph(handle)
    a, b = randn(*a_shape, scale=0.5), randn(*b_shape, scale=0.5)
    ta, tb = ir_input(g, a, "a"), ir_input(g, b, "b")
    c = g.matmul(ta, tb)
    c.set_output(True)
    (out,), plan = run_on_backend(g, {ta: a, tb: b}, [c])
    check(f"matmul {a_shape}x{b_shape}", out, a.double() @ b.double(), FP16_OUT, plan)


def test_matmul_bias_gelu_epilogue(handle):
    g = new_graph(handle)
    a, b, bias = randn(4, 64, 128, scale=0.3), randn(4, 128, 64, scale=0.3), randn(64)
    ta, tb, tbias = ir_input(g, a, "a"), ir_input(g, b, "b"), ir_input(g, bias, "bias")
    y = g.gelu(g.add(g.matmul(ta, tb), tbias))
    y.set_output(True)
    (out,), plan = run_on_backend(g, {ta: a, tb: b, tbias: bias}, [y])
    ref = torch.nn.functional.gelu(a.double() @ b.double() + bias.double())
    check("matmul+bias+gelu", out, ref, FP16_OUT, plan)


def pointwise_chain(g, tx, ty, tb):
    """sigmoid(relu(x * 2 + y) + b), the scalar passed by value."""
    return g.sigmoid(g.add(g.relu(g.add(g.mul(tx, g.tensor_scalar(2.0)), ty)), tb))


def pointwise_reference(x, y, b):
    return torch.sigmoid(torch.relu(x.double() * 2.0 + y.double()) + b.double())


@pytest.mark.parametrize("bias_rank", [4, 3], ids=["bias_1C11", "bias_C11_padded"])
def test_pointwise_chain_with_scalar_and_channel_bias(handle, bias_rank):
    """cuDNN's pointwise fusion engine takes fully packed NHWC-ordered operands (its support
    check refuses NCHW and plain row-major ones), so x and y are channels-last and the bias
    is per channel, [1, C, 1, 1] in channels-last strides; given as [C, 1, 1] it is padded
    to that same layout by the lowering."""
    n, c, h, w = 8, 64, 4, 24
    x, y, b = nhwc(n, c, h, w), nhwc(n, c, h, w), nhwc(1, c, 1, 1)
    bias = b if bias_rank == 4 else b.view(c, 1, 1)
    g = new_graph(handle)
    tx, ty, tb = ir_input(g, x, "x"), ir_input(g, y, "y"), ir_input(g, bias, "b")
    z = pointwise_chain(g, tx, ty, tb)
    z.set_output(True)
    (out,), plan = run_on_backend(g, {tx: x, ty: y, tb: bias}, [z])
    check(f"pointwise chain NHWC, bias rank {bias_rank}", out, pointwise_reference(x, y, b),
          FP16_OUT, plan)


def test_pointwise_chain_in_a_layout_cudnn_refuses_is_a_clean_decline(handle):
    """Row-major [B, M, N] operands with a rank-1 bias: cuDNN 9.19 on sm_90 proposes no
    engine for them (NOT_SUPPORTED_LAYOUT in its log). Whatever a given cuDNN decides, the
    answer is either correct numbers or a cudnnGraphNotSupportedError that tells the user how
    to see cuDNN's reasons; never a crash or another exception."""
    x, y, b = randn(8, 64, 96), randn(8, 64, 96), randn(96)
    g = new_graph(handle)
    tx, ty, tb = ir_input(g, x, "x"), ir_input(g, y, "y"), ir_input(g, b, "b")
    z = pointwise_chain(g, tx, ty, tb)
    z.set_output(True)
    try:
        (out,), plan = run_on_backend(g, {tx: x, ty: y, tb: b}, [z])
    except cudnn.cudnnGraphNotSupportedError as exc:
        assert "CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=stderr" in str(exc), exc
        declined("pointwise chain row-major (rank 3)", [8, 64, 96], str(exc))
        return
    check("pointwise chain row-major (rank 3)", out, pointwise_reference(x, y, b), FP16_OUT, plan)


def test_reduction_sum(handle):
    g = new_graph(handle, io=DT.FLOAT)
    x = randn(64, 512, dtype=torch.float32)
    tx = ir_input(g, x, "x")
    r = g.reduction(tx, mode=cudnn.reduction_mode.ADD, out_dims=[64, 1])
    r.set_output(True)
    (out,), plan = run_on_backend(g, {tx: x}, [r])
    check("reduction ADD", out, x.double().sum(dim=1, keepdim=True), FP32_OUT, plan)


# -- convolution --------------------------------------------------------------------------
CONV = dict(padding=[1, 1], stride=[1, 1], dilation=[1, 1])


def nhwc(*shape, scale=1.0):
    return randn(*shape, scale=scale).to(memory_format=torch.channels_last)


def test_conv_fprop_nhwc(handle):
    g = new_graph(handle)
    x, w = nhwc(4, 32, 16, 16), nhwc(64, 32, 3, 3, scale=0.2)
    tx, tw = ir_input(g, x, "x"), ir_input(g, w, "w")
    y = g.conv_fprop(tx, tw, **CONV)
    y.set_output(True)
    (out,), plan = run_on_backend(g, {tx: x, tw: w}, [y])
    ref = torch.nn.functional.conv2d(x.double().cpu(), w.double().cpu(), padding=1)
    check("conv_fprop NHWC", out, ref, FP16_OUT, plan)


def test_conv_dgrad_and_wgrad(handle):
    x, w, dy = nhwc(2, 16, 12, 12), nhwc(32, 16, 3, 3, scale=0.2), nhwc(2, 32, 12, 12)
    g = new_graph(handle)
    tdy, tw = ir_input(g, dy, "dy"), ir_input(g, w, "w")
    dx = g.conv_dgrad(tdy, tw, **CONV)
    dx.set_output(True)
    (got_dx,), plan = run_on_backend(g, {tdy: dy, tw: w}, [dx])
    ref_dx = torch.nn.grad.conv2d_input(x.shape, w.double().cpu(), dy.double().cpu(), padding=1)
    check("conv_dgrad NHWC", got_dx, ref_dx, FP16_OUT, plan)

    g = new_graph(handle)
    tx, tdy = ir_input(g, x, "x"), ir_input(g, dy, "dy")
    dw = g.conv_wgrad(tx, tdy, **CONV)
    dw.set_dim(list(w.shape)).set_output(True)
    (got_dw,), plan = run_on_backend(g, {tx: x, tdy: dy}, [dw])
    ref_dw = torch.nn.grad.conv2d_weight(x.double().cpu(), w.shape, dy.double().cpu(), padding=1)
    check("conv_wgrad NHWC", got_dw, ref_dw, FP16_OUT, plan)


# -- normalizations -----------------------------------------------------------------------
def norm_inputs(g, n, c):
    x = randn(n, c, 1, 1)
    scale = torch.rand(1, c, 1, 1, device=DEVICE) + 0.5
    bias = torch.randn(1, c, 1, 1, device=DEVICE)
    return x, scale, bias, ir_input(g, x, "x"), ir_input(g, scale, "scale"), \
        ir_input(g, bias, "bias")


def test_layernorm_forward_and_backward(handle):
    n, c, eps = 32, 256, 1e-5
    g = new_graph(handle)
    x, scale, bias, tx, ts, tb = norm_inputs(g, n, c)
    y, mean, inv = g.layernorm(tx, ts, tb, g.tensor_scalar(eps), norm_forward_phase=TRAINING)
    y.set_output(True)
    for t in (mean, inv):  # statistics stay fp32 (an output would default to the io type)
        t.set_data_type(DT.FLOAT).set_output(True)
    (got_y, got_mean, got_inv), plan = run_on_backend(g, {tx: x, ts: scale, tb: bias},
                                                      [y, mean, inv])
    x64 = x.double().reshape(n, c).requires_grad_()
    mu, var = x64.mean(dim=1), x64.var(dim=1, unbiased=False)
    ref = (x64 - mu[:, None]) / torch.sqrt(var[:, None] + eps) * scale.double().reshape(1, c) \
        + bias.double().reshape(1, c)
    check("layernorm fwd Y", got_y, ref, FP16_OUT, plan)
    check("layernorm fwd mean", got_mean, mu, FP32_OUT, plan)
    check("layernorm fwd inv_var", got_inv, 1.0 / torch.sqrt(var + eps), FP32_OUT, plan)

    dy = randn(n, c, 1, 1)
    gb = new_graph(handle)
    tdy, tx2, ts2 = ir_input(gb, dy, "dy"), ir_input(gb, x, "x"), ir_input(gb, scale, "scale")
    tmean, tinv = ir_input(gb, got_mean, "mean"), ir_input(gb, got_inv, "inv_var")
    dx, dscale, dbias = gb.layernorm_backward(tdy, tx2, ts2, tmean, tinv)
    dx.set_output(True)
    for t in (dscale, dbias):
        t.set_data_type(DT.FLOAT).set_output(True)
    (got_dx, got_ds, got_db), plan = run_on_backend(
        gb, {tdy: dy, tx2: x, ts2: scale, tmean: got_mean, tinv: got_inv}, [dx, dscale, dbias])
    scale64 = scale.double().reshape(1, c).requires_grad_()
    bias64 = bias.double().reshape(1, c).requires_grad_()
    out = (x64 - mu[:, None]) / torch.sqrt(var[:, None] + eps) * scale64 + bias64
    out.backward(dy.double().reshape(n, c))
    check("layernorm bwd dX", got_dx, x64.grad, FP16_GRAD, plan)
    check("layernorm bwd dScale", got_ds, scale64.grad, FP16_GRAD, plan)
    check("layernorm bwd dBias", got_db, bias64.grad, FP16_GRAD, plan)


def test_rmsnorm_forward_and_backward(handle):
    n, c, eps = 16, 512, 1e-6
    g = new_graph(handle)
    x, scale, _, tx, ts, _ = norm_inputs(g, n, c)
    y, inv = g.rmsnorm(tx, ts, None, g.tensor_scalar(eps), norm_forward_phase=TRAINING)
    y.set_output(True)
    inv.set_data_type(DT.FLOAT).set_output(True)
    (got_y, got_inv), plan = run_on_backend(g, {tx: x, ts: scale}, [y, inv])
    x64 = x.double().reshape(n, c).requires_grad_()
    scale64 = scale.double().reshape(1, c).requires_grad_()
    inv_ref = 1.0 / torch.sqrt((x64 * x64).mean(dim=1, keepdim=True) + eps)
    out = x64 * inv_ref * scale64
    check("rmsnorm fwd Y", got_y, out, FP16_OUT, plan)
    check("rmsnorm fwd inv_var", got_inv, inv_ref, FP32_OUT, plan)

    dy = randn(n, c, 1, 1)
    gb = new_graph(handle)
    tdy, tx2, ts2 = ir_input(gb, dy, "dy"), ir_input(gb, x, "x"), ir_input(gb, scale, "scale")
    tinv = ir_input(gb, got_inv, "inv_var")
    dx, dscale, _ = gb.rmsnorm_backward(tdy, tx2, ts2, tinv, has_dbias=False)
    dx.set_output(True)
    dscale.set_data_type(DT.FLOAT).set_output(True)
    (got_dx, got_ds), plan = run_on_backend(gb, {tdy: dy, tx2: x, ts2: scale, tinv: got_inv},
                                            [dx, dscale])
    out.backward(dy.double().reshape(n, c))
    check("rmsnorm bwd dX", got_dx, x64.grad, FP16_GRAD, plan)
    check("rmsnorm bwd dScale", got_ds, scale64.grad, FP16_GRAD, plan)


# -- attention ----------------------------------------------------------------------------
def bshd(b, h, s, d):
    """Logical [B, H, S, D] over a [B, S, H, D] buffer."""
    return randn(b, s, h, d).permute(0, 2, 1, 3)


def attention_reference(q, k, v, scale):
    s = (q.double() @ k.double().transpose(-1, -2)) * scale
    return torch.softmax(s, dim=-1) @ v.double(), torch.logsumexp(s, dim=-1, keepdim=True)


def sdpa_forward(handle, q, k, v, scale):
    g = new_graph(handle)
    tq, tk, tv = ir_input(g, q, "q"), ir_input(g, k, "k"), ir_input(g, v, "v")
    o, stats = g.sdpa(tq, tk, tv, attn_scale=scale, generate_stats=True)
    for t in (o, stats):
        t.set_output(True)
    (got_o, got_stats), plan = run_on_backend(g, {tq: q, tk: k, tv: v}, [o, stats])
    return got_o, got_stats, plan


def test_sdpa_forward(handle):
    b, h, s, d = 2, 4, 256, 64
    q, k, v = bshd(b, h, s, d), bshd(b, h, s, d), bshd(b, h, s, d)
    scale = 1.0 / math.sqrt(d)
    got_o, got_stats, plan = sdpa_forward(handle, q, k, v, scale)
    ref_o, ref_lse = attention_reference(q, k, v, scale)
    check("sdpa fwd O (BSHD)", got_o, ref_o, FP16_OUT, plan)
    check("sdpa fwd Stats (logsumexp)", got_stats, ref_lse, 1e-3, plan)


def expected_sdpa_backward_lowering() -> str:
    """How this machine's backend should lower sdpa_backward: "native" (the SDPA_BWD
    descriptor) with cuDNN >= 9.21 on sm_100+, else "composite" (the fused-attention graph
    of sdpa_bwd_composite.py; the H200 with cuDNN 9.19 is such a machine)."""
    version = loader.load().cudnn_version() or 0
    major, minor = torch.cuda.get_device_capability()
    return choose_route(version, major * 10 + minor).name


def assert_sdpa_backward_lowering(graph) -> None:
    lowered = graph.lifecycle.planning.lowered
    methods = {op["method"] for op in lowered.backend.ops()}
    if expected_sdpa_backward_lowering() == "composite":
        assert "sdpa_backward" not in methods, methods
        assert {"matmul", "reduction", "reshape", "exp"} <= methods, methods
        assert any("composite fused-attention graph" in n for n in lowered.notes), lowered.notes
        assert len(lowered.backend.workspace_tensors()) == 2
    else:
        assert methods == {"sdpa_backward"}, methods


def gqa_inputs(b, h, hk, s, d, scale):
    """q/k/v/dO in BHSD and O/Stats from the float64 reference (grouped heads)."""
    q, do = randn(b, h, s, d), randn(b, h, s, d)
    k, v = randn(b, hk, s, d), randn(b, hk, s, d)
    o, stats = attention_reference(q, k.repeat_interleave(h // hk, 1),
                                   v.repeat_interleave(h // hk, 1), scale)
    return q, k, v, o.to(q.dtype), do, stats.float()


@pytest.mark.parametrize("case", ["mha_bshd_fwd_chain", "gqa_bhsd"])
def test_sdpa_backward(handle, case):
    """dQ/dK/dV against float64 autograd. MHA takes O and Stats from the backend's own
    forward (the fwd -> bwd chain); GQA (8 query heads over 2 K/V heads) takes them from the
    reference."""
    if case == "mha_bshd_fwd_chain":
        b, h, hk, s, d = 2, 4, 4, 128, 64
        q, k, v = bshd(b, h, s, d), bshd(b, h, s, d), bshd(b, h, s, d)
        scale = 1.0 / math.sqrt(d)
        o, stats, _ = sdpa_forward(handle, q, k, v, scale)
        do = bshd(b, h, s, d)
    else:
        b, h, hk, s, d = 2, 8, 2, 128, 64
        scale = 1.0 / math.sqrt(d)
        q, k, v, o, do, stats = gqa_inputs(b, h, hk, s, d, scale)
    g = new_graph(handle)
    tq, tk, tv = ir_input(g, q, "q"), ir_input(g, k, "k"), ir_input(g, v, "v")
    to, tdo, tstats = ir_input(g, o, "o"), ir_input(g, do, "dO"), ir_input(g, stats, "stats")
    dq, dk, dv = g.sdpa_backward(tq, tk, tv, to, tdo, tstats, attn_scale=scale)
    for t in (dq, dk, dv):
        t.set_output(True)
    grads, plan = run_on_backend(g, {tq: q, tk: k, tv: v, to: o, tdo: do, tstats: stats},
                                 [dq, dk, dv])
    assert_sdpa_backward_lowering(g)
    q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
    group = h // hk
    ref_o, _ = attention_reference(q64, k64.repeat_interleave(group, 1),
                                   v64.repeat_interleave(group, 1), scale)
    ref_o.backward(do.double())
    for name, got, ref in zip(("dQ", "dK", "dV"), grads, (q64.grad, k64.grad, v64.grad)):
        check(f"sdpa bwd {case} {name}", got, ref, FP16_GRAD, plan)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q", "-s"]))
