"""The grads kernel's load phase and its 16-byte row stores, run on the CPU (simt_emulator).

v1.3 of the backward (kernels/NOTES_bwd.md) changed how the GDN grads kernel fills shared
memory: every operand copy is a 16-byte cp.async issued first (issue_copies: dO, U, dR, v
rows zero past the sequence, S and dS rows unchanged [V, K]), q-hat, k-hat and kb are
normalised in registers with the L2 norms taken from the same loads and stored row-major
(stage_load), and dq/dk leave through store_rows; the chain, states and values kernels store
through gmem_vector_io.flush_rows. Those parts are SIMT, so their indexing can be checked
here: one emulated CTA on the second (partial) chunk of a sequence, every shared tensor
against numpy, rows past the sequence zero, and the stores touching exactly the rows before
the sequence end. The MMA code (ldmatrix views, accumulators) cannot run here; the GPU
smoke (tests/numerics/la_frost_bwd_smoke.py) covers it.
"""
import math
import os
import sys
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from cudnn.linear_attention.frost.kernels import bwd_abi, bwd_grads, fwd_mma, gmem_vector_io, gmem_views  # noqa: E402
from cudnn.linear_attention.frost.kernels.bwd_config import (  # noqa: E402
    BWD_OPERANDS,
    FrostBwdConfig,
    bwd_operand_dtypes,
)
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig  # noqa: E402
from cudnn.linear_attention.frost.kernels.launch_abi import cutlass_dtype  # noqa: E402

import simt_emulator as emu  # noqa: E402

C = fwd_mma.CHUNK
SEQS = (100, 7)  # sequence 0's chunk 1 holds rows 64..99: 36 real rows, 28 past the end


def _inputs(K, V, io, seed):
    """Random operands (values exact in their dtypes), float64 numpy, by ABI name."""
    rng = np.random.default_rng(seed)
    T, N = sum(SEQS), len(SEQS)
    rows = T // C + N
    tio = getattr(torch, io)
    x = {
        "q": emu.rounded(rng.standard_normal((T, 1, K)), tio), "k": emu.rounded(rng.standard_normal((T, 1, K)), tio),
        "v": emu.rounded(rng.standard_normal((T, 1, V)), tio), "dO": emu.rounded(rng.standard_normal((T, 1, V)), tio),
        "g": -np.abs(rng.standard_normal((T, 1, 1))) * 0.1, "beta": rng.uniform(0.1, 0.9, (T, 1, 1)),
        "u": emu.rounded(rng.standard_normal((T, 1, V)), torch.bfloat16),
        "dr": emu.rounded(rng.standard_normal((T, 1, V)), torch.bfloat16),
        "ckpt": emu.rounded(rng.standard_normal((rows, 1, V, K)), torch.bfloat16),
        "dckpt": emu.rounded(rng.standard_normal((rows, 1, V, K)), torch.bfloat16),
        "cu_seqlens": np.array([0, SEQS[0], T], dtype=np.int32),
        "dq": np.full((T, 1, K), np.nan), "dk": np.full((T, 1, K), np.nan),
    }
    return x, T, N


def _config(K, V, io, l2):
    f = FrostFwdConfig(io_dtype=io, state_dtype=None, H=1, HK=1, HV=1, K=K, V=V, gate_per_channel=False,
                       beta_per_channel=False, has_w=False, use_l2norm=l2, has_initial_state=False,
                       has_final_state=False)
    return FrostBwdConfig(f, "grads", None, None)


@pytest.mark.parametrize("case", [(64, 64, "bfloat16", True), (128, 64, "float16", True), (64, 128, "bfloat16", False)],
                         ids=lambda c: f"K{c[0]}V{c[1]}-{c[2]}-l2{int(c[3])}")
def test_grads_load_phase_and_row_stores(case):
    K, V, io, l2 = case
    cfg = _config(K, V, io, l2)
    x, T, N = _inputs(K, V, io, seed=K + V)
    ptrs = [emu.Pointer(x.get(name), cutlass_dtype(dt)) for name, dt in bwd_operand_dtypes(cfg).items()]
    assert [p for p in BWD_OPERANDS] == list(bwd_operand_dtypes(cfg))
    m = emu.emulated(bwd_abi, "bwd_views", helper_modules=[gmem_views])(cfg, ptrs, T, N)
    kern = emu.emulate_class(bwd_grads.FrostBwdGrads, helper_modules=[fwd_mma])(cfg)
    plan = kern.smem_plan(cfg.fwd)
    rho, t0, eos = 1, C, SEQS[0]  # sequence 0, chunk 1 (workspace row cu[0] // 64 + 0 + 1)
    snap = {}
    staged = np.arange(C * K, dtype=np.float64).reshape(C, K) / 8.0  # exact in bf16/fp16

    def body():
        tid = emu.thread_index()
        alloc = emu.SmemAllocator()
        s = SimpleNamespace()
        for name, _, shape, _ in plan:
            setattr(s, name, alloc.allocate_tensor(None, emu.Layout(shape)))
        st = alloc.allocate_tensor(m.dq.element_type, emu.Layout((C, K)))
        heads = (0, 0, 0, 0)
        kern.issue_copies(s, m.dO, m.u, m.dr, m.v, m.ckpt, m.dckpt, heads, rho, rho, t0, eos, tid)
        kern.stage_norms(s, m.q, m.k, m.g, m.beta, heads, t0, eos, tid)
        emu.sync_threads()
        kern.stage_load(s, m.q, m.k, heads, t0, eos, tid)
        if tid == 0:
            st.array[...] = staged
        emu.sync_threads()
        if tid == 0:
            snap.update({name: getattr(s, name).array.copy() for name, *_ in plan})
        kern.store_rows(st, m.dq, 0, t0, eos, tid)

    emu.run_cta(body, bwd_grads.THREADS)
    n = eos - t0
    rows = slice(t0, eos)

    def rnorm(a):
        return 1.0 / np.sqrt((a * a).sum(-1, keepdims=True) + 1e-6) if l2 else np.ones(a.shape[:-1] + (1,))

    q, k = x["q"][rows, 0], x["k"][rows, 0]
    rq, rk = rnorm(q), rnorm(k)
    kh = emu.rounded(k * rk, torch.bfloat16)
    expect = {
        "qr": emu.rounded(q * rq, torch.bfloat16), "kr": kh, "kbr": emu.rounded(kh * x["beta"][rows, 0], torch.bfloat16),
        "do": emu.rounded(x["dO"][rows, 0], torch.bfloat16), "u": x["u"][rows, 0], "dr": x["dr"][rows, 0],
        "vr": x["v"][rows, 0],
    }
    for name, want in expect.items():
        got = snap[name]
        assert got.shape == (C, want.shape[1]), (name, got.shape)
        # one bf16 step of slack: the emulator's float64 sums may order differently
        np.testing.assert_allclose(got[:n], want, rtol=8e-3, atol=1e-12, err_msg=name)
        assert np.all(got[n:] == 0), f"{name}: rows past the sequence must be zero"
    np.testing.assert_allclose(snap["rq"][:n], rq[:, 0], rtol=1e-12)
    np.testing.assert_allclose(snap["rk"][:n], rk[:, 0], rtol=1e-12)
    assert np.array_equal(snap["sf"], x["ckpt"][rho, 0]), "S must land unchanged, [V, K]"
    assert np.array_equal(snap["dsf"], x["dckpt"][rho, 0]), "dS must land unchanged, [V, K]"
    dq = x["dq"][:, 0]
    assert np.array_equal(dq[rows], staged[:n]), "store_rows: the staged rows before the sequence end"
    assert np.isnan(dq[:t0]).all() and np.isnan(dq[eos:]).all(), "store_rows wrote outside its rows"


@pytest.mark.parametrize("shape", [(16, 128), (16, 64), (64, 16)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_flush_rows_stores_whole_rows_before_the_limit(shape):
    """gmem_vector_io.flush_rows: buf [rows, cols] to dst[row0 + r, col0 : col0 + cols] for r
    < valid_rows only (one warp)."""
    rows, cols = shape
    flush = emu.emulated(gmem_vector_io, "flush_rows")
    buf = emu.Tensor(np.arange(rows * cols, dtype=np.float64).reshape(rows, cols), None)
    dst_arr = np.full((rows + 40, cols + 48), np.nan)
    dst = emu.Tensor(dst_arr, None)
    row0, col0, valid = 5, 16, rows - 3

    emu.run_cta(lambda: flush(buf, dst, row0, col0, valid, emu.thread_index(), rows, cols), 32)
    want = np.full_like(dst_arr, np.nan)
    want[row0:row0 + valid, col0:col0 + cols] = buf.array[:valid]
    assert np.array_equal(np.isnan(dst_arr), np.isnan(want))
    assert np.array_equal(dst_arr[~np.isnan(want)], want[~np.isnan(want)])
    assert math.isnan(dst_arr[row0 + valid, col0])


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
