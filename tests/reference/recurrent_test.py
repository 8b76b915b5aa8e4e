"""Self-checks of the token-by-token references (naive_recurrent_gdn / _kda / _gdn2)."""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F

from tests.reference.compare import assert_rel_close
from tests.reference.families import REFERENCES, reference_backward, reference_forward
from tests.reference.gdn import naive_recurrent_gdn
from tests.reference.gdn2 import naive_recurrent_gdn2
from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs
from tests.reference.kda import naive_recurrent_kda, naive_recurrent_kda_bwd
from tests.reference.preprocess import Family

F64 = torch.float64
EXACT = 1e-12  # same math in a different order: float64 rounding only


def _config(family: Family, **kw) -> InputConfig:
    base = dict(family=family, seq_lens=(2, 0, 3, 1), H=2, HV=4, K=3, V=2, dtype=F64, gate_dtype=F64,
                state_dtype=F64, param_dtype=F64, with_initial_state=True)
    base.update(kw)
    return InputConfig(**base)


def _direct_loop(family: Family, q, k, v, g, beta, w, cu, scale, h0):
    """Independent reading of the spec's stored-state formulas, one (sequence, head, token) at a time:
    X_t = X_{t-1} Diag(alpha) (I - (b*k) k^T) + (w*v) k^T,  o_t = scale X_t q_t  (X = S^T, [V, K])."""
    T, H, K = q.shape
    HK, HV, V = k.shape[1], v.shape[1], v.shape[2]
    HO = max(H, HV)
    N = cu.numel() - 1
    o = torch.zeros(T, HO, V, dtype=F64)
    final = torch.zeros(N, HO, V, K, dtype=F64)
    eye = torch.eye(K, dtype=F64)
    for n in range(N):
        for h in range(HO):
            X = torch.zeros(V, K, dtype=F64) if h0 is None else h0[n, h].clone()
            qh, kh, vh = h // (HO // H), h // (HO // HK), h // (HO // HV)
            for t in range(int(cu[n]), int(cu[n + 1])):
                kt = k[t, kh]
                alpha = torch.exp(g[t, h]) * torch.ones(K, dtype=F64)
                if family is Family.GDN2:
                    b, wv = beta[t, h], w[t, h] * v[t, vh]
                else:
                    b, wv = beta[t, h] * torch.ones(K, dtype=F64), beta[t, h] * v[t, vh]
                X = X @ torch.diag(alpha) @ (eye - torch.outer(b * kt, kt)) + torch.outer(wv, kt)
                o[t, h] = scale * (X @ q[t, qh])
            final[n, h] = X
    return o, final


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("heads", [dict(H=2, HV=4), dict(H=4, HK=2, HV=2)], ids=["value_groups", "qk_groups"])
def test_matches_direct_per_head_loop(family, heads):
    x = make_inputs(_config(family, scale=0.7, **heads), seed=1)
    o, final = reference_forward(x)
    o_ref, final_ref = _direct_loop(family, x.q, x.k, x.v, x.g, x.beta, x.w, x.cu_seqlens, 0.7, x.initial_state)
    assert_rel_close("o", o, o_ref, EXACT)
    assert_rel_close("final_state", final, final_ref, EXACT)


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
def test_varlen_equals_each_sequence_alone(family):
    cfg = _config(family, seq_lens=(5, 0, 1, 7), use_qk_l2norm=True)
    x = make_inputs(cfg, seed=2)
    o, final = reference_forward(x)
    cu = x.cu_seqlens.tolist()
    for n in range(cfg.N):
        s, e = cu[n], cu[n + 1]
        one = dataclasses.replace(
            x,
            **{name: getattr(x, name)[s:e] for name in ("q", "k", "v", "g", "beta", "w") if getattr(x, name) is not None},
            cu_seqlens=torch.tensor([0, e - s], dtype=torch.int32),
            initial_state=x.initial_state[n : n + 1],
        )
        o_n, final_n = reference_forward(one)
        assert_rel_close(f"o[seq {n}]", o[s:e], o_n, EXACT)
        assert_rel_close(f"final_state[seq {n}]", final[n : n + 1], final_n, EXACT)
    # An empty sequence hands its initial state through unchanged.
    assert torch.equal(final[1], x.initial_state[1])


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("heads", [dict(H=2, HV=4), dict(H=4, HK=4, HV=2), dict(H=4, HK=2, HV=2)],
                         ids=["value_groups", "q_groups", "qk_groups"])
def test_grouping_equals_explicit_expansion(family, heads):
    cfg = _config(family, seq_lens=(4, 3), **heads)
    x = make_inputs(cfg, seed=3)
    HO = cfg.HO
    expanded = dataclasses.replace(
        x, q=x.q.repeat_interleave(HO // cfg.H, 1), k=x.k.repeat_interleave(HO // cfg.num_k_heads, 1),
        v=x.v.repeat_interleave(HO // cfg.num_v_heads, 1),
    )
    o, final = reference_forward(x)
    o_e, final_e = reference_forward(expanded)
    assert_rel_close("o", o, o_e, EXACT)
    assert_rel_close("final_state", final, final_e, EXACT)

    dO, dht = make_grad_outputs(cfg, seed=4)
    grads = reference_backward(x, dO, dht)
    grads_e = reference_backward(expanded, dO, dht)
    for name, native, group in (("dq", grads.dq, cfg.H), ("dk", grads.dk, cfg.num_k_heads), ("dv", grads.dv, cfg.num_v_heads)):
        summed = getattr(grads_e, name).reshape(cfg.T, group, HO // group, -1).sum(2)
        assert_rel_close(name, native, summed, EXACT)


def _raw_and_transformed(family: Family, **flags):
    """The same case twice: flags applied by the reference, and pre-applied here by hand."""
    cfg = _config(family, seq_lens=(3, 4), **flags)
    x = make_inputs(cfg, seed=5)
    plain = dataclasses.replace(cfg, use_qk_l2norm=False, use_beta_sigmoid=False, allow_neg_eigval=False,
                                safe_gate=False, gate_domain="log", gate_lower_bound=None)
    q, k, g, beta = x.q, x.k, x.g, x.beta
    if cfg.use_qk_l2norm:
        q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    if cfg.use_beta_sigmoid:
        beta = (2.0 if cfg.allow_neg_eigval else 1.0) / (1.0 + torch.exp(-beta))
    if cfg.gate_domain == "linear":
        g = torch.log(g + 1e-10)
    if cfg.safe_gate:
        A = torch.exp(x.a_log)
        if family is Family.GDN:
            g = -A * torch.log1p(torch.exp(g + x.dt_bias))
        else:
            lb = -5.0 if cfg.gate_lower_bound is None else cfg.gate_lower_bound
            g = lb / (1.0 + torch.exp(-A[:, None] * (g + x.dt_bias)))
    y = dataclasses.replace(x, config=plain, q=q, k=k, g=g, beta=beta, a_log=None, dt_bias=None)
    return x, y


FLAG_CASES = {
    "l2norm": dict(use_qk_l2norm=True),
    "beta_sigmoid": dict(use_beta_sigmoid=True),
    "neg_eigval": dict(use_beta_sigmoid=True, allow_neg_eigval=True),
    "linear_gate": dict(gate_domain="linear"),
    "safe_gate": dict(safe_gate=True),
}


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("flags", list(FLAG_CASES.values()), ids=list(FLAG_CASES))
def test_flags_equal_hand_applied_preprocessing(family, flags):
    x, y = _raw_and_transformed(family, **flags)
    o, final = reference_forward(x)
    o_y, final_y = reference_forward(y)
    assert_rel_close("o", o, o_y, EXACT)
    assert_rel_close("final_state", final, final_y, EXACT)


def test_kda_safe_gate_honours_lower_bound():
    x, y = _raw_and_transformed(Family.KDA, safe_gate=True, gate_lower_bound=-2.5)
    assert_rel_close("o", reference_forward(x)[0], reference_forward(y)[0], EXACT)


def test_default_scale_is_inverse_sqrt_k():
    x = make_inputs(_config(Family.GDN, K=5), seed=6)
    o_default, _ = reference_forward(x)
    o_explicit, _ = naive_recurrent_gdn(*x.args(), **{**x.options(), "scale": 1.0 / math.sqrt(5)})
    assert_rel_close("o", o_default, o_explicit, 0.0)
    o_other, _ = naive_recurrent_gdn(*x.args(), **{**x.options(), "scale": 1.0})
    assert_rel_close("o scales linearly", o_other / math.sqrt(5), o_default, EXACT)


def test_kda_collapses_to_gdn_with_channel_constant_gate():
    x = make_inputs(_config(Family.GDN, seq_lens=(4, 0, 5)), seed=7)
    g_kda = x.g[..., None].expand(-1, -1, x.config.K).contiguous()
    o_gdn, f_gdn = reference_forward(x)
    o_kda, f_kda = naive_recurrent_kda(*x.args()[:3], g_kda, x.beta, x.cu_seqlens, output_final_state=True,
                                      initial_state=x.initial_state)
    assert_rel_close("o", o_kda, o_gdn, EXACT)
    assert_rel_close("final_state", f_kda, f_gdn, EXACT)


def test_gdn2_with_beta_broadcast_equals_kda():
    x = make_inputs(_config(Family.KDA, seq_lens=(4, 0, 5), use_qk_l2norm=True), seed=8)
    cfg = x.config
    b = x.beta[..., None].expand(-1, -1, cfg.K).contiguous()
    w = x.beta[..., None].expand(-1, -1, cfg.V).contiguous()
    o_kda, f_kda = reference_forward(x)
    o2, f2 = naive_recurrent_gdn2(x.q, x.k, x.v, x.g, b, w, x.cu_seqlens, output_final_state=True,
                                  initial_state=x.initial_state, use_qk_l2norm=True)
    assert_rel_close("o", o2, o_kda, EXACT)
    assert_rel_close("final_state", f2, f_kda, EXACT)


GRADCHECK_CASES = {
    "plain": dict(),
    "l2norm_safe_gate_sigmoid": dict(use_qk_l2norm=True, safe_gate=True, use_beta_sigmoid=True),
    "linear_neg_eigval": dict(gate_domain="linear", use_beta_sigmoid=True, allow_neg_eigval=True),
}


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("flags", list(GRADCHECK_CASES.values()), ids=list(GRADCHECK_CASES))
def test_gradcheck(family, flags):
    cfg = _config(family, seq_lens=(2, 0, 3), H=1, HV=2, **flags)
    x = make_inputs(cfg, seed=9)
    names = [n for n in ("q", "k", "v", "g", "beta", "w", "initial_state", "a_log", "dt_bias") if getattr(x, n) is not None]
    fn = REFERENCES[family].recurrent

    def f(*tensors):
        y = dataclasses.replace(x, **dict(zip(names, tensors)))
        return fn(*y.args(), output_final_state=True, **y.options())

    leaves = [getattr(x, n).detach().clone().requires_grad_(True) for n in names]
    assert torch.autograd.gradcheck(f, leaves, eps=1e-6, atol=1e-7, rtol=1e-6)


def test_bwd_helper_returns_grads_shaped_like_primals_and_none_for_absent():
    x = make_inputs(_config(Family.KDA, safe_gate=True, with_dt_bias=False), seed=10)
    dO, _ = make_grad_outputs(x.config, seed=11)
    grads = naive_recurrent_kda_bwd(*x.args(), dO, **x.options())
    for name, primal in (("dq", x.q), ("dk", x.k), ("dv", x.v), ("dg", x.g), ("dbeta", x.beta),
                         ("d_initial_state", x.initial_state), ("d_a_log", x.a_log)):
        assert getattr(grads, name).shape == primal.shape, name
    assert grads.d_dt_bias is None and grads.dw is None


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda kw: kw.update(k=kw["k"][:, :1].repeat(1, 3, 1)), "argument 'k'"),
        (lambda kw: kw.update(g=kw["g"][..., None]), "argument 'g'"),
        (lambda kw: kw.update(cu_seqlens=torch.tensor([0, 2, 1, 6], dtype=torch.int32)), "argument 'cu_seqlens'"),
        (lambda kw: kw.update(initial_state=kw["initial_state"].transpose(-1, -2)), "argument 'initial_state'"),
        (lambda kw: kw.update(allow_neg_eigval=True), "argument 'allow_neg_eigval'"),
        (lambda kw: kw.update(safe_gate=True, gate_domain="linear"), "argument 'gate_domain'"),
        (lambda kw: kw.update(gate_domain="exp"), "argument 'gate_domain'"),
        (lambda kw: kw.update(a_log=torch.zeros(4, dtype=F64)), "argument 'a_log'"),
    ],
    ids=["bad_hk", "gate_rank", "cu_decreasing", "state_k_major", "neg_eigval_alone", "linear_safe", "bad_domain",
         "a_log_without_safe_gate"],
)
def test_bad_input_errors_name_function_and_argument(mutate, message):
    x = make_inputs(_config(Family.GDN, K=3, V=2), seed=12)
    kw = dict(q=x.q, k=x.k, v=x.v, g=x.g, beta=x.beta, cu_seqlens=x.cu_seqlens, initial_state=x.initial_state)
    mutate(kw)
    with pytest.raises(ValueError, match=rf"naive_recurrent_gdn: {message}"):
        naive_recurrent_gdn(**kw)


def test_gate_lower_bound_requires_safe_gate():
    x = make_inputs(_config(Family.KDA), seed=13)
    with pytest.raises(ValueError, match="naive_recurrent_kda: argument 'gate_lower_bound'"):
        naive_recurrent_kda(*x.args(), **{**x.options(), "gate_lower_bound": -3.0})



@pytest.mark.parametrize("chunked", [False, True], ids=["recurrent_bwd", "chunk_bwd"])
def test_bwd_rejects_misshaped_upstream_gradients(chunked):
    x = make_inputs(_config(Family.GDN), seed=14)
    dO, dht = make_grad_outputs(x.config, seed=15)
    with pytest.raises(ValueError, match="argument 'dO'"):
        reference_backward(x, dO[:, :1], chunked=chunked)
    with pytest.raises(ValueError, match="argument 'd_final_state'"):
        reference_backward(x, dO, dht.transpose(-1, -2), chunked=chunked)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
