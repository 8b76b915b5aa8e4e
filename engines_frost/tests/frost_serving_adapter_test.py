"""CPU tests of serving_adapter.py: the chunked FROST forward with state pools, overwrite
and fused gates, its kernel replaced by the float64 token recurrence (the kernel's own
contract: log-domain gates, betas as given, one state row per sequence), against the
float64 serving reference (tests/reference/serving.py), which applies the gates and pools
itself. What is checked is the adapter: the spec's gate and beta pre-processing, the
gather of pool rows (zero for a slot outside the pool), the zeroed output rows of skipped
sequences, the scatter back (in place, or into a pool-shaped final_state, never touching
a row no served sequence owns), overwrite without a pool. The kernel's numerics are the
GPU matrices'.
"""
import dataclasses
import types

import pytest

torch = pytest.importorskip("torch")

from cudnn.linear_attention.frost import serving_adapter  # noqa: E402
from tests.reference.compare import rel_err  # noqa: E402
from tests.reference.delta_rule import Primals, run_recurrent  # noqa: E402
from tests.reference.inputs import InputConfig, make_inputs  # noqa: E402
from tests.reference.preprocess import Family, Options  # noqa: E402
from tests.reference.serving import run_serving  # noqa: E402

BOUND = 1e-5  # float32 gates and buffers against float64
SENTINEL = 1234.5


def recurrent_kernel(*, q, k, v, g, beta, w, cu_seqlens, out, initial_state, final_state,
                     scale, use_l2norm, gate_per_channel, beta_per_channel, stream):
    """frost_fwd's contract in float64: log gates, raw betas, states per sequence."""
    family = Family.GDN2 if beta_per_channel else (Family.KDA if gate_per_channel else Family.GDN)
    x = Primals(q, k, v, g, beta, cu_seqlens, w=w, initial_state=initial_state)
    o, final = run_recurrent("kernel", family, Options(scale=scale, use_qk_l2norm=use_l2norm), x,
                             final_state is not None)
    out.copy_(o)
    if final_state is not None:
        final_state.copy_(final)


CASES = {
    "gdn-pool-overwrite-safe": dict(family=Family.GDN, slots=(3, -1, 0, 7, 5), pool=7,
                                    overwrite=True, final=True,
                                    opts=dict(safe_gate=True, use_beta_sigmoid=True,
                                              allow_neg_eigval=True)),
    "kda-pool-final-rows": dict(family=Family.KDA, slots=(2, 6, -5, 0, 4), pool=7,
                                overwrite=False, final=True,
                                opts=dict(safe_gate=True, gate_lower_bound=-3.0)),
    "gdn2-overwrite-linear": dict(family=Family.GDN2, slots=None, pool=None, overwrite=True,
                                  final=True, opts=dict(gate_domain="linear", use_beta_sigmoid=True)),
    "kda-no-slot-served": dict(family=Family.KDA, slots=(-1, 9, -3, 7, 100), pool=7,
                               overwrite=True, final=True, opts=dict(use_beta_sigmoid=True)),
    "gdn-pool-read-only": dict(family=Family.GDN, slots=(1, 0, 6, 3, 2), pool=7,
                               overwrite=False, final=False, opts=dict(safe_gate=True)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_adapter_matches_the_serving_reference(name):
    c = CASES[name]
    cfg = InputConfig(family=c["family"], seq_lens=(3, 1, 0, 5, 2), H=2, HV=4, K=8, V=4,
                      **c["opts"])
    x = make_inputs(cfg, seed=3)
    n = cfg.N
    rows = c["pool"] or n
    pool = torch.randn(rows, cfg.HO, cfg.V, cfg.K, generator=torch.Generator().manual_seed(5))
    before = pool.clone()
    slots = None if c["slots"] is None else torch.tensor(c["slots"], dtype=torch.int32)
    final = None
    if c["final"] and not c["overwrite"]:
        final = torch.full((rows, cfg.HO, cfg.V, cfg.K), SENTINEL)
    elif c["final"]:
        final = pool  # one buffer bound to both ports
    out = torch.full((cfg.T, cfg.HO, cfg.V), float("nan"))
    t = dict(q=x.q, k=x.k, v=x.v, g=x.g, beta=x.beta, w=x.w, cu_seqlens=x.cu_seqlens, O=out,
             initial_state=pool, final_state=final, state_indices=slots, a_log=x.a_log,
             dt_bias=x.dt_bias)
    flags = types.SimpleNamespace(overwrite_initial_state=c["overwrite"],
                                  safe_gate=cfg.safe_gate, use_beta_sigmoid=cfg.use_beta_sigmoid,
                                  allow_neg_eigval=cfg.allow_neg_eigval,
                                  gate_domain=cfg.gate_domain,
                                  gate_lower_bound=cfg.gate_lower_bound)
    f = types.SimpleNamespace(flags=flags, uses_state_pool=slots is not None)
    assert serving_adapter.needed(f)
    scale = cfg.K ** -0.5
    serving_adapter.run(recurrent_kernel, t, f, cfg.family is not Family.GDN,
                        dict(scale=scale, use_l2norm=False,
                             gate_per_channel=cfg.family is not Family.GDN,
                             beta_per_channel=cfg.family is Family.GDN2), stream=None)

    ref = run_serving("adapter", cfg.family, dataclasses.replace(cfg.options(), scale=scale),
                      Primals(x.q, x.k, x.v, x.g, x.beta, x.cu_seqlens, w=x.w, initial_state=before,
                              a_log=x.a_log, dt_bias=x.dt_bias),
                      state_indices=slots, output_final_state=c["final"])
    assert rel_err(out, ref.o) < BOUND, rel_err(out, ref.o)
    if c["overwrite"]:
        want = ref.state_after(before)
        assert rel_err(pool, want) < BOUND
        for row in set(range(rows)) - set(ref.written):
            assert torch.equal(pool[row], before[row]), f"pool row {row} was touched"
    else:
        assert torch.equal(pool, before)
        if final is not None:
            want = ref.state_after(torch.full_like(final, SENTINEL))
            assert rel_err(final, want) < BOUND


def test_gate_transforms_follow_the_spec():
    flags = types.SimpleNamespace(gate_domain="log", safe_gate=True, gate_lower_bound=None,
                                  use_beta_sigmoid=True, allow_neg_eigval=True)
    g = torch.tensor([[-30.0, 0.0, 30.0]])
    a_log = torch.log(torch.tensor([2.0, 1.0, 0.5]))
    gdn = serving_adapter.log_decay(g, flags, False, a_log, None)
    assert torch.allclose(gdn, -torch.tensor([2.0, 1.0, 0.5]) * torch.nn.functional.softplus(g))
    kda = serving_adapter.log_decay(g[..., None].expand(1, 3, 2), flags, True, a_log, None)
    assert kda.min() > -5.0 and kda.max() < 0.0
    assert torch.allclose(serving_adapter.beta_activation(torch.zeros(2), flags), torch.ones(2))
    linear = types.SimpleNamespace(gate_domain="linear", safe_gate=False)
    assert torch.allclose(serving_adapter.log_decay(torch.tensor([1.0, 0.0]), linear, False,
                                                    None, None),
                          torch.log(torch.tensor([1.0 + 1e-10, 1e-10])))


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
