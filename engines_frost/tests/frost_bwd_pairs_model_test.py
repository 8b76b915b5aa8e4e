"""The backward with the states every other chunk, on the float64 model (frost_bwd_model,
pairs=True; kernels/NOTES_bwd.md "Next: states every other chunk").

A sequence's chunks go to the gradient kernel in pairs (c, c + 1) that read only S_c and
dS_(c+1): dS_c is stepped back through chunk c + 1's chain step, S_(c+1) forward from S_c
with chunk c's U. Checked here before any kernel is written:
- in float64 the pairs give the per-chunk algorithm's gradients, for every family, on
  sequences of odd and even chunk counts (a last lone chunk reads both of its states),
  empty and one-token sequences, grouped heads, initial state and d_final_state;
- they read no odd chunk's state: with the forward's checkpoints and U (the training
  path), every odd chunk's checkpoint row NaN leaves the gradients finite and unchanged;
- with S, dS and U read as bf16 (the kernels' stored dtype) and each stepped state rounded
  to bf16 again, as a kernel holding it as a wgmma operand would, the extra rounding
  moves no gradient's error against float64 by more than a few percent of what the bf16
  reads already cost, strong decay included.
"""
import dataclasses
import math
import os
import sys

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tests.reference.compare import rel_err  # noqa: E402
from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs  # noqa: E402
from tests.reference.preprocess import Family  # noqa: E402

from frost_bwd_model import forward_checkpoints_model, forward_values_model, frost_bwd_model  # noqa: E402

NAMES = ("dq", "dk", "dv", "dg", "dbeta", "dw", "d_initial_state")
# (seq_lens, H, HK, HV, K, V, initial state, d_final_state, l2norm); chunk counts per
# sequence 1, 1, 1, 2, 0, 3, 4, 5 in the first
CASES = [
    ((1, 63, 64, 65, 0, 130, 200, 257), 2, 2, 2, 16, 8, True, True, True),
    ((320,), 1, 1, 2, 16, 16, False, True, False),
    ((129, 7, 192), 2, 2, 1, 8, 16, True, False, True),
]


def _bf16(x):
    return x.to(torch.bfloat16).double()


def _inputs(family, case, seed, decay=1.0):
    lens, H, HK, HV, K, V, h0, dht, l2 = case
    cfg = InputConfig(family=family, seq_lens=lens, H=H, HK=HK, HV=HV, K=K, V=V, dtype=torch.float64,
                      gate_dtype=torch.float64, state_dtype=torch.float64, use_qk_l2norm=l2, with_initial_state=h0)
    x = make_inputs(cfg, seed)
    x = dataclasses.replace(x, g=x.g * decay)
    dO, d_final = make_grad_outputs(cfg, seed + 1000)
    kw = dict(scale=1.0 / math.sqrt(K), use_l2norm=l2, initial_state=x.initial_state,
              d_final_state=d_final if dht else None)
    return x, dO, kw


def _run(x, dO, kw, **extra):
    return frost_bwd_model(x.q, x.k, x.v, x.g, x.beta, x.w, x.cu_seqlens, dO, **kw, **extra)


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_pairs_give_the_per_chunk_gradients(family, case):
    x, dO, kw = _inputs(family, CASES[case], seed=41 + case)
    chunks, pairs = _run(x, dO, kw), _run(x, dO, kw, pairs=True)
    for name, a, b in zip(NAMES, chunks, pairs):
        if a is not None:
            assert rel_err(b, a) < 1e-12, (name, rel_err(b, a))


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
def test_pairs_read_no_odd_chunk_state(family):
    from cudnn.linear_attention.frost.kernels.checkpoints import packed_row0

    x, dO, kw = _inputs(family, CASES[0], seed=47)
    fwd = dict(use_l2norm=kw["use_l2norm"], initial_state=kw["initial_state"])
    ckpt = forward_checkpoints_model(x.q, x.k, x.v, x.g, x.beta, x.w, x.cu_seqlens, **fwd)
    values = forward_values_model(x.q, x.k, x.v, x.g, x.beta, x.w, x.cu_seqlens, **fwd)
    full = _run(x, dO, kw, state_checkpoints=ckpt, values=values)
    cu = [int(c) for c in x.cu_seqlens.tolist()]
    holed = ckpt.clone()
    odd_rows = [packed_row0(cu, n) + j for n in range(len(cu) - 1)
                for j in range(1, -(-(cu[n + 1] - cu[n]) // 64), 2)]
    assert odd_rows  # the case has sequences of two chunks or more
    holed[odd_rows] = float("nan")
    pairs = _run(x, dO, kw, state_checkpoints=holed, values=values, pairs=True)
    for name, a, b in zip(NAMES, full, pairs):
        if a is not None:
            assert torch.isfinite(b).all() and rel_err(b, a) < 1e-12, name
    chunks = _run(x, dO, kw, state_checkpoints=holed, values=values)  # the per-chunk path reads them
    assert not all(torch.isfinite(t).all() for t in chunks[:5])


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("decay", [1.0, 8.0], ids=["decay1", "decay8"])
def test_the_stepped_states_extra_rounding(family, decay):
    lens = (1, 63, 65, 200, 320)
    x, dO, kw = _inputs(family, (lens, 2, 2, 2, 32, 32, True, True, True), seed=53, decay=decay)
    exact = _run(x, dO, kw)
    chunks = _run(x, dO, kw, stored=_bf16)
    pairs = _run(x, dO, kw, stored=_bf16, pairs=True)
    for name, ref, a, b in zip(NAMES, exact, chunks, pairs):
        if ref is None:
            continue
        err_chunks, err_pairs = rel_err(a, ref), rel_err(b, ref)
        assert err_pairs <= 1.05 * err_chunks + 1e-6, (name, err_chunks, err_pairs)
        assert err_pairs < 1e-2, (name, err_pairs)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
