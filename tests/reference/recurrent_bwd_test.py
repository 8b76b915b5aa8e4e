"""The hand-written recurrent backward (recurrent_bwd.py) against autograd through the
token recurrence (delta_rule.recurrent_grads): every gradient, every family, head groups,
pre-processing options, with and without initial / final state gradients."""
from __future__ import annotations

import pytest
import torch

from tests.reference.compare import assert_rel_close
from tests.reference.delta_rule import Primals, recurrent_grads
from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs
from tests.reference.preprocess import Family
from tests.reference.recurrent_bwd import explicit_recurrent_grads

F64 = torch.float64
EXACT = 1e-11  # the same derivative, evaluated in another order

CASES = {
    "plain": dict(),
    "value_groups_h0": dict(H=2, HV=4, with_initial_state=True),
    "qk_groups_l2norm": dict(H=4, HK=2, HV=2, use_qk_l2norm=True, with_initial_state=True),
    "safe_gate_sigmoid": dict(safe_gate=True, use_beta_sigmoid=True, allow_neg_eigval=True,
                              with_initial_state=True),
    "linear_gate": dict(gate_domain="linear"),
}


def _primals(x) -> Primals:
    return Primals(x.q, x.k, x.v, x.g, x.beta, x.cu_seqlens, w=x.w,
                   initial_state=x.initial_state, a_log=x.a_log, dt_bias=x.dt_bias)


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("with_dht", [False, True], ids=["no_dht", "dht"])
def test_explicit_backward_equals_autograd(family, case, with_dht):
    kw = dict(family=family, seq_lens=(3, 0, 5, 1), H=2, K=3, V=2, dtype=F64, gate_dtype=F64,
              state_dtype=F64, param_dtype=F64)
    kw.update(CASES[case])
    if family is Family.GDN and kw.get("safe_gate"):
        kw["allow_neg_eigval"] = False  # keep one GDN case on the plain sigmoid
    config = InputConfig(**kw)
    x = make_inputs(config, seed=11)
    dO, dht = make_grad_outputs(config, seed=12)
    dht = dht if with_dht else None
    opts = config.options()
    want = recurrent_grads("autograd", family, opts, _primals(x), dO, dht)
    got = explicit_recurrent_grads("explicit", family, opts, _primals(x), dO, dht)
    assert set(got.present()) == set(want.present())
    for name, value in want.present().items():
        assert_rel_close(name, getattr(got, name), value, EXACT)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
