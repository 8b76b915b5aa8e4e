"""The vector-gate grads kernel's SIMT stages, run on the CPU (simt_emulator).

bwd_grads_vec.FrostBwdGradsVec (KDA, GDN-2) fills its shared memory in its own load
phase: cp.async of dO, U, dR, v (GDN-2: and w) rows zero past the sequence, S and dS
unchanged [V, K], the per-channel gate rows, KDA's scalar beta by 4-byte copies
(copy_beta_async); then the L2 norms' first pass, the inclusive gate scan per channel,
q-hat, k-hat (GDN-2: b) rows for the score adjoints (stage_operands_vec), e^G_last sum_v
S dS per channel (state_pairs_lds, the SIMT path) and the 16-byte row stores of the
staged dq/dk. Those are SIMT, so their indexing is checked here against numpy for one
emulated CTA on the second (partial) chunk of a sequence. The MMA stages cannot run
here; the GPU smoke (tests/numerics/la_frost_bwd_smoke.py) covers them.
"""
import os
import sys
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from cudnn.linear_attention.frost.kernels import (  # noqa: E402
    bwd_abi,
    bwd_grads,
    bwd_grads_vec,
    fwd_mma,
    fwd_pipelined,
    gmem_views,
)
from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig, bwd_operand_dtypes  # noqa: E402
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig  # noqa: E402
from cudnn.linear_attention.frost.kernels.launch_abi import cutlass_dtype  # noqa: E402

import simt_emulator as emu  # noqa: E402

C = fwd_mma.CHUNK
SEQS = (100, 7)  # sequence 0's chunk 1 holds rows 64..99: 36 real rows, 28 past the end


def _inputs(family, K, V, seed):
    """Random operands (values exact in their dtypes), float64 numpy, by ABI name."""
    rng = np.random.default_rng(seed)
    T, N = sum(SEQS), len(SEQS)
    rows = T // C + N
    bf = torch.bfloat16
    x = {
        "q": emu.rounded(rng.standard_normal((T, 1, K)), bf), "k": emu.rounded(rng.standard_normal((T, 1, K)), bf),
        "v": emu.rounded(rng.standard_normal((T, 1, V)), bf), "dO": emu.rounded(rng.standard_normal((T, 1, V)), bf),
        "g": emu.rounded(-np.abs(rng.standard_normal((T, 1, K))) * 0.05, torch.float32),
        "u": emu.rounded(rng.standard_normal((T, 1, V)), bf), "dr": emu.rounded(rng.standard_normal((T, 1, V)), bf),
        "ckpt": emu.rounded(rng.standard_normal((rows, 1, V, K)), bf),
        "dckpt": emu.rounded(rng.standard_normal((rows, 1, V, K)), bf),
        "cu_seqlens": np.array([0, SEQS[0], T], dtype=np.int32),
        "dq": np.full((T, 1, K), np.nan),
    }
    if family == "gdn2":
        x["beta"] = emu.rounded(rng.uniform(0.1, 0.9, (T, 1, K)), bf)
        x["w"] = emu.rounded(rng.standard_normal((T, 1, V)), bf)
    else:
        x["beta"] = emu.rounded(rng.uniform(0.1, 0.9, (T, 1, 1)), torch.float32)
    return x, T, N


def _config(family, K, V):
    per = family == "gdn2"
    f = FrostFwdConfig(io_dtype="bfloat16", state_dtype=None, H=1, HK=1, HV=1, K=K, V=V, gate_per_channel=True,
                       beta_per_channel=per, has_w=per, use_l2norm=True, has_initial_state=False,
                       has_final_state=False, gate_align16=True)
    return FrostBwdConfig(f, "grads", None, None)


CASES = [("kda", 64, 64), ("gdn2", 64, 128), ("gdn2", 128, 64)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-K{c[1]}V{c[2]}")
def test_vector_grads_simt_stages(case):
    family, K, V = case
    cfg = _config(family, K, V)
    x, T, N = _inputs(family, K, V, seed=K + V)
    ptrs = [emu.Pointer(x.get(name), cutlass_dtype(dt)) for name, dt in bwd_operand_dtypes(cfg).items()]
    m = emu.emulated(bwd_abi, "bwd_views", helper_modules=[gmem_views])(cfg, ptrs, T, N)
    kern = emu.emulate_class(bwd_grads_vec.FrostBwdGradsVec, helper_modules=[fwd_mma, fwd_pipelined, bwd_grads])(cfg)
    a, b, keep = bwd_grads_vec.smem_regions(cfg.fwd)
    rho, t0, eos = 1, C, SEQS[0]  # sequence 0, chunk 1 (workspace row cu[0] // 64 + 0 + 1)
    snap = {}
    staged = np.arange(C * K, dtype=np.float64).reshape(C, K) / 8.0  # exact in bf16

    def body():
        tid = emu.thread_index()
        alloc = emu.SmemAllocator()
        s = SimpleNamespace()
        for name, _, shape, _ in a + b + keep:  # separate tensors: the overlay is not under test
            setattr(s, name, alloc.allocate_tensor(None, emu.Layout(shape)))
        st = alloc.allocate_tensor(m.dq.element_type, emu.Layout((C, K)))
        heads = (0, 0, 0, 0)
        kern.issue_load_copies(s, m.dO, m.u, m.dr, m.v, m.w, m.g, m.beta, m.ckpt, m.dckpt, heads, rho, rho, t0,
                               eos, tid)
        kern.stage_norms(s, m.q, m.k, m.g, m.beta, heads, t0, eos, tid)
        kern.land_copies(s, tid)
        emu.sync_threads()
        kern.scan_gates(s, tid)
        kern.stage_operands_vec(s, m.q, m.k, m.beta, heads, t0, eos, tid)
        kern.state_pairs_lds(s, tid)
        if tid == 0:
            st.array[...] = staged
        emu.sync_threads()
        if tid == 0:
            snap.update({name: getattr(s, name).array.copy() for name, *_ in a + b + keep})
        kern.store_rows(st, m.dq, 0, t0, eos, tid)

    emu.run_cta(body, kern.threads)
    n = eos - t0
    rows = slice(t0, eos)

    def rnorm(v):
        return 1.0 / np.sqrt((v * v).sum(-1, keepdims=True) + 1e-6)

    q, k = x["q"][rows, 0], x["k"][rows, 0]
    rq, rk = rnorm(q), rnorm(k)
    copies = {"do": x["dO"], "u": x["u"], "dr": x["dr"], "vr": x["v"]}
    if family == "gdn2":
        copies["wr"] = x["w"]
    for name, src in copies.items():
        got = snap[name]
        assert np.array_equal(got[:n], src[rows, 0]), name
        assert np.all(got[n:] == 0), f"{name}: rows past the sequence must be zero"
    assert np.array_equal(snap["sf"], x["ckpt"][rho, 0]), "S must land unchanged, [V, K]"
    assert np.array_equal(snap["dsf"], x["dckpt"][rho, 0]), "dS must land unchanged, [V, K]"
    gates = np.zeros((C, K))
    gates[:n] = x["g"][rows, 0]
    cum = np.cumsum(gates, axis=0)
    np.testing.assert_allclose(snap["g"], cum, rtol=1e-5, atol=1e-6, err_msg="gate scan")
    if family == "kda":
        assert np.array_equal(snap["beta"][:n], x["beta"][rows, 0, 0]), "beta rows (copy_beta_async)"
        assert np.all(snap["beta"][n:] == 0), "beta past the sequence must be zero"
    else:
        assert np.all(snap["beta"] == 0), "GDN-2: the scalar beta table is zero (b is per channel)"
        want_b = np.zeros((C, K))
        want_b[:n] = x["beta"][rows, 0]
        assert np.array_equal(snap["bst"], want_b), "GDN-2 b rows (bf16)"
    np.testing.assert_allclose(snap["rq"][:n], rq[:, 0], rtol=1e-12)
    np.testing.assert_allclose(snap["rk"][:n], rk[:, 0], rtol=1e-12)
    # one bf16 step of slack: the emulator's float64 sums may order differently
    np.testing.assert_allclose(snap["qh"][:n], emu.rounded(q * rq, torch.bfloat16), rtol=8e-3, atol=1e-12)
    np.testing.assert_allclose(snap["kh"][:n], emu.rounded(k * rk, torch.bfloat16), rtol=8e-3, atol=1e-12)
    assert np.all(snap["qh"][n:] == 0) and np.all(snap["kh"][n:] == 0)
    sds = np.exp(cum[-1]) * (x["ckpt"][rho, 0] * x["dckpt"][rho, 0]).sum(0)
    np.testing.assert_allclose(snap["sds"], sds, rtol=1e-5, atol=1e-9, err_msg="e^G_last sum_v S dS")
    dq = x["dq"][:, 0]
    assert np.array_equal(dq[rows], staged[:n]), "store_rows: the staged rows before the sequence end"
    assert np.isnan(dq[:t0]).all() and np.isnan(dq[eos:]).all(), "store_rows wrote outside its rows"


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
