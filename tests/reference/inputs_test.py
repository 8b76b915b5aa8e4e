"""The seeded input generator: determinism, shapes, dtypes, value ranges and config errors."""
from __future__ import annotations

import pytest
import torch

from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs
from tests.reference.preprocess import Family


def _cfg(family=Family.KDA, **kw):
    base = dict(family=family, seq_lens=(3, 0, 9), H=2, HK=2, HV=4, K=8, V=6)
    base.update(kw)
    return InputConfig(**base)


def test_same_seed_same_values_other_seed_other_values():
    a, b, c = make_inputs(_cfg(), 7), make_inputs(_cfg(), 7), make_inputs(_cfg(), 8)
    assert torch.equal(a.q, b.q) and torch.equal(a.g, b.g) and torch.equal(a.beta, b.beta)
    assert not torch.equal(a.q, c.q)


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
def test_shapes_and_dtypes(family):
    cfg = _cfg(family, dtype=torch.bfloat16, with_initial_state=True, safe_gate=True)
    x = make_inputs(cfg, 1)
    T, HO, K, V = 12, 4, 8, 6
    assert x.q.shape == (T, 2, K) and x.k.shape == (T, 2, K) and x.v.shape == (T, 4, V)
    assert x.g.shape == ((T, HO) if family is Family.GDN else (T, HO, K))
    assert x.beta.shape == ((T, HO, K) if family is Family.GDN2 else (T, HO))
    assert (x.w is not None) == (family is Family.GDN2)
    assert x.initial_state.shape == (3, HO, V, K) and x.initial_state.dtype == torch.float32
    assert x.q.dtype == torch.bfloat16 and x.g.dtype == torch.float32
    assert x.cu_seqlens.tolist() == [0, 3, 3, 12] and x.cu_seqlens.dtype == torch.int32
    assert x.a_log.shape == (HO,)
    assert x.dt_bias.shape == ((HO,) if family is Family.GDN else (HO, K))
    dO, dht = make_grad_outputs(cfg, 2)
    assert dO.shape == (T, HO, V) and dO.dtype == torch.bfloat16 and dht.shape == (3, HO, V, K)


def test_value_ranges():
    x = make_inputs(_cfg(seq_lens=(500,)), 3)
    assert (x.g < 0).all()  # log-domain gates are decays
    assert ((x.beta > 0) & (x.beta < 1)).all()
    norms = x.k.norm(dim=-1)
    assert torch.allclose(norms, torch.ones_like(norms), atol=1e-5)  # unit keys without in-kernel l2norm
    linear = make_inputs(_cfg(seq_lens=(500,), gate_domain="linear"), 3)
    assert ((linear.g > 0) & (linear.g < 1)).all()
    raw = make_inputs(_cfg(seq_lens=(500,), use_qk_l2norm=True, use_beta_sigmoid=True), 3)
    assert (raw.beta < 0).any() and (raw.k.norm(dim=-1) > 1.5).any()  # logits and raw keys
    gdn_safe = make_inputs(_cfg(Family.GDN, safe_gate=True), 3)
    assert ((gdn_safe.a_log >= 0) & (gdn_safe.a_log <= torch.log(torch.tensor(16.0)))).all()
    dt = torch.nn.functional.softplus(gdn_safe.dt_bias)
    assert ((dt > 0.999e-3) & (dt < 1.001e-1)).all()


def test_to_casts_floats_and_keeps_cu_seqlens():
    x = make_inputs(_cfg(with_initial_state=True), 4).to(torch.float64)
    assert x.q.dtype == torch.float64 and x.initial_state.dtype == torch.float64
    assert x.cu_seqlens.dtype == torch.int32


def test_options_follow_family():
    assert "gate_lower_bound" not in make_inputs(_cfg(Family.GDN), 5).options()
    kda = make_inputs(_cfg(Family.KDA, safe_gate=True, gate_lower_bound=-3.0), 5)
    assert kda.options()["gate_lower_bound"] == -3.0
    assert len(make_inputs(_cfg(Family.GDN2), 5).args()) == 7


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(seq_lens=()), "seq_lens"),
        (dict(H=3, HV=4), "divide"),
        (dict(HK=3), "argument 'k'"),
        (dict(allow_neg_eigval=True), "allow_neg_eigval"),
        (dict(gate_domain="linear", safe_gate=True), "gate_domain"),
    ],
    ids=["no_sequences", "heads_not_multiples", "bad_hk", "neg_eigval_alone", "linear_safe"],
)
def test_invalid_configs_are_rejected(kw, message):
    with pytest.raises(ValueError, match=message):
        make_inputs(_cfg(**kw), 0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_device_placement_and_seed_reproducible_across_devices():
    cpu = make_inputs(_cfg(with_initial_state=True), 6)
    gpu = make_inputs(_cfg(with_initial_state=True, device="cuda"), 6)
    assert gpu.q.is_cuda and gpu.cu_seqlens.is_cuda
    assert torch.equal(gpu.q.cpu(), cpu.q) and torch.equal(gpu.initial_state.cpu(), cpu.initial_state)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
