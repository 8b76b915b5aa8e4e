"""The FROST summary launchers (kernels/summary.py) on a CPU, with float64 stand-ins for
the two kernel entry points they call.

frost_fwd / frost_bwd are replaced by functions that first run the real launchers' own
operand checks (fwd.check_operands, bwd.check_bwd_operands: every check but the CUDA one,
so the stand-in q, the zero v/w, the identity, the discarded outputs and the backward's
aliased scratch must pass exactly what the kernels accept), then compute what the kernel
computes in float64 (the token recurrence; the hand-written backward for the chain
stage's d_initial_state). So this checks the summaries' algebra and plumbing (v = 0 from
the identity gives M^T, V != K, head stand-ins, orientation of the backward transition,
scratch carving) against the float64 summary references; the kernels themselves are
checked on the GPU (tests/numerics/test_la_frost_summary_engines.py).
"""
from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from cudnn.linear_attention.frost.kernels import summary  # noqa: E402
from frost_summary_fakes import FakeKernels, install  # noqa: E402
from tests.reference.compare import assert_rel_close  # noqa: E402
from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs  # noqa: E402
from tests.reference.preprocess import Family, Options  # noqa: E402
from tests.reference.summary import summary_bwd_reference, summary_reference  # noqa: E402

BF16, F32 = torch.bfloat16, torch.float32
BOUND = 1e-6  # float64 results written to float32 buffers


@pytest.fixture
def kernels(monkeypatch) -> FakeKernels:
    return install(monkeypatch)


# (id, H, HK, HV, K, V): every head grouping, V != K both ways
SHAPES = [("equal_K64_V128", 2, 2, 2, 64, 128), ("value_groups_K128_V64", 1, 1, 2, 128, 64),
          ("qk_groups_k_at_v", 2, 1, 1, 64, 64), ("qk_groups_k_at_q", 2, 2, 1, 64, 128)]


def _inputs(family, shape, l2norm):
    _, H, HK, HV, K, V = shape
    config = InputConfig(family=family, seq_lens=(7, 0, 12), H=H, HK=HK, HV=HV, K=K, V=V,
                         dtype=BF16, use_qk_l2norm=l2norm, with_initial_state=True)
    x = make_inputs(config, seed=5)
    return config, x


def _workspace(shape):
    return torch.zeros(summary.summary_workspace_layout(shape)[1], dtype=torch.uint8)


def _forward_layout(config, x, family):
    """The forward summary's SummaryShape of these inputs (with the output)."""
    return summary.SummaryShape(
        backward=False, T=config.T, N=config.N, HO=config.HO, HK=x.k.shape[1],
        H_or_HV=x.v.shape[1], K=config.K, V=config.V, io="bfloat16", state="float32",
        transition="float32", gate_per_channel=family is not Family.GDN,
        beta_per_channel=family is Family.GDN2, beta=summary.dtype_name(x.beta))


def _summarize(x, layout, workspace_for, l2norm, **options):
    """(final_state, transition) of frost_summary on x, on a workspace sized for
    `workspace_for` (options: frost_summary's own, e.g. no_output)."""
    N, HO, K, V = layout.N, layout.HO, layout.K, layout.V
    final, transition = torch.empty(N, HO, V, K), torch.empty(N, HO, K, K)
    summary.frost_summary(
        k=x.k, v=x.v, g=x.g, beta=x.beta, w=x.w, cu_seqlens=x.cu_seqlens,
        initial_state=x.initial_state, final_state=final, transition=transition,
        workspace=_workspace(workspace_for), use_l2norm=l2norm,
        gate_per_channel=layout.gate_per_channel, beta_per_channel=layout.beta_per_channel,
        stream=None, **options)
    return final, transition


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s[0])
@pytest.mark.parametrize("l2norm", [False, True], ids=["plain", "l2norm"])
def test_summary_forward(kernels, family, shape, l2norm):
    config, x = _inputs(family, shape, l2norm)
    K, V = config.K, config.V
    layout = _forward_layout(config, x, family)
    final, transition = _summarize(x, layout, layout, l2norm)
    want_final, want_transition = summary_reference(
        family, x.k, x.v, x.g, x.beta, x.cu_seqlens, w=x.w, initial_state=x.initial_state,
        opts=Options(use_qk_l2norm=l2norm))
    assert_rel_close("final_state", final, want_final, BOUND)
    assert_rel_close("transition", transition, want_transition, BOUND)
    assert kernels.calls == [("fwd", V, True), ("fwd", K, True)]  # the transition run: V = K


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s[0])
@pytest.mark.parametrize("with_dht", [False, True], ids=["no_dht", "dht"])
def test_summary_backward(kernels, family, shape, with_dht):
    config, x = _inputs(family, shape, l2norm=True)
    dO, dht = make_grad_outputs(config, seed=6)
    dO, dht = dO.to(BF16), (dht if with_dht else None)
    N, HO, K, V = config.N, config.HO, config.K, config.V
    d_init = torch.empty(N, HO, V, K)
    transition = torch.empty(N, HO, K, K)
    layout = summary.SummaryShape(
        backward=True, T=config.T, N=N, HO=HO, HK=x.k.shape[1], H_or_HV=x.q.shape[1], K=K,
        V=V, io="bfloat16", state="float32", transition="float32",
        gate_per_channel=family is not Family.GDN, beta_per_channel=family is Family.GDN2,
        beta=summary.dtype_name(x.beta))
    summary.frost_summary_bwd(
        q=x.q, k=x.k, g=x.g, beta=x.beta, cu_seqlens=x.cu_seqlens, dO=dO, d_final_state=dht,
        d_initial_state=d_init, transition=transition, workspace=_workspace(layout), scale=0.3,
        use_l2norm=True, gate_per_channel=layout.gate_per_channel,
        beta_per_channel=layout.beta_per_channel, stream=None)
    want, want_transition = summary_bwd_reference(
        family, x.q, x.k, x.g, x.beta, x.cu_seqlens, dO, d_final_state=dht,
        opts=Options(scale=0.3, use_qk_l2norm=True))
    assert_rel_close("d_initial_state", d_init, want, BOUND)
    assert_rel_close("transition", transition, want_transition, BOUND)
    assert kernels.calls == [("bwd", ("chain",)), ("fwd", K, True)]


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s[0])
def test_summary_forward_without_output(kernels, family, shape, monkeypatch):
    """FROST_SUMMARY_NO_OUTPUT=1: both passes run write_output=False kernels (no q, no out),
    on a workspace without the stand-in q, o and o_t, with the default's results."""
    config, x = _inputs(family, shape, True)
    K, V = config.K, config.V
    layout = _forward_layout(config, x, family)
    lean = dataclasses.replace(layout, no_output=True)
    results = {}
    for switch, shape_for in (("0", layout), ("1", lean)):
        monkeypatch.setenv(summary.NO_OUTPUT_ENV, switch)
        results[switch] = _summarize(x, layout, shape_for, True)
    assert [c.write_output for c in kernels.configs] == [True, True, False, False]
    assert kernels.calls[2:] == [("fwd", V, True), ("fwd", K, True)]
    for got, want in zip(results["1"], results["0"]):
        assert torch.equal(got, want)
    names = [r.name for r in summary.summary_workspace_layout(lean)[0]]
    assert "o" not in names and "o_t" not in names and "q" not in names, names
    assert summary.summary_workspace_layout(lean)[1] < summary.summary_workspace_layout(layout)[1]
    # a workspace sized for the lean layout is too small for the default passes: named
    monkeypatch.setenv(summary.NO_OUTPUT_ENV, "0")
    with pytest.raises(ValueError, match=f"workspace must hold at least .*{summary.NO_OUTPUT_ENV}"):
        _summarize(x, layout, lean, True)
    # an explicit choice overrides the environment (what a plan passes)
    _summarize(x, layout, lean, True, no_output=True)
    assert kernels.configs[-1].write_output is False


def test_the_switch_parses_strictly(monkeypatch):
    for value, want in (("", True), ("0", False), (" 0 ", False), ("1", True)):
        monkeypatch.setenv(summary.NO_OUTPUT_ENV, value)
        assert summary.no_output_requested() is want
    monkeypatch.delenv(summary.NO_OUTPUT_ENV)
    assert summary.no_output_requested() is True  # the default since its H200 run
    for value in ("2", "yes", "true", "on"):
        monkeypatch.setenv(summary.NO_OUTPUT_ENV, value)
        with pytest.raises(ValueError, match=summary.NO_OUTPUT_ENV):
            summary.no_output_requested()


def test_the_lean_layout_leaves_the_backward_alone():
    shape = summary.SummaryShape(backward=True, T=100, N=3, HO=4, HK=2, H_or_HV=4, K=64,
                                 V=128, io="bfloat16", state="float32", transition="float32",
                                 gate_per_channel=True, beta_per_channel=False, beta="float32")
    assert summary.summary_workspace_layout(dataclasses.replace(shape, no_output=True)) == \
        summary.summary_workspace_layout(shape)


def test_layout_is_exact_and_aligned():
    shape = summary.SummaryShape(backward=True, T=100, N=3, HO=4, HK=2, H_or_HV=4, K=64,
                                 V=128, io="bfloat16", state="float32", transition=None,
                                 gate_per_channel=True, beta_per_channel=False, beta="float32")
    regions, size = summary.summary_workspace_layout(shape)
    assert [r.name for r in regions] == ["zeros", "h0", "sink", "chain"]
    assert all(r.offset % 256 == 0 for r in regions) and size % 256 == 0
    assert regions[-1].offset + regions[-1].shape[0] <= size


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
