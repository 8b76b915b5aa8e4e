"""The FROST SIMT oracle's own kernel source, executed on the CPU (simt_emulator), against the float64 recurrences.

The oracle (frost_fwd_oracle.py, test-only) is scalar CuTe DSL, so its launcher, kernel body
and stages can run as Python with a thread per CUDA thread (see simt_emulator.py). That checks on a machine
without a GPU everything but fp32 rounding: the launch grid, head mapping, operand views,
const_expr specialisation per family, shared-memory indexing and barriers, the write term
(beta v / w v), partial and multiple chunks, initial/final state. The first GPU run found
the oracle wrong for scalar beta (the write term was v, not beta v); this test fails on that code
(rel. error ~0.8) and passes on the fix (~2e-3: bf16 outputs).

Sizes: FrostFwdConfig limits K and V to the kernels' head dims (64, 128); the emulation
uses K = V = 16 with CHUNK = 16 and BLOCK_V = 8 (module constants of frost_fwd_oracle, overridden
only here) so sequences of 1..40 tokens span up to three chunks and two value blocks per
head, and a run takes seconds.

The matrix's core (compile_tiers; ~40 s on one core, the full matrix ~110 s): the oracle is
the test tooling's kernel, not one the product launches, so every run takes cases that
reach each of its const_expr branches (GDN with both states over lengths 1, 15, 16, 17,
40: partial, exact and multi-chunk sequences; GDN-2 with vector beta and w, per-channel
gates, l2norm, grouped q/k heads and a length-0 sequence), one malformed table
(descending, rows uncovered on both sides) and the clamped table against the recurrence.
KDA's cases, the other GDN / GDN-2 case and the other malformed tables wait for
FROST_FULL_MATRIX=1.
"""
import dataclasses
import math
import os
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from cudnn.linear_attention.frost.kernels import gmem_views, seq_bounds  # noqa: E402
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig, operand_dtypes  # noqa: E402
from cudnn.linear_attention.frost.kernels.launch_abi import cutlass_dtype  # noqa: E402
from tests.reference.compare import rel_err  # noqa: E402
from tests.reference.gdn import naive_recurrent_gdn  # noqa: E402
from tests.reference.gdn2 import naive_recurrent_gdn2  # noqa: E402
from tests.reference.inputs import InputConfig, make_inputs  # noqa: E402
from tests.reference.kda import naive_recurrent_kda  # noqa: E402
from tests.reference.preprocess import Family  # noqa: E402

import frost_fwd_oracle  # noqa: E402
from compile_tiers import tiered  # noqa: E402
from simt_emulator import Pointer, Val, emulate_class  # noqa: E402

REFERENCES = {Family.GDN: naive_recurrent_gdn, Family.KDA: naive_recurrent_kda, Family.GDN2: naive_recurrent_gdn2}
OVERRIDES = {"CHUNK": 16, "BLOCK_V": 8}
BOUND = 1e-2  # the GPU smoke bound; the emulation reaches ~2e-3 (bf16 output rounding)


def small_config(**fields) -> FrostFwdConfig:
    """A FrostFwdConfig at head dims below the kernels' (64, 128): built without
    __post_init__'s checks, every other field as the launcher would set it."""
    cfg = object.__new__(FrostFwdConfig)
    for f in dataclasses.fields(FrostFwdConfig):
        object.__setattr__(cfg, f.name, fields.get(f.name, f.default))
    return cfg


def run_oracle_emulated(cfg: FrostFwdConfig, x, T: int, N: int, scale: float):
    """frost_fwd's launch of the oracle, emulated: returns (out, final_state) as float64 tensors."""
    kernel = emulate_class(frost_fwd_oracle.FrostFwdOracle, OVERRIDES, helper_modules=[gmem_views, seq_bounds])(cfg)
    dtypes = operand_dtypes(cfg)
    arrays = {
        "q": x.q, "k": x.k, "v": x.v, "g": x.g, "beta": x.beta, "w": x.w, "cu_seqlens": x.cu_seqlens,
        "initial_state": x.initial_state if cfg.has_initial_state else None,
    }
    arrays = {name: None if t is None else t.to(torch.float64).numpy().copy() for name, t in arrays.items()}
    arrays["cu_seqlens"] = arrays["cu_seqlens"].astype(np.int32)
    arrays["out"] = np.full((T, cfg.HO, cfg.V), np.nan)
    arrays["final_state"] = np.full((N, cfg.HO, cfg.V, cfg.K), np.nan) if cfg.has_final_state else None
    ptrs = [Pointer(arrays.get(name), cutlass_dtype(dt)) for name, dt in dtypes.items()]
    kernel(*ptrs, T, N, Val(scale), None)
    final = None if arrays["final_state"] is None else torch.from_numpy(arrays["final_state"])
    return torch.from_numpy(arrays["out"]), final


CASES = [  # (family, seq_lens, H, HK, HV, l2norm, initial state, final state)
    (Family.GDN, (1, 15, 16, 17, 40), 2, 2, 2, False, True, True),
    (Family.GDN, (33, 0, 9), 1, 1, 2, True, False, True),
    (Family.KDA, (1, 15, 16, 17, 40), 2, 2, 2, False, True, True),
    (Family.KDA, (33, 0, 9), 2, 2, 1, True, True, False),
    (Family.GDN2, (1, 15, 16, 17, 40), 2, 2, 2, False, True, True),
    (Family.GDN2, (33, 0, 9), 1, 2, 2, True, False, True),
]


@pytest.mark.parametrize("case", tiered(  # core: GDN's long case, GDN-2's grouped one (the other
    CASES, [0, 5],  # branches: KDA's per-channel gate is GDN-2's too, its scalar beta GDN's)
    ids=lambda c: f"{c[0].value}-{len(c[1])}seq-H{c[2]}HK{c[3]}HV{c[4]}-l2{int(c[5])}"))
def test_oracle_source_matches_recurrence(case):
    family, lens, H, HK, HV, l2, h0, ht = case
    K = V = 16
    inputs = InputConfig(family=family, seq_lens=lens, H=H, HK=HK, HV=HV, K=K, V=V, dtype=torch.bfloat16,
                         use_qk_l2norm=l2, with_initial_state=h0)
    x = make_inputs(inputs, 31)
    scale = 1.0 / math.sqrt(K)
    cfg = small_config(io_dtype="bfloat16", state_dtype="float32" if h0 or ht else None, H=H, HK=HK, HV=HV,
                       K=K, V=V, gate_per_channel=family.per_channel_gate, beta_per_channel=family.vector_beta,
                       has_w=family.vector_beta, use_l2norm=l2, has_initial_state=h0, has_final_state=ht)
    o, s = run_oracle_emulated(cfg, x, inputs.T, inputs.N, scale)
    ref_o, ref_s = REFERENCES[family](*x.args(), **{**x.options(), "scale": scale}, output_final_state=True)
    eo = rel_err(o, ref_o)
    es = rel_err(s, ref_s) if ht else 0.0
    assert eo < BOUND and es < BOUND, (eo, es)
    assert not torch.isnan(o).any()  # every real row was stored


# Malformed cu_seqlens tables (T = 40 tokens, N = 3 sequences): every global access is
# bounds-checked by the emulator (an IndexError is an out-of-bounds access on the GPU),
# and out starts as NaN, so a row no sequence writes and the kernel leaves alone shows up.
MALFORMED = {
    "last_past_T": [0, 10, 25, 70],
    "negative": [-8, 10, 25, 40],
    "non_monotone": [0, 30, 12, 40],
    "last_short_of_T": [6, 10, 25, 33],
    "gap_inside": [10, 20, 0, 5],
}


def covered_rows(table, T):
    rows = set()
    for bos, eos in zip(table, table[1:]):
        bos, eos = min(max(bos, 0), T), min(max(eos, 0), T)
        rows.update(range(bos, eos))
    return rows


@pytest.mark.parametrize("name", tiered(  # core: a descending table with uncovered rows on both
    sorted(MALFORMED), [sorted(MALFORMED).index("gap_inside")]))  # sides; a table past T: the test below
def test_oracle_stays_in_bounds_and_zeroes_uncovered_rows(name):
    table = MALFORMED[name]
    K = V = 16
    inputs = InputConfig(family=Family.GDN, seq_lens=(10, 15, 15), H=1, HK=1, HV=2, K=K, V=V,
                         dtype=torch.bfloat16, with_initial_state=True)
    x = make_inputs(inputs, 5)
    x = dataclasses.replace(x, cu_seqlens=torch.tensor(table, dtype=torch.int32))
    cfg = small_config(io_dtype="bfloat16", state_dtype="float32", H=1, HK=1, HV=2, K=K, V=V,
                       gate_per_channel=False, beta_per_channel=False, has_w=False, use_l2norm=False,
                       has_initial_state=True, has_final_state=True)
    o, s = run_oracle_emulated(cfg, x, inputs.T, inputs.N, 0.25)  # raises on any out-of-bounds access
    covered = covered_rows(table, inputs.T)
    for t in range(inputs.T):
        if t in covered:
            assert not torch.isnan(o[t]).any(), t
        else:
            assert (o[t] == 0).all(), t
    assert not torch.isnan(s).any()


def test_oracle_on_a_clamped_table_matches_the_recurrence_on_that_table():
    # last > T: the last sequence ends at T, as the recurrence on [0, 10, 25, 40] says
    K = V = 16
    inputs = InputConfig(family=Family.GDN, seq_lens=(10, 15, 15), H=1, K=K, V=V, dtype=torch.bfloat16)
    x = make_inputs(inputs, 9)
    cfg = small_config(io_dtype="bfloat16", state_dtype="float32", H=1, HK=1, HV=1, K=K, V=V,
                       gate_per_channel=False, beta_per_channel=False, has_w=False, use_l2norm=False,
                       has_initial_state=False, has_final_state=True)
    bad = dataclasses.replace(x, cu_seqlens=torch.tensor([0, 10, 25, 99], dtype=torch.int32))
    o, s = run_oracle_emulated(cfg, bad, inputs.T, inputs.N, 0.25)
    ref_o, ref_s = naive_recurrent_gdn(*x.args(), **{**x.options(), "scale": 0.25}, output_final_state=True)
    assert rel_err(o, ref_o) < BOUND and rel_err(s, ref_s) < BOUND


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
