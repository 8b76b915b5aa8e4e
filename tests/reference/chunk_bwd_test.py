"""The explicit chunked backward (naive_chunk_*_bwd and its stages) against autograd.

End to end, every gradient is compared with autograd through the token-by-token recurrence;
stage by stage, each explicit adjoint is compared with autograd through that stage's own
forward, so a kernel author can localise a mismatch.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.reference.chunk_bwd import chunk_local_cumsum_bwd, prepare_wy_repr_bwd
from tests.reference.chunk_fwd import chunk_local_cumsum, chunk_scaled_dot_kkt, recompute_w_u, solve_tril
from tests.reference.compare import assert_rel_close
from tests.reference.decay_gram import decayed_gram, decayed_gram_bwd
from tests.reference.families import reference_backward
from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs
from tests.reference.preprocess import Family

F64 = torch.float64
MIXED_LENS = (0, 1, 63, 64, 65, 130)
BOUND = 1e-10


@pytest.fixture(autouse=True)
def _seed_global_rng():
    """Stage tests draw from torch's global generator; make every test's draw fixed."""
    torch.manual_seed(1234)


def _config(family: Family, **kw) -> InputConfig:
    base = dict(family=family, seq_lens=MIXED_LENS, H=2, HV=4, K=32, V=48, dtype=F64, gate_dtype=F64,
                state_dtype=F64, param_dtype=F64)
    base.update(kw)
    return InputConfig(**base)


def _assert_grads_close(actual, expected, bound):
    a, e = actual.present(), expected.present()
    assert a.keys() == e.keys()
    for name in e:
        assert_rel_close(name, a[name], e[name], bound)


HEADS = {"value_groups": dict(H=2, HV=4), "qk_groups": dict(H=4, HK=2, HV=2)}
CASES = {
    "plain": (dict(), False),
    "state_and_dht": (dict(with_initial_state=True), True),
    "dht_only": (dict(), True),
    "l2norm_safe_gate_sigmoid": (dict(with_initial_state=True, use_qk_l2norm=True, safe_gate=True,
                                      use_beta_sigmoid=True), True),
    "linear_gate_neg_eigval": (dict(gate_domain="linear", use_beta_sigmoid=True, allow_neg_eigval=True), False),
}


@pytest.mark.parametrize("family", [Family.GDN, Family.KDA], ids=lambda f: f.value)
@pytest.mark.parametrize("heads", list(HEADS.values()), ids=list(HEADS))
@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_chunk_backward_equals_autograd_of_recurrent(family, heads, case):
    flags, with_dht = case
    cfg = _config(family, **heads, **flags)
    x = make_inputs(cfg, seed=31)
    dO, dht = make_grad_outputs(cfg, seed=32)
    dht = dht if with_dht else None
    expected = reference_backward(x, dO, dht)
    actual = reference_backward(x, dO, dht, chunked=True)
    _assert_grads_close(actual, expected, BOUND)


# With alpha ~ e^-12 the true dg is ~1e-5 while the chunked dg = reverse cumsum of O(1) terms
# (q*dq - k*dk + ...) that cancel: float64 rounding of those terms bounds dg's relative error
# near 1e-10 here (measured up to 1.5e-10 over seeds). The recurrence has no such cancellation.
STRONG_DECAY_DG_BOUND = 1e-8


@pytest.mark.parametrize("family", [Family.GDN, Family.KDA], ids=lambda f: f.value)
def test_chunk_backward_with_strong_decay(family):
    cfg = _config(family, seq_lens=(130, 3), H=1, HV=1, with_initial_state=True)
    x = make_inputs(cfg, seed=33)
    x = dataclasses.replace(x, g=torch.full_like(x.g, -12.0).add_(0.5 * torch.rand_like(x.g)))
    dO, dht = make_grad_outputs(cfg, seed=34)
    actual, expected = reference_backward(x, dO, dht, chunked=True), reference_backward(x, dO, dht)
    for name, want in expected.present().items():
        bound = STRONG_DECAY_DG_BOUND if name == "dg" else BOUND
        assert_rel_close(name, actual.present()[name], want, bound)


# --------------------------------------------------------------------------- stage adjoints


def _vjp(fn, primals, cotangents):
    leaves = [p.detach().clone().requires_grad_(True) for p in primals]
    with torch.enable_grad():
        outs = fn(*leaves)
        outs = outs if isinstance(outs, tuple) else (outs,)
        loss = sum((o * c).sum() for o, c in zip(outs, cotangents))
        return torch.autograd.grad(loss, leaves)


@pytest.mark.parametrize("gate_width", [1, 16], ids=["scalar_gate", "channel_gate"])
@pytest.mark.parametrize("strict", [True, False], ids=["strict", "inclusive"])
def test_decayed_gram_bwd_is_the_adjoint(gate_width, strict):
    C, K = 20, 16
    x, y = torch.randn(3, C, K, dtype=F64), torch.randn(3, C, K, dtype=F64)
    G = (-torch.rand(3, C, gate_width, dtype=F64)).cumsum(-2)
    dM = torch.randn(3, C, C, dtype=F64)
    expected = _vjp(lambda a, b, g: decayed_gram(a, b, g, strict), (x, y, G), (dM,))
    for name, got, want in zip(("dx", "dy", "dG"), decayed_gram_bwd(dM, x, y, G, strict), expected):
        assert_rel_close(name, got, want, 1e-12)


def test_chunk_local_cumsum_bwd_is_the_adjoint():
    gamma, dG = torch.randn(4, 64, 8, dtype=F64), torch.randn(4, 64, 8, dtype=F64)
    (expected,) = _vjp(chunk_local_cumsum, (gamma,), (dG,))
    assert_rel_close("dgamma", chunk_local_cumsum_bwd(dG), expected, 1e-13)


@pytest.mark.parametrize("gate_width", [1, 16], ids=["scalar_gate", "channel_gate"])
def test_prepare_wy_repr_bwd_is_the_adjoint(gate_width):
    C, K, V = 64, 16, 24
    k = torch.nn.functional.normalize(torch.randn(2, C, K, dtype=F64), dim=-1)
    v = torch.randn(2, C, V, dtype=F64)
    beta = torch.rand(2, C, 1, dtype=F64)
    G = (-0.3 * torch.rand(2, C, gate_width, dtype=F64)).cumsum(-2)
    dw, du = torch.randn(2, C, K, dtype=F64), torch.randn(2, C, V, dtype=F64)

    def wy(k_, v_, beta_, G_):
        # autograd side inverts with linalg.inv, independent of solve_tril's substitution
        T = torch.linalg.inv(torch.eye(C, dtype=F64) + chunk_scaled_dot_kkt(k_, beta_, G_))
        return recompute_w_u(k_, v_, beta_, G_, T)

    expected = _vjp(wy, (k, v, beta, G), (dw, du))
    T = solve_tril(chunk_scaled_dot_kkt(k, beta, G))
    got = prepare_wy_repr_bwd(k, v, beta, G, T, dw, du)
    for name, a, e in zip(("dk", "dv", "dbeta", "dG"), got, expected):
        assert_rel_close(name, a, e, 1e-11)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
