"""The vector-gate grads kernel's column-pair reads on the SIMT emulator (v1.7).

FrostBwdConfig.vec_wide_loads makes bwd_grads_vec read q-hat, k-hat and GDN-2's b at an
accumulator value pair's two channels with one 4-byte load (row_pair / row_values, the
KD column sums) and runs the exact diagonal per pair (exact_diagonal_pairs). The
accumulator coordinates here come from the PTX m16n8k16 table (lane l: rows l // 4 and
l // 4 + 8, columns 2 (l % 4) + {0, 1} of each n8 tile), which check_c_pairs ties to the
traced layout while compiling. For random operands and scores and gates wide enough that
both exponential branches matter, the pair versions must give exactly what the element
versions give (same reads, same operations in the same order; the emulator computes in
float64, so a wrong channel, row or score entry shows). The exact diagonal is also
checked against a float64 numpy evaluation of its formula.

The matrix's core (compile_tiers; ~45 s on one core, the full matrix ~60 s): the exact
diagonal, the costly case (every thread of a CTA on the emulator), for KDA at the bench's
K = 128 (the product's vector-gate grads kernel reads pairs by default) and for GDN-2 at
K = 64 (per-channel b, the other head dim: the awkward config), the row reads (cheap) at
every case and the formula check for both families, on those two cases' pair runs (one
emulated run each, _exact_pairs); the exact diagonal's other two cases wait for
FROST_FULL_MATRIX=1.
"""
import functools
import os
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from types import SimpleNamespace  # noqa: E402

import numpy as np  # noqa: E402
from cutlass import BFloat16, Float32  # noqa: E402

from cudnn.linear_attention.frost.kernels import bwd_grads, bwd_grads_vec, checkpoints_dsl, fwd_mma, seq_bounds  # noqa: E402
from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig  # noqa: E402
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig  # noqa: E402

import simt_emulator as emu  # noqa: E402
from compile_tiers import tiered  # noqa: E402

C, SUB = fwd_mma.CHUNK, fwd_mma.SUB


# the trace-time layout check needs the DSL's MMA (frost_wgmma_fragments_test covers it)
_NO_TRACE_CHECKS = {"check_c_pairs": lambda *a: None, "_tv": lambda layout: None,
                    "warp_mma": lambda: SimpleNamespace(tv_layout_C_tiled=None)}


def _kernel(per_beta, K, wide):
    f = FrostFwdConfig(io_dtype="bfloat16", state_dtype=None, H=2, HK=2, HV=2, K=K, V=64, gate_per_channel=True,
                       beta_per_channel=per_beta, has_w=per_beta, use_l2norm=False, has_initial_state=False,
                       has_final_state=False, gate_align16=True)
    cls = emu.emulate_class(bwd_grads_vec.FrostBwdGradsVec, module_overrides=_NO_TRACE_CHECKS,
                            helper_modules=[fwd_mma, seq_bounds, checkpoints_dsl])
    return cls(FrostBwdConfig(f, "grads", None, None, vec_wide_loads=wide))


def _crd(lane, DN):
    """PTX mma.m16n8k16 accumulator coordinates of a lane's values over a [16, DN] tile."""
    return [(lane // 4 + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * (lane % 4) + i % 2) for i in range(DN // 2)]


def _shared(K, per_beta, seed):
    rng = np.random.default_rng(seed)
    bf16 = lambda a: emu.Tensor(torch_bf16(a), BFloat16)  # noqa: E731
    g = np.cumsum(-rng.random((C, K)) * 3.0, axis=0)  # spans of ~24 nats per block: both branches
    return SimpleNamespace(
        g=emu.Tensor(g, Float32), kh=bf16(rng.standard_normal((C, K))), qh=bf16(rng.standard_normal((C, K))),
        bst=bf16(rng.random((C, K))) if per_beta else None, beta=emu.Tensor(rng.random(C), Float32),
        dzp=bf16(rng.standard_normal((C, C))), dzm=bf16(rng.standard_normal((C, C))))


def torch_bf16(a):
    import torch
    return torch.from_numpy(a).to(torch.bfloat16).double().numpy()


def _run(kern, s, K, what):
    """Every warp (bi = w % 4, hc = w // 4) runs `what` on fresh accumulators; returns
    {(tid, e): (q, kb, k)}."""
    DN = K // 2
    out = {}

    def body():
        tid = emu.thread_index()
        lane, w = tid % 32, tid // 32
        bi, hc = w % 4, w // 4
        crd = _crd(lane, DN)
        accs = [emu.Tensor(np.zeros(DN // 2), Float32) for _ in range(3)]
        what(kern, s, accs, crd, bi, hc)
        for e in range(DN // 2):
            out[(tid, e)] = tuple(float(a.array[e]) for a in accs)

    emu.run_cta(body, bwd_grads.THREADS)
    return out


def _exact(kern, s, accs, crd, bi, hc):
    kern.exact_diagonal(s, *accs, crd, bi, hc, 1.0)


def _rows(kern, s, accs, crd, bi, hc):
    DN = kern.cfg.K // 2
    pair = None
    for e in range(len(crd)):
        t, d = bi * SUB + crd[e][0], hc * DN + crd[e][1]
        if e % 2 == 0:
            pair = kern.row_pair(s, t, d)
        for a, v in zip(accs, kern.row_values(s, pair, e % 2, t, d)):
            a[e] = v


@functools.cache
def _exact_pairs(per_beta, K):
    """(operands, the pair kernel's exact diagonal on them): one emulated run (every thread
    of a CTA, the file's costly step) per case and process, shared by the pair-vs-element
    and the formula checks; the runs only read the operands."""
    s = _shared(K, per_beta, K + per_beta)
    return s, _run(_kernel(per_beta, K, True), s, K, _exact)


PAIR_CASES = [(per_beta, K, what) for what in (_exact, _rows) for K in (128, 64) for per_beta in (False, True)]
PAIR_CORE = [(False, 128, _exact), (True, 64, _exact)] + [c for c in PAIR_CASES if c[2] is _rows]


@pytest.mark.parametrize("per_beta,K,what", tiered(
    PAIR_CASES, [PAIR_CASES.index(c) for c in PAIR_CORE],
    ids=lambda c: f"{'exact_diagonal' if c[2] is _exact else 'row_values'}-{c[1]}-{'gdn2' if c[0] else 'kda'}",
    unpack=True))
def test_pairs_equal_elements(per_beta, K, what):
    if what is _exact:
        s, wide = _exact_pairs(per_beta, K)
    else:
        s = _shared(K, per_beta, K + per_beta)
        wide = _run(_kernel(per_beta, K, True), s, K, what)
    each = _run(_kernel(per_beta, K, False), s, K, what)
    assert wide == each
    assert all(np.isfinite(v).all() and any(v) for v in wide.values())


@pytest.mark.parametrize("per_beta,K", [(False, 128), (True, 64)], ids=["kda-128", "gdn2-64"])
def test_exact_pairs_match_the_formula(per_beta, K):
    """sum over x in the block of dZp[t, x] k[x] e^(G_t - G_x) (x <= t), the same with dZm,
    and (dZp[x, t] q[x] + dZm[x, t] kb[x]) e^(G_x - G_t) (x >= t), per (t, d); on the
    core's pair runs (PAIR_CORE's exact diagonals)."""
    s, got = _exact_pairs(per_beta, K)
    g, k, q = s.g.array, s.kh.array, s.qh.array
    kb = k * (s.bst.array if per_beta else s.beta.array[:, None])
    dzp, dzm = s.dzp.array, s.dzm.array
    for (tid, e), (aq, akb, ak) in got.items():
        lane, w = tid % 32, tid // 32
        bi, hc = w % 4, w // 4
        r, c = _crd(lane, K // 2)[e]
        t, d = bi * SUB + r, hc * (K // 2) + c
        xs = np.arange(bi * SUB, bi * SUB + SUB)
        fx = np.exp(np.minimum(g[t, d] - g[xs, d], 0.0))
        fy = np.exp(np.minimum(g[xs, d] - g[t, d], 0.0))
        want = ((dzp[t, xs] * k[xs, d] * fx).sum(), (dzm[t, xs] * k[xs, d] * fx).sum(),
                ((dzp[xs, t] * q[xs, d] + dzm[xs, t] * kb[xs, d]) * fy).sum())
        np.testing.assert_allclose((aq, akb, ak), want, rtol=1e-12, atol=1e-12)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
