"""The FROST backward kernels' algebra (frost_bwd_model) against autograd of the recurrence.

Float64 gradients of <o, dO> + <final_state, d_final_state> by the three-kernel
algorithm (states, reverse chain, per-chunk gradients) must equal the reference backward
(tests/reference: autograd through the token-by-token recurrence) on fresh random inputs
for GDN, KDA and GDN-2: mixed lengths around the chunk (0, 1, 63, 64, 65, 130), grouped
q/k and v heads, with and without initial state, d_final_state and in-kernel L2 norm,
strong decay; and the v1.2 path: forward-written checkpoints (checked against the
recurrence's states at every 64-token boundary) read by the backward instead of the
serial recompute; and the v1.3 path: the forward's U per token as well (checked against
u_t = w0_t - S'^T kb_t of a token-by-token recurrence), read by a backward that runs
neither states nor values.
"""
import dataclasses
import math
import os
import sys

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tests.reference.compare import rel_err  # noqa: E402
from tests.reference.families import reference_backward, reference_forward  # noqa: E402
from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs  # noqa: E402
from tests.reference.preprocess import Family  # noqa: E402

from frost_bwd_model import forward_checkpoints_model, forward_values_model, frost_bwd_model  # noqa: E402

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


def _reference_checkpoints(x):
    """Float64 checkpoints from the reference recurrence alone: the row of (n, j) is the
    final state of sequence n cut after 64 j tokens (initial state kept); other rows NaN."""
    from cudnn.linear_attention.frost.kernels.checkpoints import checkpoint_index, checkpoint_rows

    cu = [int(c) for c in x.cu_seqlens.tolist()]
    T, N = cu[-1], len(cu) - 1
    HO, V, K = max(x.q.shape[1], x.v.shape[1]), x.v.shape[2], x.q.shape[2]
    out = torch.full((checkpoint_rows(T, N), HO, V, K), float("nan"), dtype=torch.float64)
    for row, (n, j) in enumerate(checkpoint_index(cu)):
        t0, t1 = cu[n], cu[n] + 64 * j
        h0 = None if x.initial_state is None else x.initial_state[n:n + 1]
        if t1 == t0:
            out[row] = 0.0 if h0 is None else h0[0]
            continue
        cut = dataclasses.replace(
            x, q=x.q[t0:t1], k=x.k[t0:t1], v=x.v[t0:t1], g=x.g[t0:t1], beta=x.beta[t0:t1],
            w=None if x.w is None else x.w[t0:t1], initial_state=h0,
            cu_seqlens=torch.tensor([0, t1 - t0], dtype=x.cu_seqlens.dtype))
        out[row] = reference_forward(cut)[1][0]
    return out


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("case", [0, 2, 3])
def test_checkpointed_backward_model_is_the_gradient(family, case):
    """The v1.2 path: the forward's checkpoints (packed rows, unwritten rows NaN) are the
    reference recurrence's states at every 64-token boundary, and the backward that reads
    them (values instead of states) gives the reference gradients."""
    lens, H, HK, HV, K, V, h0, dht, l2 = CASES[case]
    lens = lens + (200,)  # four chunks, the last partial
    cfg = InputConfig(family=family, seq_lens=lens, H=H, HK=HK, HV=HV, K=K, V=V, dtype=torch.float64,
                      gate_dtype=torch.float64, state_dtype=torch.float64, use_qk_l2norm=l2, with_initial_state=h0)
    x = make_inputs(cfg, 41 + case)
    ckpt = forward_checkpoints_model(x.q, x.k, x.v, x.g, x.beta, x.w, x.cu_seqlens, use_l2norm=l2,
                                     initial_state=x.initial_state)
    ref_ckpt = _reference_checkpoints(x)
    assert torch.equal(ckpt.isnan(), ref_ckpt.isnan())
    written = ~ckpt.isnan()
    assert written.any() and rel_err(ckpt[written], ref_ckpt[written]) < 1e-10
    dO, d_final = make_grad_outputs(cfg, 77 + case)
    d_final = d_final if dht else None
    ref = reference_backward(x, dO, d_final)
    got = frost_bwd_model(x.q, x.k, x.v, x.g, x.beta, x.w, x.cu_seqlens, dO, scale=1.0 / math.sqrt(K),
                          use_l2norm=l2, initial_state=x.initial_state, d_final_state=d_final,
                          state_checkpoints=ckpt)
    names = ("dq", "dk", "dv", "dg", "dbeta", "dw", "d_initial_state")
    for i, name in enumerate(names):
        if getattr(ref, name) is not None:
            assert rel_err(got[i], getattr(ref, name)) < 1e-10, (name, rel_err(got[i], getattr(ref, name)))


def test_checkpointed_model_reads_the_checkpoints():
    """A wrong checkpoint row changes the gradients (the path reads S, it does not recompute)."""
    cfg = InputConfig(family=Family.GDN, seq_lens=(130, 70), H=1, HK=1, HV=1, K=8, V=8, dtype=torch.float64,
                      gate_dtype=torch.float64, state_dtype=torch.float64)
    x = make_inputs(cfg, 5)
    dO, _ = make_grad_outputs(cfg, 6)
    ckpt = forward_checkpoints_model(x.q, x.k, x.v, x.g, x.beta, x.w, x.cu_seqlens, use_l2norm=False)
    args = (x.q, x.k, x.v, x.g, x.beta, x.w, x.cu_seqlens, dO)
    good = frost_bwd_model(*args, scale=0.3, use_l2norm=False, state_checkpoints=ckpt)
    bad_ckpt = ckpt.clone()
    bad_ckpt[1] += 1.0   # sequence 0, chunk 1
    bad = frost_bwd_model(*args, scale=0.3, use_l2norm=False, state_checkpoints=bad_ckpt)
    assert rel_err(bad[0][64:128], good[0][64:128]) > 1e-3
    assert torch.equal(bad[0][130:], good[0][130:])   # other sequence untouched


def _token_values(x, use_l2norm):
    """U [T, HO, V] by the token recurrence alone (no chunks, no solve): per token
    S' = Diag(e^g_t) S, u_t = w0_t - S'^T kb_t, S = S' + k^_t u_t^T (FLA orientation,
    kb = beta k^ or b * k^, w0 = beta v or w * v); rows no sequence covers NaN."""
    f64 = torch.float64
    q, k, v, g, beta = (t.to(f64) for t in (x.q, x.k, x.v, x.g, x.beta))
    w = None if x.w is None else x.w.to(f64)
    if use_l2norm:
        k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    T, H, K = q.shape
    HK, HV, V = k.shape[1], v.shape[1], v.shape[2]
    HO = max(H, HV)
    cu = [int(c) for c in x.cu_seqlens.tolist()]
    out = torch.full((T, HO, V), float("nan"), dtype=f64)
    for n in range(len(cu) - 1):
        for h in range(HO):
            hk, hv = h // (HO // HK), h // (HO // HV)
            S = (x.initial_state[n, h].to(f64).T.clone() if x.initial_state is not None
                 else torch.zeros(K, V, dtype=f64))
            for t in range(cu[n], cu[n + 1]):
                S = torch.exp(g[t, h]).reshape(-1, 1) * S
                kt = k[t, hk]
                if w is not None:
                    kb, w0 = beta[t, h] * kt, w[t, h] * v[t, hv]
                else:
                    kb, w0 = beta[t, h] * kt, beta[t, h] * v[t, hv]
                u = w0 - S.T @ kb
                out[t, h] = u
                S = S + torch.outer(kt, u)
    return out


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("case", [0, 3])
def test_forward_values_backward_model_is_the_gradient(family, case):
    """The v1.3 path: the U the forward writes (chunk algebra, packed like the states
    kernel's) is the token recurrence's u_t on every covered row (NaN elsewhere), and the
    backward that reads it with the checkpoints (no kernel 1) gives the reference gradients
    and the same gradients as the values path to rounding."""
    lens, H, HK, HV, K, V, h0, dht, l2 = CASES[case]
    lens = lens + (200,)
    cfg = InputConfig(family=family, seq_lens=lens, H=H, HK=HK, HV=HV, K=K, V=V, dtype=torch.float64,
                      gate_dtype=torch.float64, state_dtype=torch.float64, use_qk_l2norm=l2, with_initial_state=h0)
    x = make_inputs(cfg, 51 + case)
    args = (x.q, x.k, x.v, x.g, x.beta, x.w, x.cu_seqlens)
    ckpt = forward_checkpoints_model(*args, use_l2norm=l2, initial_state=x.initial_state)
    values = forward_values_model(*args, use_l2norm=l2, initial_state=x.initial_state)
    ref_values = _token_values(x, l2)
    assert torch.equal(values.isnan(), ref_values.isnan())
    covered = ~values.isnan()
    assert covered.any() and rel_err(values[covered], ref_values[covered]) < 1e-10
    dO, d_final = make_grad_outputs(cfg, 87 + case)
    d_final = d_final if dht else None
    ref = reference_backward(x, dO, d_final)
    kw = dict(scale=1.0 / math.sqrt(K), use_l2norm=l2, initial_state=x.initial_state, d_final_state=d_final,
              state_checkpoints=ckpt)
    got = frost_bwd_model(*args, dO, values=values, **kw)
    via_values_kernel = frost_bwd_model(*args, dO, **kw)
    names = ("dq", "dk", "dv", "dg", "dbeta", "dw", "d_initial_state")
    for i, name in enumerate(names):
        if getattr(ref, name) is not None:
            assert rel_err(got[i], getattr(ref, name)) < 1e-10, (name, rel_err(got[i], getattr(ref, name)))
            assert rel_err(got[i], via_values_kernel[i]) < 1e-12, name


def test_forward_values_model_reads_the_values():
    """A wrong U row changes that chunk's gradients only (the path reads U, it does not
    recompute it), and values without checkpoints is refused."""
    cfg = InputConfig(family=Family.GDN, seq_lens=(130, 70), H=1, HK=1, HV=1, K=8, V=8, dtype=torch.float64,
                      gate_dtype=torch.float64, state_dtype=torch.float64)
    x = make_inputs(cfg, 7)
    dO, _ = make_grad_outputs(cfg, 8)
    args = (x.q, x.k, x.v, x.g, x.beta, x.w, x.cu_seqlens)
    ckpt = forward_checkpoints_model(*args, use_l2norm=False)
    values = forward_values_model(*args, use_l2norm=False)
    good = frost_bwd_model(*args, dO, scale=0.3, use_l2norm=False, state_checkpoints=ckpt, values=values)
    bad_values = values.clone()
    bad_values[70] += 1.0   # sequence 0, chunk 1
    bad = frost_bwd_model(*args, dO, scale=0.3, use_l2norm=False, state_checkpoints=ckpt, values=bad_values)
    assert rel_err(bad[0][64:128], good[0][64:128]) > 1e-3
    assert torch.equal(bad[0][130:], good[0][130:])
    with pytest.raises(ValueError, match="state_checkpoints"):
        frost_bwd_model(*args, dO, scale=0.3, use_l2norm=False, values=values)


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
def test_backward_model_strong_decay(family):
    for name, (got, ref) in _grads(family, CASES[0], seed=3, extreme=True).items():
        assert rel_err(got, ref) < 1e-9, (name, rel_err(got, ref))


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
