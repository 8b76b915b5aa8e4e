"""The pipelined layer's staging, rows and operand stages, run on the CPU (simt_emulator), against the mma layer's.

The parts of pipelined (kernels/fwd_pipelined.py) that differ from mma outside the MMA code are SIMT:
the cp.async staging of a chunk's rows into shared memory (zero-filled past the
sequence end, raw io dtype in bf16 tensors, GDN-2's b and w in qr and kbr/wst), the rows
stage working in place on them, and the operand stage with its rows-fastest thread
mapping plus the new tables KE, X and e^Gam_last. This test runs the mma layer's rows + operand
stages (global loads) and the pipelined layer's staging + rows + operand stages on the same chunk of the
same inputs, one emulated CTA each, and requires:

- every shared tensor the mma layer's stages produce (q-hat, k-hat, W0, Gam, QA, -KBA, KD^T; beta
  for GDN/KDA, whose GDN-2 copy is never read; QR, KBR for vector gates) to be identical
  in pipelined, padded rows included;
- the pipelined layer's tables to equal their definitions computed from those tensors: KE[s] =
  bf16(k_s e^(Gam_e(s) - Gam_s)), X[p] = e^(Gam_r_i - Gam_e_j), e^Gam_last, and
  bf16(KE_j) X_ij to reproduce the mma layer's Gram B side k_s e^(Gam_r_i - Gam_s) to bf16 accuracy.

Chunk 0 is staged by before_chunks, chunk 1 (a partial chunk) by the chain-time
prefetch functions. The chain and Gram (mma.sync) cannot run here.

The matrix's core (compile_tiers): GDN (the one scalar-gate case) at both chunks and each
vector-gate case at one, alternating (bf16 K = 64 before the loop, fp16 K = 128 in the
chain-time prefetch), so both staging paths run for scalar and vector gates and bf16 and
fp16 io; the vector-gate cases' other chunk waits for FROST_FULL_MATRIX=1.
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

from cudnn.linear_attention.frost.kernels import fwd_mma, fwd_pipelined, gmem_views  # noqa: E402
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig, operand_dtypes  # noqa: E402
from cudnn.linear_attention.frost.kernels.launch_abi import cutlass_dtype  # noqa: E402
from tests.reference.inputs import InputConfig, make_inputs  # noqa: E402
from tests.reference.preprocess import Family  # noqa: E402

import simt_emulator as emu  # noqa: E402
from compile_tiers import tiered  # noqa: E402

C, SUB = fwd_mma.CHUNK, fwd_mma.SUB
MMA_TENSORS = ("q", "k", "w0", "g", "qa", "kba", "kdt")
VECTOR_TENSORS = ("qr", "kbr")
FAMILIES = {"gdn": Family.GDN, "kda": Family.KDA, "gdn2": Family.GDN2}


def _pointers(cfg, x):
    arrays = {"q": x.q, "k": x.k, "v": x.v, "g": x.g, "beta": x.beta, "w": x.w, "cu_seqlens": x.cu_seqlens}
    arrays = {name: None if t is None else t.to(torch.float64).numpy().copy() for name, t in arrays.items()}
    arrays["cu_seqlens"] = arrays["cu_seqlens"].astype(np.int32)
    return [emu.Pointer(arrays.get(name), cutlass_dtype(dt)) for name, dt in operand_dtypes(cfg).items()]


_exp = np.vectorize(math.exp)  # the emulated kernel's exp (np.exp may differ in the last ulp)


def _bf16(a):
    return torch.from_numpy(a).to(torch.bfloat16).to(torch.float64).numpy()


def _run_stages(kernel_cls, cfg, x, T, N, chunk, scale):
    """One CTA (sequence 0, head 0) through the state-independent stages of `chunk`;
    returns the CTA's shared tensors by name (numpy copies)."""
    kern = emu.emulate_class(kernel_cls, helper_modules=[gmem_views, fwd_mma])(cfg)
    m = emu.emulated(gmem_views, "operand_views")(cfg, *_pointers(cfg, x), T, N)
    plan = kern.smem_plan(cfg)
    snapshot = {}

    def body():
        tid = emu.thread_index()
        lane, wid = tid % 32, tid // 32
        alloc = emu.SmemAllocator()
        s = SimpleNamespace()
        for name, _, shape, _ in plan:
            setattr(s, name, alloc.allocate_tensor(None, emu.Layout(shape)))
        heads = (0, 0, 0, 0)  # sequence 0, head 0 (H = HK = HV = 1)
        bos, eos = m.cu[0], m.cu[1]
        t0 = bos + chunk * C
        kern.before_chunks(s, m.q, m.k, m.v, m.g, m.beta, m.w, heads, bos, eos, tid, lane, wid)
        if chunk and kernel_cls is fwd_pipelined.FrostFwdPipelined:  # what chunk 0's chain prefetches
            kern.prefetch_rows(s, t0, eos, tid)
            kern.prefetch_v(s, t0, eos, lane, wid)
            emu.sync_threads()
        kern.stage_rows(s, m.q, m.k, m.v, m.g, m.beta, m.w, heads, t0, eos, tid)
        emu.sync_threads()
        kern.stage_operands(s, m.beta, heads, t0, eos, scale, tid)
        emu.sync_threads()
        if tid == 0:
            snapshot.update({name: getattr(s, name).array.copy() for name, *_ in plan})

    emu.run_cta(body, kern.threads)
    return snapshot


CASES = [  # (family, K, V, io dtype, l2norm, gate_align16)
    ("gdn", 64, 64, "float16", True, False),
    ("kda", 64, 64, "bfloat16", False, True),
    ("kda", 128, 64, "float16", True, False),
    ("gdn2", 64, 64, "bfloat16", True, True),
    ("gdn2", 128, 64, "float16", False, True),
]


# every (case, chunk); the core: GDN's both, chunk (i + 1) % 2 of vector-gate case i
RUNS = [(case, chunk) for chunk in (0, 1) for case in CASES]


@pytest.mark.parametrize("case,chunk", tiered(
    RUNS, [n for n, (case, chunk) in enumerate(RUNS) if case[0] == "gdn" or (CASES.index(case) + 1) % 2 == chunk],
    ids=lambda r: f"{r[0][0]}-K{r[0][1]}V{r[0][2]}-{r[0][3]}-l2{int(r[0][4])}-galign{16 if r[0][5] else 4}-"
                  f"{'prefetched-partial' if r[1] else 'staged-before-loop'}", unpack=True))
def test_pipelined_stages_match_mma(case, chunk):
    fam, K, V, io, l2, align16 = case
    family = FAMILIES[fam]
    inputs = InputConfig(family=family, seq_lens=(100, 7), H=1, K=K, V=V, dtype=getattr(torch, io),
                         use_qk_l2norm=l2)
    x = make_inputs(inputs, 41)
    cfg = FrostFwdConfig(io_dtype=io, state_dtype=None, H=1, HK=1, HV=1, K=K, V=V,
                         gate_per_channel=family.per_channel_gate, beta_per_channel=family.vector_beta,
                         has_w=family.vector_beta, use_l2norm=l2, has_initial_state=False, has_final_state=False)
    scale = 1.0 / math.sqrt(K)
    s1 = _run_stages(fwd_mma.FrostFwdMma, cfg, x, inputs.T, inputs.N, chunk, scale)
    cfg2 = FrostFwdConfig(**{**cfg.__dict__, "gate_align16": align16})
    s2 = _run_stages(fwd_pipelined.FrostFwdPipelined, cfg2, x, inputs.T, inputs.N, chunk, scale)
    names = MMA_TENSORS + (VECTOR_TENSORS if cfg.gate_per_channel else ()) + (() if cfg.has_w else ("beta",))
    for name in names:
        assert not np.isnan(s1[name]).any(), name  # mma wrote all of it
        assert np.array_equal(s1[name], s2[name]), (name, np.argwhere(s1[name] != s2[name])[:5])
    rows = 100 - 64 * chunk
    if rows < C:  # padded rows of the partial chunk: zero (not stale), raw gates 0 so Gam stays flat
        assert not s2["k"][rows:].any() and not s2["w0"][rows:].any()
        assert (s2["g"][rows:] == s2["g"][rows - 1]).all()

    g, k = s2["g"], s2["k"]
    bf16 = _bf16
    if cfg.gate_per_channel:
        assert np.array_equal(s2["alast"], _exp(g[C - 1]))
        last = np.repeat(g[SUB - 1::SUB], SUB, axis=0)  # Gam of the last row of each row's block
        assert np.array_equal(s2["ke"], bf16(k * _exp(last - g)))
        for p, (i, j) in enumerate(fwd_mma.GRAM_TILES):
            assert np.array_equal(s2["xg"][p], _exp(g[i * SUB] - g[j * SUB + SUB - 1])), p
            b_pipelined = s2["ke"][j * SUB:(j + 1) * SUB] * s2["xg"][p]
            b_mma = k[j * SUB:(j + 1) * SUB] * np.exp(g[i * SUB] - g[j * SUB:(j + 1) * SUB])
            assert np.allclose(b_pipelined, b_mma, rtol=2 ** -7, atol=1e-30), p
    else:
        assert s2["alast"][0] == math.exp(g[C - 1, 0])


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
