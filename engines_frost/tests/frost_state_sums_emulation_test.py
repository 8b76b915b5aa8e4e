"""The grads kernels' S dS sums on the SIMT emulator (their own source, one CTA).

The chunk-level term of dg needs e^G_last sum_v S dS: over all channels for scalar gates
(bwd_grads.state_sum, per-warp partials in s.part[1]), per channel for vector gates
(bwd_grads_vec.state_pairs, into s.sds). v1.6 made state_sum read S and dS with 16-byte
shared loads (8-channel slices) instead of one element per load, so which thread reads
which element changed (state_pairs kept its element-wise reads: the same with 16-byte
slices needs a shuffle reduction per channel, as many instructions as it saves). Here,
for every head-dim pair the kernels serve and random S, dS and gates, the sums equal
float64 numpy (every element read once, each channel's partials reduced over exactly
the lanes that hold it). The emulator sums in float64, so the bound is tight.
"""
import os
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from types import SimpleNamespace  # noqa: E402

import numpy as np  # noqa: E402
from cutlass import BFloat16, Float32  # noqa: E402

from cudnn.linear_attention.frost.kernels import bwd_grads, bwd_grads_vec, checkpoints_dsl, fwd_mma, seq_bounds  # noqa: E402
from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig  # noqa: E402
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig  # noqa: E402

import simt_emulator as emu  # noqa: E402

C = fwd_mma.CHUNK
DIMS = [(128, 128), (128, 64), (64, 128), (64, 64)]


def _kernel(cls, vector_gates, K, V):
    f = FrostFwdConfig(io_dtype="bfloat16", state_dtype=None, H=2, HK=2, HV=2, K=K, V=V,
                       gate_per_channel=vector_gates, beta_per_channel=False, has_w=False, use_l2norm=True,
                       has_initial_state=False, has_final_state=False, gate_align16=vector_gates)
    emulated = emu.emulate_class(cls, helper_modules=[fwd_mma, seq_bounds, checkpoints_dsl])
    return emulated(FrostBwdConfig(f, "grads", None, None))


def _states(K, V, seed):
    rng = np.random.default_rng(seed)
    bf16 = lambda a: torch.from_numpy(a).to(torch.bfloat16).double().numpy()  # noqa: E731
    return bf16(rng.standard_normal((V, K))), bf16(rng.standard_normal((V, K)))


@pytest.mark.parametrize("K, V", DIMS)
def test_scalar_gate_state_sum(K, V):
    kern = _kernel(bwd_grads.FrostBwdGrads, False, K, V)
    S, dS = _states(K, V, K + V)
    g = np.cumsum(-np.random.default_rng(1).random(C) * 0.1)
    s = SimpleNamespace(sf=emu.Tensor(S.copy(), BFloat16), dsf=emu.Tensor(dS.copy(), BFloat16),
                        g=emu.Tensor(g.copy(), Float32), part=emu.Tensor(np.full((2, bwd_grads.WARPS), np.nan), Float32))
    emu.run_cta(lambda: kern.state_sum(s, emu.thread_index()), bwd_grads.THREADS)
    assert not np.isnan(s.part.array[1]).any()
    np.testing.assert_allclose(s.part.array[1].sum(), np.exp(g[-1]) * (S * dS).sum(), rtol=1e-12)


@pytest.mark.parametrize("K, V", DIMS)
def test_vector_gate_state_pairs(K, V):
    kern = _kernel(bwd_grads_vec.FrostBwdGradsVec, True, K, V)
    S, dS = _states(K, V, 3 * K + V)
    g = np.cumsum(-np.random.default_rng(2).random((C, K)) * 0.1, axis=0)
    s = SimpleNamespace(sf=emu.Tensor(S.copy(), BFloat16), dsf=emu.Tensor(dS.copy(), BFloat16),
                        g=emu.Tensor(g.copy(), Float32), sds=emu.Tensor(np.full(K, np.nan), Float32))
    emu.run_cta(lambda: kern.state_pairs(s, emu.thread_index()), bwd_grads.THREADS)
    np.testing.assert_allclose(s.sds.array, np.exp(g[-1]) * (S * dS).sum(axis=0), rtol=1e-12)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
