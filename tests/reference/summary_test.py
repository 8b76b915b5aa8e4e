"""Self-checks of the span-summary references (summary.py) against the recurrence.

- the summary's final state is the recurrence's final state;
- the map is affine with the summary's transition: X_L(X_0) = X_0 M^T + X_L(0);
- the backward summary's d_initial_state is autograd's, with and without d_final_state,
  whatever v is; its transition is the forward's, transposed;
- summaries compose: a sequence cut anywhere is the composition of its two halves.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.reference.compare import assert_rel_close
from tests.reference.delta_rule import Primals, recurrent_grads
from tests.reference.families import reference_forward
from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs
from tests.reference.preprocess import Family
from tests.reference.summary import summary_bwd_reference, summary_reference

F64 = torch.float64
EXACT = 1e-12

# every head grouping the rules allow: HK in {H, HV}, HO = max(H, HV)
HEADS = {"equal": dict(H=2), "value_groups": dict(H=2, HV=4),
         "value_groups_k_at_v": dict(H=2, HK=4, HV=4), "qk_groups": dict(H=4, HK=4, HV=2),
         "qk_groups_k_at_v": dict(H=4, HK=2, HV=2)}
OPTIONS = {"plain": dict(), "l2norm_safe_gate": dict(use_qk_l2norm=True, safe_gate=True,
                                                     use_beta_sigmoid=True)}


def _inputs(family, heads="value_groups", options="plain", seed=1, **kw):
    base = dict(family=family, seq_lens=(4, 0, 6, 1), K=3, V=2, dtype=F64, gate_dtype=F64,
                state_dtype=F64, param_dtype=F64, with_initial_state=True)
    base.update(HEADS[heads], **OPTIONS[options], **kw)
    config = InputConfig(**base)
    return config, make_inputs(config, seed=seed)


def _summary(x, initial_state="given"):
    init = x.initial_state if initial_state == "given" else initial_state
    return summary_reference(x.config.family, x.k, x.v, x.g, x.beta, x.cu_seqlens, w=x.w,
                             initial_state=init, opts=x.config.options(), a_log=x.a_log,
                             dt_bias=x.dt_bias)


def _summary_bwd(x, dO, dht):
    return summary_bwd_reference(x.config.family, x.q, x.k, x.g, x.beta, x.cu_seqlens, dO,
                                 d_final_state=dht, opts=x.config.options(), a_log=x.a_log,
                                 dt_bias=x.dt_bias)


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("heads", sorted(HEADS))
@pytest.mark.parametrize("options", sorted(OPTIONS))
def test_final_state_is_the_recurrences(family, heads, options):
    _, x = _inputs(family, heads, options)
    final, _ = _summary(x)
    assert_rel_close("final_state", final, reference_forward(x)[1], EXACT)


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("options", sorted(OPTIONS))
def test_the_map_is_affine_with_the_transition(family, options):
    _, x = _inputs(family, "value_groups", options)
    from_zero, transition = _summary(x, initial_state=None)
    from_x0, _ = _summary(x)
    assert_rel_close("X_0 M^T + D", x.initial_state @ transition + from_zero, from_x0, EXACT)
    empty = 1  # the empty sequence maps its state to itself
    assert torch.equal(transition[empty], torch.eye(3, dtype=F64).expand(4, 3, 3))


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("heads", sorted(HEADS))
@pytest.mark.parametrize("options", sorted(OPTIONS))
@pytest.mark.parametrize("with_dht", [False, True], ids=["no_dht", "dht"])
def test_backward_summary_is_autograds_state_gradient(family, heads, options, with_dht):
    config, x = _inputs(family, heads, options)
    dO, dht = make_grad_outputs(config, seed=2)
    dht = dht if with_dht else None
    primals = Primals(x.q, x.k, x.v, x.g, x.beta, x.cu_seqlens, w=x.w,
                      initial_state=x.initial_state, a_log=x.a_log, dt_bias=x.dt_bias)
    want = recurrent_grads("autograd", family, config.options(), primals, dO, dht)
    got, transition_bwd = _summary_bwd(x, dO, dht)
    assert_rel_close("d_initial_state", got, want.d_initial_state, EXACT)
    _, transition = _summary(x)
    assert_rel_close("transition (backward)", transition_bwd, transition.transpose(-1, -2), EXACT)


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
def test_backward_composition_with_d_final_state(family):
    config, x = _inputs(family)
    dO, dht = make_grad_outputs(config, seed=3)
    full, transition_bwd = _summary_bwd(x, dO, dht)
    alone, _ = _summary_bwd(x, dO, None)
    assert_rel_close("X_dht M + X_G", dht @ transition_bwd + alone, full, EXACT)


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("cut", [1, 5, 8])
def test_summaries_compose_across_a_cut(family, cut):
    _, x = _inputs(family, seq_lens=(9,))
    final, transition = _summary(x)

    def part(lo, hi, init):
        fields = {n: getattr(x, n)[lo:hi] for n in ("k", "v", "g", "beta", "w")
                  if getattr(x, n) is not None}
        cu = torch.tensor([0, hi - lo], dtype=torch.int32)
        return _summary(dataclasses.replace(x, **fields, cu_seqlens=cu), initial_state=init)

    first, m1 = part(0, cut, x.initial_state)
    second, m2 = part(cut, 9, first)
    assert_rel_close("final across the cut", second, final, EXACT)
    assert_rel_close("M^T composes", m1 @ m2, transition, EXACT)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
