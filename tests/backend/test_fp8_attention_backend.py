"""GPU suite for the FP8 attention ops: sdpa_fp8 and sdpa_fp8_backward (the composite FP8
fused-attention graphs, Hopper and newer) and the MXFP8 variants, which this backend
declines (Blackwell-only engines; no lowering written). Graphs go through cudnn.pygraph and
the backend plan path; numerics are checked against a float64 torch reference that applies
the same FP8 quantisation as the graph (inputs, P and dS rounded to E4M3 with the same
scales), so what remains is the engines' own rounding.

Run on the GPU machine (no Bazel there):
  backend_cc/build_local.sh
  PYTHONPATH=.:ops:ir:router:backend_cc python3 -m pytest tests/backend -q -s
"""
import math

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
E4M3 = torch.float8_e4m3fn
E4M3_MAX = 448.0
# Relative to the largest reference value. FP8 outputs carry E4M3 rounding (half an ulp, 2^-4
# of the value), and the engines round P and dS to E4M3 blockwise, flash-attention style
# (unnormalised exponentials, running maxima), where the reference rounds the final P: one
# E4M3 ulp (2^-3) bounds the two together. Measured on the H200 with cuDNN 9.19 (seeded
# inputs, result table of `pytest -s`): O 5.7e-2 to 5.8e-2, dQ/dK/dV 3.4e-2 to 6.4e-2.
# FLOAT outputs (Stats, amax of P and of the gradients) follow FLOAT accumulation of the
# same FP8 products (at most 3.5e-4 measured). Amax_O is O's largest value before O is
# rounded but after P was, so it carries P's rounding and takes FP8_OUT (measured 1.4e-2 to
# 3.2e-2).
FP8_OUT, FLOAT_STATS, FLOAT_AMAX = 0.125, 1e-3, 0.03
#: where inputs are made ("cpu" in the CPU dry run, native_dry_run_test.py).
DEVICE = "cuda"


def new_graph(handle):
    return cudnn.pygraph(io_data_type=DT.HALF, intermediate_data_type=DT.FLOAT,
                         compute_data_type=DT.FLOAT, handle=handle)


class Fp8:
    """One FP8 tensor: its E4M3 values, the scale that made them and their real values."""

    def __init__(self, real, headroom=2.0):
        self.scale = E4M3_MAX / (headroom * real.abs().max().item())
        self.fp8 = (real * self.scale).to(E4M3)
        self.real = self.fp8.double() / self.scale  # what the graph sees, in real units


def fp8_round(x, scale):
    """x scaled, rounded to E4M3 and scaled back (the graph's narrowing of P or dS)."""
    return (x * scale).to(E4M3).double() / scale


def scalar(value):
    return torch.full((1, 1, 1, 1), value, device=DEVICE, dtype=torch.float32)


def attention_inputs(b, h_q, h_kv, s, d, bshd=False):
    """q [b, h_q, s, d] and k, v [b, h_kv, s, d]; bshd: over [b, s, h, d] buffers."""
    def one(heads):
        if bshd:
            return Fp8(torch.randn(b, s, heads, d, device=DEVICE).permute(0, 2, 1, 3))
        return Fp8(torch.randn(b, heads, s, d, device=DEVICE))
    return one(h_q), one(h_kv), one(h_kv)


class Grouped:
    """K or V with each head repeated for its group of query heads (the reference's view)."""

    def __init__(self, x, group):
        self.real = x.real.repeat_interleave(group, 1)


def group_sum(grad, h_kv):
    """A per-query-head gradient summed over each group into h_kv heads."""
    b, h_q, s, d = grad.shape
    return grad.reshape(b, h_kv, h_q // h_kv, s, d).sum(2)


def forward_reference(q, k, v, attn_scale, scale_s):
    s = (q.real @ k.real.transpose(-1, -2)) * attn_scale
    p = torch.softmax(s, dim=-1)
    o = fp8_round(p, scale_s) @ v.real
    return o, torch.logsumexp(s, dim=-1, keepdim=True), p.abs().max(), o.abs().max()


def feeds_of(g, named):
    tensors = {name: ir_input(g, value, name) for name, value in named.items()}
    return tensors, {tensors[name]: value for name, value in named.items()}


def fp8_outputs(*tensors):
    for t in tensors:
        t.set_output(True).set_data_type(DT.FP8_E4M3)


def float_outputs(*tensors):
    for t in tensors:
        t.set_output(True).set_data_type(DT.FLOAT)


FORWARD_CASES = {  # id: (query heads, K/V heads, Stats output, BSHD buffers)
    "mha_training_stats": (4, 4, True, False),
    "mha_inference": (4, 4, False, False),
    "gqa_4_over_2_bshd": (4, 2, True, True),
}


@pytest.mark.parametrize("case", sorted(FORWARD_CASES))
def test_sdpa_fp8_forward(handle, case):
    h_q, h_kv, stats, bshd = FORWARD_CASES[case]
    b, s, d = 2, 128, 128
    q, k, v = attention_inputs(b, h_q, h_kv, s, d, bshd)
    attn_scale, scale_s = 1.0 / math.sqrt(d), E4M3_MAX
    group = h_q // h_kv
    ref_o, ref_stats, ref_amax_s, ref_amax_o = forward_reference(
        q, Grouped(k, group), Grouped(v, group), attn_scale, scale_s)
    scale_o = E4M3_MAX / (2 * ref_amax_o.item())
    g = new_graph(handle)
    t, feeds = feeds_of(g, {
        "q": q.fp8, "k": k.fp8, "v": v.fp8, "descale_q": scalar(1 / q.scale),
        "descale_k": scalar(1 / k.scale), "descale_v": scalar(1 / v.scale),
        "descale_s": scalar(1 / scale_s), "scale_s": scalar(scale_s), "scale_o": scalar(scale_o)})
    o, st, amax_s, amax_o = g.sdpa_fp8(*t.values(), attn_scale=attn_scale,
                                       generate_stats=stats)
    fp8_outputs(o)
    float_outputs(amax_s, amax_o, *([st] if stats else []))
    label = f"sdpa_fp8 fwd {case}"
    outputs = [o, amax_s, amax_o] + ([st] if stats else [])
    why = op_gates.expected_decline("sdpa_fp8", device_sm())
    if why is not None:
        op_gates.assert_backend_declined(g, why)
        declined(label, o.dim, op_gates.gate_text("sdpa_fp8", device_sm()))
        return
    got, plan = run_on_backend(g, feeds, outputs)
    check(f"{label} O", got[0].double() / scale_o, ref_o, FP8_OUT, plan)
    check(f"{label} Amax_S", got[1], ref_amax_s.reshape(1, 1, 1, 1), FLOAT_AMAX, plan)
    check(f"{label} Amax_O", got[2], ref_amax_o.reshape(1, 1, 1, 1), FP8_OUT, plan)
    if stats:
        check(f"{label} Stats", got[3], ref_stats, FLOAT_STATS, plan)


def backward_reference(q, k, v, o, do, attn_scale, scale_s, scale_dp):
    """dQ, dK, dV, amax(dS) with P and dS rounded like the graph rounds them."""
    s = (q.real @ k.real.transpose(-1, -2)) * attn_scale
    p = torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True))
    dv = fp8_round(p, scale_s).transpose(-1, -2) @ do.real
    d_rows = (do.real * o.real).sum(dim=-1, keepdim=True)
    ds = p * (do.real @ v.real.transpose(-1, -2) - d_rows) * attn_scale
    ds_q = fp8_round(ds, scale_dp)
    return ds_q @ k.real, ds_q.transpose(-1, -2) @ q.real, dv, ds.abs().max()


@pytest.mark.parametrize("h_q, h_kv", [(2, 2), (4, 2)], ids=["mha", "gqa_4_over_2"])
def test_sdpa_fp8_backward(handle, h_q, h_kv):
    """Hopper's FP8 bprop engines take head dim 128 only. With grouped heads dK and dV are
    the per-query-head gradients summed over each group."""
    b, s, d = 2, 128, 128
    q, k, v = attention_inputs(b, h_q, h_kv, s, d)
    kk, vv = Grouped(k, h_q // h_kv), Grouped(v, h_q // h_kv)
    attn_scale, scale_s = 1.0 / math.sqrt(d), E4M3_MAX
    ref_o, ref_stats, _, _ = forward_reference(q, kk, vv, attn_scale, scale_s)
    o, do = Fp8(ref_o), Fp8(torch.randn(b, h_q, s, d, device=DEVICE))
    # scales from a first pass, as a training loop takes them from the previous step's amax
    _, _, _, amax_ds = backward_reference(q, kk, vv, o, do, attn_scale, scale_s, 1.0)
    scale_dp = E4M3_MAX / (2 * amax_ds.item())
    dq, dk, dv, amax_ds = backward_reference(q, kk, vv, o, do, attn_scale, scale_s, scale_dp)
    dk, dv = group_sum(dk, h_kv), group_sum(dv, h_kv)
    grad_scales = [E4M3_MAX / (2 * t.abs().max().item()) for t in (dq, dk, dv)]
    g = new_graph(handle)
    t, feeds = feeds_of(g, {
        "q": q.fp8, "k": k.fp8, "v": v.fp8, "o": o.fp8, "dO": do.fp8,
        "stats": ref_stats.float(),
        **{f"descale_{n}": scalar(1 / x.scale) for n, x in
           (("q", q), ("k", k), ("v", v), ("o", o), ("dO", do))},
        "descale_s": scalar(1 / scale_s), "descale_dP": scalar(1 / scale_dp),
        "scale_s": scalar(scale_s), "scale_dQ": scalar(grad_scales[0]),
        "scale_dK": scalar(grad_scales[1]), "scale_dV": scalar(grad_scales[2]),
        "scale_dP": scalar(scale_dp)})
    outs = g.sdpa_fp8_backward(*t.values(), attn_scale=attn_scale)
    fp8_outputs(*outs[:3])
    float_outputs(*outs[3:])
    why = op_gates.expected_decline("sdpa_fp8_backward", device_sm())
    if why is not None:
        op_gates.assert_backend_declined(g, why)
        declined(f"sdpa_fp8 bwd {h_q}/{h_kv} heads", outs[0].dim,
                 op_gates.gate_text("sdpa_fp8_backward", device_sm()))
        return
    got, plan = run_on_backend(g, feeds, outs)
    label = f"sdpa_fp8 bwd {h_q}/{h_kv} heads"
    for i, (name, scale, ref) in enumerate(zip(("dQ", "dK", "dV"), grad_scales, (dq, dk, dv))):
        check(f"{label} {name}", got[i].double() / scale, ref, FP8_OUT, plan)
        check(f"{label} amax_{name}", got[3 + i], ref.abs().max().reshape(1, 1, 1, 1), FLOAT_AMAX,
              plan)
    check(f"{label} amax_dP", got[6], amax_ds.reshape(1, 1, 1, 1), FLOAT_AMAX, plan)


# -- MXFP8: declined (Blackwell engines only, no lowering here) ----------------------------
def mx_scales(b, h, rows, cols):
    """E8M0 block scales of 1.0 (a zero exponent byte is 2^-127, so fill with 127)."""
    return torch.full((b, h, rows, cols), 127, device=DEVICE, dtype=torch.uint8).view(
        torch.float8_e8m0fnu)


def test_sdpa_mxfp8_declines_with_its_reason(handle):
    b, h, s, d = 1, 2, 128, 128
    q, k, v = attention_inputs(b, h, h, s, d)
    g = new_graph(handle)
    t, _ = feeds_of(g, {"q": q.fp8, "k": k.fp8, "v": v.fp8,
                        "descale_q": mx_scales(b, h, s, d // 32),
                        "descale_k": mx_scales(b, h, s, d // 32),
                        "descale_v": mx_scales(b, h, s // 32, d)})
    o, _, _ = g.sdpa_mxfp8(*t.values(), generate_stats=False)
    fp8_outputs(o)
    op_gates.assert_backend_declined(g, op_gates.expected_decline("sdpa_mxfp8", device_sm()))
    declined("sdpa_mxfp8 fwd", o.dim, op_gates.gate_text("sdpa_mxfp8", device_sm()))


def test_sdpa_mxfp8_backward_declines_with_its_reason(handle):
    b, h, s, d = 1, 2, 128, 128
    x = Fp8(torch.randn(b, h, s, d, device=DEVICE))
    g = new_graph(handle)
    named = {name: x.fp8 for name in ("q", "q_T", "k", "k_T", "v")}
    named.update(o_f16=x.real.half(), dO_f16=x.real.half(), dO=x.fp8, dO_T=x.fp8,
                 stats=torch.zeros(b, h, s, 1, device=DEVICE))
    named.update({n: mx_scales(b, h, s, d // 32) for n in
                  ("descale_q", "descale_q_T", "descale_k", "descale_k_T", "descale_v",
                   "descale_dO", "descale_dO_T")})
    t, _ = feeds_of(g, named)
    outs = g.sdpa_mxfp8_backward(*t.values())
    for out in outs:  # the IR infers no dims for this variant
        out.set_dim([1, 1, 1, 1] if out.name.split("::")[-1].startswith("amax") else [b, h, s, d])
    fp8_outputs(*outs[:3])
    float_outputs(*outs[3:])
    why = op_gates.expected_decline("sdpa_mxfp8_backward", device_sm())
    op_gates.assert_backend_declined(g, why)
    declined("sdpa_mxfp8 bwd", [b, h, s, d], op_gates.gate_text("sdpa_mxfp8_backward",
                                                                 device_sm()))


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q", "-s"]))
