"""Precision of the FROST vector-gate gradients: the bf16 emulation (frost_bwd_precision)
against the float64 backward model, on the GPU smoke's own cases.

Without rounding the emulation's factored algebra equals frost_bwd_model's pairwise one
(1e-12). With the kernel's roundings, dg stays far inside the 1e-2 GPU bound, and the
design the GPU rejected (decayed operands rounded once) is measurably worse on the case
where the GPU measured 1.6e-2: the test fails if someone goes back to it. The decay
exponent's fp32 rounding (the default kernel's FADD then FMUL, FrostBwdConfig.
vec_fast_decay's single FFMA) is modelled on the smoke's hardest vector-gate cases: the
fused exponent keeps dq, dk, dg at the default's errors, within the GPU bound with margin.
"""
import math
import os
import sys

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import frost_bwd_model as model  # noqa: E402
from frost_bwd_precision import decay, f32, grads_vec, tf32_truncated  # noqa: E402

from tests.reference.compare import rel_err  # noqa: E402
from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs  # noqa: E402
from tests.reference.preprocess import Family  # noqa: E402


def _dg(family, lens, H, HV, h0, seed=0, **emulation):
    """(dg of the emulation, dg of the float64 model), over every chunk and output head."""
    cfg = InputConfig(family=Family(family), seq_lens=lens, H=H, HV=HV, K=128, V=128, dtype=torch.bfloat16,
                      state_dtype=torch.float32, with_initial_state=h0)
    x = make_inputs(cfg, seed)
    dO, _ = make_grad_outputs(cfg, seed + 1)
    got, ref = [], []
    exact_grads = model.stage_grads

    def spy(S, dS, U, dR, q, k, v, g, beta, w, dO_, scale):
        out = exact_grads(S, dS, U, dR, q, k, v, g, beta, w, dO_, scale)
        got.append(grads_vec(S, dS, U, dR, q, k, g, beta, dO_, scale, **emulation).reshape(-1))
        ref.append(out[3].reshape(-1))
        return out

    model.stage_grads = spy
    try:
        model.frost_bwd_model(x.q, x.k, x.v, x.g, x.beta, x.w, x.cu_seqlens, dO, scale=1 / math.sqrt(128),
                              use_l2norm=False, initial_state=x.initial_state)
    finally:
        model.stage_grads = exact_grads
    return torch.cat(got), torch.cat(ref)


def _smoke_errors(family, case_name, **emulation):
    """Relative errors of dq^, dk^, dg (the emulation against the float64 model) on one of
    the GPU smoke's cases (la_frost_bwd_smoke.CASES: its inputs, correlated keys and
    strong decays included)."""
    from tests.numerics.la_frost_bwd_smoke import CASES, make_case

    (case,) = [c for c in CASES if c.name == case_name]
    _, x, dO, dht = make_case(case, family, "cpu")
    got, ref = ([], [], []), ([], [], [])
    exact_grads = model.stage_grads

    def spy(S, dS, U, dR, q, k, v, g, beta, w, dO_, scale):
        out = exact_grads(S, dS, U, dR, q, k, v, g, beta, w, dO_, scale)
        emu = grads_vec(S, dS, U, dR, q, k, g, beta, dO_, scale, with_qk=True, **emulation)
        for i, j in enumerate((0, 1, 3)):
            got[i].append(emu[i].reshape(-1))
            ref[i].append(out[j].reshape(-1))
        return out

    model.stage_grads = spy
    try:
        model.frost_bwd_model(x.q, x.k, x.v, x.g, x.beta, x.w, x.cu_seqlens, dO, scale=1 / math.sqrt(case.K),
                              use_l2norm=case.l2norm, initial_state=x.initial_state, d_final_state=dht)
    finally:
        model.stage_grads = exact_grads
    return [rel_err(torch.cat(a), torch.cat(b)) for a, b in zip(got, ref)]


def test_fused_exponent_differs_from_sub_mul():
    """The two exponent models are not the same rounding (else the comparison below says
    nothing), and neither is exact."""
    L = 1.4426950408889634
    g = -torch.rand(64, 8, dtype=torch.float64) * 6
    G = f32(torch.cumsum(g.float(), 0))
    rows = slice(16, 32)
    a, b = decay(G, 16, rows, 1, "sub_mul"), decay(G, 16, rows, 1, "fused")
    exact = torch.exp(G[rows] - G[16])
    assert (a != b).any() and (a != exact).any()
    assert ((b - exact).abs() / exact).max() < 64 * 2.0 ** -24 * float(G.abs().max()) * L


@pytest.mark.parametrize("family", ["kda", "gdn2"])
@pytest.mark.parametrize("case_name", ["vgroups", "correlated", "strongdecay"])
def test_fused_exponent_keeps_the_errors(family, case_name):
    """FrostBwdConfig.vec_fast_decay's exponent against the default kernel's, on the smoke's
    worst cases (correlated keys: the GPU's largest dg; strong decay: |G| up to ~300
    nats per chunk, where the fused exponent's extra rounding is largest, and the exact
    diagonal): dq^, dk^, dg within 5 % (+ 2e-4) of the default's, and below half the
    GPU bound (1e-2; 1.5e-2 correlated). Fails if the fused form loses the exponent's
    precision (e.g. G_ref scaled in bf16, or the ex2 argument rounded to bf16)."""
    base = _smoke_errors(family, case_name, exponent="sub_mul")
    fused = _smoke_errors(family, case_name, exponent="fused")
    bound = 1.5e-2 if case_name == "correlated" else 1e-2
    print(f"{family} {case_name}: dq dk dg sub_mul {base} fused {fused}")
    for name, b, f in zip(("dq", "dk", "dg"), base, fused):
        assert f < 1.05 * b + 2e-4, (name, b, f)
        assert f < bound / 2, (name, f)


@pytest.mark.parametrize("family", ["kda", "gdn2"])
@pytest.mark.parametrize("case_name", ["vgroups", "correlated", "strongdecay"])
def test_tf32_operands_keep_the_errors(family, case_name):
    """FrostBwdConfig.vec_tf32_adjoints (the decayed operands truncated to tf32 instead of
    split into bf16 hi + lo) on the smoke's worst cases, with the product's fused exponent:
    dq^, dk^ within 5 % (+ 2e-4) of the split's, dg within 1.5x (+ 2e-4: the model put it
    1.0-1.3x), every one below half the GPU bound. Fails if the operands lose more than
    tf32's bits (e.g. rounded to bf16 once: the last test's design)."""
    split = _smoke_errors(family, case_name, exponent="fused")
    tf32 = _smoke_errors(family, case_name, exponent="fused", split="tf32")
    bound = 1.5e-2 if case_name == "correlated" else 1e-2
    print(f"{family} {case_name}: dq dk dg hi+lo {split} tf32 {tf32}")
    for name, b, t, slack in zip(("dq", "dk", "dg"), split, tf32, (1.05, 1.05, 1.5)):
        assert t < slack * b + 2e-4, (name, b, t)
        assert t < bound / 2, (name, t)


def test_tf32_truncation():
    """The model's tf32: 10 explicit mantissa bits kept, toward zero, exact on bf16 values."""
    x = torch.randn(4096, dtype=torch.float64) * 1e3
    t = tf32_truncated(x)
    rel = ((t - f32(x)) / f32(x)).abs()
    assert rel.max() < 2.0 ** -10 and rel.max() > 2.0 ** -12
    assert (t.abs() <= f32(x).abs()).all()
    b = x.to(torch.bfloat16).double()
    assert torch.equal(tf32_truncated(b), b)


@pytest.mark.parametrize("family", ["kda", "gdn2"])
def test_factored_algebra_is_exact(family):
    got, ref = _dg(family, (70, 5), 2, 2, True, exact=True)
    assert rel_err(got, ref) < 1e-12


def test_split_operands_keep_dg_inside_the_bound():
    """The smoke case 'vgroups' (the GPU's worst before the split): (300, 65) tokens,
    2 q heads over 4 v heads, an initial state."""
    split, ref = _dg("kda", (300, 65), 2, 4, True)
    once, _ = _dg("kda", (300, 65), 2, 4, True, split=False)
    e_split, e_once = rel_err(split, ref), rel_err(once, ref)
    assert e_split < 4e-3, e_split
    assert e_once > 3 * e_split, (e_once, e_split)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
