"""GPU suite for the classic ops that reach cuDNN through their own descriptors or a
composite graph: batchnorm inference, slice, transpose, RoPE forward/backward, MoE grouped
matmul forward/backward and the block-scale quantize -> dequantize round trip. Graphs are
built with cudnn.pygraph, planned by the router and executed on the backend plan path
(native_runner.assert_backend_path), checked against float64 torch references.

Where this machine's backend cannot run an op (a descriptor newer than the cuDNN headers or
library, op_gates.py), the test asserts that the backend declined it with exactly that
reason and records a "decl" row instead. Run on the GPU machine (no Bazel there):
  backend_cc/build_local.sh
  PYTHONPATH=.:ops:ir:router:backend_cc python3 -m pytest tests/backend -q -s
"""
import pytest

torch = pytest.importorskip("torch", reason="the GPU suite needs torch")

import cudnn  # noqa: E402
from tests.backend import op_gates  # noqa: E402
from tests.backend.native_runner import (  # noqa: E402
    check, declined, ir_input, run_on_backend)
from tests.backend.suite_fixtures import handle, result_table, seeded  # noqa: E402,F401
from tests.backend.suite_fixtures import device_sm, gpu_suite_marks  # noqa: E402

pytestmark = gpu_suite_marks()

DT = cudnn.data_type
# Relative to the largest reference value: fp16 storage (2^-11) after fp32 math leaves a few
# fp16 ulps. An MXFP8 block keeps values to E4M3 precision relative to its power-of-two scale;
# with the OCP MX scale rule a block's largest value may land in [256, 512) and saturate at
# 448, so a value comes back within one E4M3 ulp (2^-3) of its block's largest value.
FP16_OUT, FP16_GRAD, FP8_ROUND_TRIP = 5e-3, 2e-2, 0.125
#: where inputs are made ("cpu" in the CPU dry run, native_dry_run_test.py).
DEVICE = "cuda"


def new_graph(handle, io=DT.HALF):
    return cudnn.pygraph(io_data_type=io, intermediate_data_type=DT.FLOAT,
                         compute_data_type=DT.FLOAT, handle=handle)


def randn(*shape, scale=1.0, dtype=torch.float16):
    return (torch.randn(*shape, device=DEVICE) * scale).to(dtype)


def run_or_decline(method, label, graph, feeds, outputs):
    """Run `graph` on the backend, or, where op_gates says this machine cannot run `method`,
    assert the backend declined it for that reason; returns (buffers, plan) or None."""
    why = op_gates.expected_decline(method, device_sm())
    if why is None:
        return run_on_backend(graph, feeds, outputs)
    op_gates.assert_backend_declined(graph, why)
    declined(label, outputs[0].dim, op_gates.gate_text(method, device_sm()))
    return None


# -- batchnorm inference (four pointwise operations, any cuDNN) -----------------------------
def channels_last(*shape, scale=1.0, dtype=torch.float16):
    return randn(*shape, scale=scale, dtype=dtype).to(memory_format=torch.channels_last)


def test_batchnorm_inference(handle):
    """cuDNN's pointwise fusion wants every operand packed in one NHWC order, so x and the
    per-channel [1, C, 1, 1] statistics are channels-last."""
    n, c, h, w = 8, 64, 4, 6
    x = channels_last(n, c, h, w)
    mean = channels_last(1, c, 1, 1, dtype=torch.float32)
    inv_var = (torch.rand(1, c, 1, 1, device=DEVICE) + 0.5).to(memory_format=torch.channels_last)
    scale = channels_last(1, c, 1, 1, dtype=torch.float32)
    bias = channels_last(1, c, 1, 1, dtype=torch.float32)
    g = new_graph(handle)
    ts = [ir_input(g, t, name) for t, name in
          ((x, "x"), (mean, "mean"), (inv_var, "inv_var"), (scale, "scale"), (bias, "bias"))]
    y = g.batchnorm_inference(*ts)
    y.set_output(True)
    ran = run_or_decline("batchnorm_inference", "batchnorm_inference NHWC", g,
                         dict(zip(ts, (x, mean, inv_var, scale, bias))), [y])
    if ran:
        (got,), plan = ran
        ref = (x.double() - mean.double()) * inv_var.double() * scale.double() + bias.double()
        check("batchnorm_inference NHWC", got, ref, FP16_OUT, plan)


# -- slice and transpose (SLICE / TRANSPOSE descriptors, cuDNN 9.22) ------------------------
def test_slice(handle):
    x = randn(6, 48, 96)
    g = new_graph(handle)
    tx = ir_input(g, x, "x")
    y = g.slice(tx, slices=[slice(1, 5), slice(None), slice(8, 88, 2)])
    y.set_output(True)
    ran = run_or_decline("slice", "slice [1:5, :, 8:88:2]", g, {tx: x}, [y])
    if ran:
        (got,), plan = ran
        check("slice [1:5, :, 8:88:2]", got, x[1:5, :, 8:88:2].double(), 0.0, plan)


def test_transpose(handle):
    x = randn(4, 32, 80)
    g = new_graph(handle)
    tx = ir_input(g, x, "x")
    y = g.transpose(tx, permutation=[0, 2, 1])
    y.set_output(True)
    ran = run_or_decline("transpose", "transpose [0, 2, 1]", g, {tx: x}, [y])
    if ran:
        (got,), plan = ran
        check("transpose [0, 2, 1]", got, x.permute(0, 2, 1).double(), 0.0, plan)


# -- RoPE (ROPE_FWD 9.24 / ROPE_BWD 9.25) ----------------------------------------------------
def rope_reference(x, freqs, rope_dim, output_scale):
    """cuDNN's RoPE (its operation page): the trailing `rope_dim` entries of the head dim
    (0 = all) rotate in non-interleaved halves by the angles of `freqs` [S, 1, 1, D] for the
    same positions, the leading ones pass through, and everything is scaled."""
    d = x.shape[-1]
    r = rope_dim or d
    theta = freqs[:, 0, 0, d - r:].to(x.dtype)  # [S, r], broadcast over [B, H, S, r]
    keep, rot = x[..., :d - r], x[..., d - r:]
    lo, hi = rot[..., :r // 2], rot[..., r // 2:]
    turned = torch.cat([-hi, lo], dim=-1)
    return output_scale * torch.cat([keep, rot * torch.cos(theta) + turned * torch.sin(theta)], -1)


def rope_freqs(s, d):
    """Angles repeated over both halves of every aligned power-of-two segment (the usual
    cat(f, f) layout), so leading and trailing rope segments read the same angles."""
    base = torch.arange(s, device=DEVICE, dtype=torch.float32)[:, None] * \
        torch.exp(-torch.arange(d // 4, device=DEVICE) / (d // 4) * 9.2)
    return torch.cat([base] * 4, dim=-1).reshape(s, 1, 1, d)


@pytest.mark.parametrize("rope_dim, output_scale", [(0, 1.0), (32, 0.5)],
                         ids=["full_head", "half_head_scaled"])
def test_rope_forward(handle, rope_dim, output_scale):
    b, h, s, d = 2, 4, 64, 64
    x, freqs = randn(b, h, s, d), rope_freqs(s, d)
    g = new_graph(handle)
    tx, tf = ir_input(g, x, "x"), ir_input(g, freqs, "freqs")
    y = g.rope(tx, tf, output_scale=output_scale, rope_dim=rope_dim)
    y.set_output(True)
    label = f"rope fwd rope_dim={rope_dim} scale={output_scale}"
    ran = run_or_decline("rope", label, g, {tx: x, tf: freqs}, [y])
    if ran:
        (got,), plan = ran
        check(label, got, rope_reference(x.double(), freqs.double(), rope_dim, output_scale),
              FP16_OUT, plan)


def test_rope_backward(handle):
    b, h, s, d = 2, 4, 64, 64
    dy, freqs = randn(b, h, s, d), rope_freqs(s, d)
    g = new_graph(handle)
    tdy, tf = ir_input(g, dy, "dY"), ir_input(g, freqs, "freqs")
    dx = g.rope_backward(tdy, tf, output_scale=0.5)
    dx.set_output(True)
    ran = run_or_decline("rope_backward", "rope bwd scale=0.5", g, {tdy: dy, tf: freqs}, [dx])
    if ran:
        (got,), plan = ran
        x64 = torch.zeros(b, h, s, d, dtype=torch.float64, device=dy.device, requires_grad=True)
        rope_reference(x64, freqs.double(), 0, 0.5).backward(dy.double())
        check("rope bwd scale=0.5", got, x64.grad, FP16_OUT, plan)


# -- MoE grouped matmul (forward 9.18, weight gradient 9.22) ---------------------------------
# Mode NONE: the tokens are already grouped by expert, expert e owning rows
# [first_token_offset[e], first_token_offset[e + 1]) (the last one up to the end). GATHER and
# SCATTER run in test_moe_modes_backend.py, one process per case: a GATHER graph once hit an
# illegal memory access on the H200 (cuDNN 9.19), which poisons the CUDA context of every
# later test in the same process.
MOE_SPLITS = {  # tokens routed to each expert, in expert order
    "E4_uneven_one_empty": [24, 40, 0, 32],
    "E8_equal": [16] * 8,
    "E2_all_on_one": [0, 96],
}


def expert_of_rows(counts):
    return torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts))


def expert_weights(experts, k, n):
    """[E, K, N] in column-major matrices (K packed): cuDNN 9.19's MoE engine on sm_90
    refuses any other weight layout ("weight_layout != ColumnMajor" in its log)."""
    return randn(experts, n, k, scale=0.5).transpose(1, 2)


def moe_inputs(g, counts, k, n):
    rows = sum(counts)
    token, weight = randn(1, rows, k, scale=0.5), expert_weights(len(counts), k, n)
    starts = torch.tensor([0] + counts[:-1], device=DEVICE).cumsum(0)
    offsets = starts.to(torch.int32).reshape(len(counts), 1, 1)
    return token, weight, offsets, (ir_input(g, token, "token"), ir_input(g, weight, "weight"),
                                    ir_input(g, offsets, "first_token_offset"))


@pytest.mark.parametrize("split", sorted(MOE_SPLITS))
def test_moe_grouped_matmul(handle, split):
    counts, k, n = MOE_SPLITS[split], 64, 48
    g = new_graph(handle)
    token, weight, offsets, (tt, tw, to) = moe_inputs(g, counts, k, n)
    y = g.moe_grouped_matmul(tt, tw, to)
    y.set_output(True)
    label = f"moe fwd {split}"
    ran = run_or_decline("moe_grouped_matmul", label, g, {tt: token, tw: weight, to: offsets}, [y])
    if ran:
        (got,), plan = ran
        experts = expert_of_rows(counts).to(token.device)
        ref = torch.einsum("rk,rkn->rn", token[0].double(), weight.double()[experts])[None]
        check(label, got, ref, FP16_OUT, plan)


@pytest.mark.parametrize("split", ["E4_uneven_one_empty", "E8_equal"])
def test_moe_grouped_matmul_bwd(handle, split):
    counts, k, n = MOE_SPLITS[split], 64, 48
    g = new_graph(handle)
    token, _, offsets, (tt, _, to) = moe_inputs(g, counts, k, n)
    dout = randn(1, sum(counts), n, scale=0.5)
    td = ir_input(g, dout, "doutput")
    dw = g.moe_grouped_matmul_bwd(td, tt, to)
    dw.set_output(True)
    label = f"moe bwd dweight {split}"
    ran = run_or_decline("moe_grouped_matmul_bwd", label, g, {td: dout, tt: token, to: offsets},
                         [dw])
    if ran:
        (got,), plan = ran
        experts = expert_of_rows(counts).to(token.device)
        ref = torch.zeros(len(counts), k, n, dtype=torch.float64, device=token.device)
        ref.index_add_(0, experts, torch.einsum("rk,rn->rkn", token[0].double(),
                                                dout[0].double()))
        check(label, got, ref, FP16_GRAD, plan)


# -- block-scale quantize / dequantize (MXFP8 blocks of 32 along the rows) -------------------
BLOCK = 32


def per_element(scale):
    """[R, C / 32] block scales as FLOAT, repeated over their blocks to [R, C]."""
    return scale.float().repeat_interleave(BLOCK, dim=-1)


def test_block_scale_quantize(handle):
    """x -> FP8 E4M3 values with one E8M0 scale per 32: values times their scale give x back
    within an FP8 half-ulp of each block's largest value."""
    x = randn(64, 256, dtype=torch.float32)
    g = new_graph(handle, io=DT.FLOAT)
    tx = ir_input(g, x, "x")
    y, scale = g.block_scale_quantize(tx, block_size=BLOCK)
    y.set_output(True).set_data_type(DT.FP8_E4M3)
    scale.set_output(True).set_data_type(DT.FP8_E8M0)
    ran = run_or_decline("block_scale_quantize", "block_scale_quantize 1x32", g, {tx: x},
                         [y, scale])
    if ran:
        (got_y, got_scale), plan = ran
        back = got_y.double() * per_element(got_scale).double()
        check("block_scale_quantize (y * scale)", back, x.double(), FP8_ROUND_TRIP, plan)


def test_block_scale_dequantize(handle):
    """FP8 E4M3 values times power-of-two E8M0 scales: exact in FLOAT."""
    rows, cols = 64, 256
    y = randn(rows, cols, scale=50.0, dtype=torch.float32).to(torch.float8_e4m3fn)  # < 448
    exponents = torch.randint(120, 135, (rows, cols // BLOCK), device=DEVICE, dtype=torch.uint8)
    scale = exponents.view(torch.float8_e8m0fnu)  # 2^(e - 127)
    g = new_graph(handle, io=DT.FLOAT)
    ty, tscale = ir_input(g, y, "y"), ir_input(g, scale, "scale")
    out = g.block_scale_dequantize(ty, tscale, block_size=[1, BLOCK])
    out.set_output(True).set_data_type(DT.FLOAT)
    ran = run_or_decline("block_scale_dequantize", "block_scale_dequantize 1x32", g,
                         {ty: y, tscale: scale}, [out])
    if ran:
        (got,), plan = ran
        check("block_scale_dequantize", got, y.double() * per_element(scale).double(), 0.0,
              plan)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q", "-s"]))
