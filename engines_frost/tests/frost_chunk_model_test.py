"""The FROST kernel's chunk algebra (frost_chunk_model) against the float64 token recurrences.

Fresh seeded inputs from tests/reference/inputs.py for GDN, KDA and GDN-2, mixed sequence
lengths around the chunk size (partial and empty chunks), grouped heads, with and without
initial state and in-kernel L2 norm; every decay mode (the oracle pairwise, mma factored, pipelined
factored_ke) must match naive_recurrent_* to 1e-10 relative error. A strongly decaying
case exercises the factored paths' exact fallback for diagonal blocks spanning more than
SPAN_LIMIT nats.
"""
import math
import os
import sys

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tests.reference.compare import rel_err  # noqa: E402
from tests.reference.gdn import naive_recurrent_gdn  # noqa: E402
from tests.reference.gdn2 import naive_recurrent_gdn2  # noqa: E402
from tests.reference.inputs import InputConfig, make_inputs  # noqa: E402
from tests.reference.kda import naive_recurrent_kda  # noqa: E402
from tests.reference.preprocess import Family  # noqa: E402

from frost_chunk_model import frost_fwd_model  # noqa: E402

REFERENCES = {Family.GDN: naive_recurrent_gdn, Family.KDA: naive_recurrent_kda, Family.GDN2: naive_recurrent_gdn2}

CASES = [  # (seq_lens, H, HK, HV, K, V, initial state, l2norm)
    ((1, 63, 64, 65, 0, 130), 2, 2, 2, 16, 8, True, False),
    ((100, 37), 1, 1, 2, 16, 16, False, True),
    ((129,), 2, 2, 1, 8, 16, True, True),
]


def _run(family, case, seed, decay_mode, extreme=False):
    lens, H, HK, HV, K, V, h0, l2 = case
    cfg = InputConfig(family=family, seq_lens=lens, H=H, HK=HK, HV=HV, K=K, V=V, dtype=torch.float64,
                      gate_dtype=torch.float64, state_dtype=torch.float64, use_qk_l2norm=l2, with_initial_state=h0)
    x = make_inputs(cfg, seed)
    g = x.g
    if extreme:  # some channels/tokens decay by e^-30: diagonal spans far beyond SPAN_LIMIT
        g = g.clone()
        g[::5] = -30.0
    scale = 1.0 / math.sqrt(K)
    args = (x.q, x.k, x.v, g, x.beta) + ((x.w,) if family is Family.GDN2 else ()) + (x.cu_seqlens,)
    ref_o, ref_s = REFERENCES[family](*args, scale=scale, initial_state=x.initial_state,
                                      output_final_state=True, use_qk_l2norm=l2)
    o, s = frost_fwd_model(x.q, x.k, x.v, g, x.beta, x.w, x.cu_seqlens, scale=scale, use_l2norm=l2,
                           initial_state=x.initial_state, decay_mode=decay_mode)
    return rel_err(o, ref_o), rel_err(s, ref_s)


@pytest.mark.parametrize("decay_mode", ["pairwise", "factored", "factored_ke"])
@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_chunk_model_matches_recurrence(family, case, decay_mode):
    eo, es = _run(family, CASES[case], seed=11 + case, decay_mode=decay_mode)
    assert eo < 1e-10 and es < 1e-10, (eo, es)


@pytest.mark.parametrize("decay_mode", ["pairwise", "factored", "factored_ke"])
@pytest.mark.parametrize("family", [Family.KDA, Family.GDN2], ids=lambda f: f.value)
def test_chunk_model_strong_decay(family, decay_mode):
    eo, es = _run(family, CASES[0], seed=5, decay_mode=decay_mode, extreme=True)
    assert eo < 1e-10 and es < 1e-10, (eo, es)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
