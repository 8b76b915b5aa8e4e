"""The FROST backward kernels' algebra (frost_bwd_model) against autograd of the recurrence.

Float64 gradients of <o, dO> + <final_state, d_final_state> by the three-kernel
algorithm (states, reverse chain, per-chunk gradients) must equal the reference backward
(tests/reference: autograd through the token-by-token recurrence) on fresh random inputs
for GDN, KDA and GDN-2: mixed lengths around the chunk (0, 1, 63, 64, 65, 130), grouped
q/k and v heads, with and without initial state, d_final_state and in-kernel L2 norm,
strong decay.
"""
import dataclasses
import math
import os
import sys

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tests.reference.compare import rel_err  # noqa: E402
from tests.reference.families import reference_backward  # noqa: E402
from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs  # noqa: E402
from tests.reference.preprocess import Family  # noqa: E402

from frost_bwd_model import frost_bwd_model  # noqa: E402

CASES = [  # (seq_lens, H, HK, HV, K, V, initial state, d_final_state, l2norm)
    ((1, 63, 64, 65, 0, 130), 2, 2, 2, 16, 8, True, True, False),
    ((100, 37), 1, 1, 2, 16, 16, False, False, True),
    ((129,), 2, 2, 1, 8, 16, True, False, True),
    ((70, 5), 4, 4, 2, 8, 8, False, True, False),
]


def _grads(family, case, seed, extreme=False):
    lens, H, HK, HV, K, V, h0, dht, l2 = case
    cfg = InputConfig(family=family, seq_lens=lens, H=H, HK=HK, HV=HV, K=K, V=V, dtype=torch.float64,
                      gate_dtype=torch.float64, state_dtype=torch.float64, use_qk_l2norm=l2, with_initial_state=h0)
    x = make_inputs(cfg, seed)
    if extreme:  # some tokens decay by e^-30 in every channel
        g = x.g.clone()
        g[::5] = -30.0
        x = dataclasses.replace(x, g=g)
    dO, d_final = make_grad_outputs(cfg, seed + 1000)
    d_final = d_final if dht else None
    ref = reference_backward(x, dO, d_final)
    got = frost_bwd_model(x.q, x.k, x.v, x.g, x.beta, x.w, x.cu_seqlens, dO, scale=1.0 / math.sqrt(K),
                          use_l2norm=l2, initial_state=x.initial_state, d_final_state=d_final)
    names = ("dq", "dk", "dv", "dg", "dbeta", "dw", "d_initial_state")
    return {n: (got[i], getattr(ref, n)) for i, n in enumerate(names) if getattr(ref, n) is not None}


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_backward_model_is_the_gradient(family, case):
    for name, (got, ref) in _grads(family, CASES[case], seed=21 + case).items():
        assert rel_err(got, ref) < 1e-10, (name, rel_err(got, ref))


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
def test_backward_model_strong_decay(family):
    for name, (got, ref) in _grads(family, CASES[0], seed=3, extreme=True).items():
        assert rel_err(got, ref) < 1e-9, (name, rel_err(got, ref))


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
