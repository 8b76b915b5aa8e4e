"""The FROST recurrent (decode) kernel's own source, executed on the CPU (simt_emulator),
against the float64 serving reference (tests/reference/serving.py).

kernels/decode_kernel.py is scalar CuTe DSL, so its launcher and kernel run as Python with
a thread per CUDA thread. That checks without a GPU the launch grid, the lane/warp mapping
of state rows and channels, head grouping, the in-kernel gates (safe gate with a_log /
dt_bias, beta sigmoid and 2 sigmoid, linear domain), L2 norm, state pools with slots that
are negative or past the pool (skipped: zero outputs, no state row touched - the emulator
raises on any access outside an operand), overwrite of the pool in place, checkpoint rows
at every cadence and dtype, and the skipped-sequence zero rows; fp32 rounding is not
checked (the emulation computes in float64 with the kernel's own .to() roundings).

Sizes: the kernel maps K onto 32 lanes, so K = 32 (one channel per lane) and K = 64; V = 32
with BLOCK_V = 16 gives two V tiles per head, BLOCK_V = 32 one; one case at V = BLOCK_V = 64. Sequences of 0..16 tokens.
Every case also runs with contiguous_channels (lane l holds channels l * KPL ...: vector
copies of state, checkpoint, q, k, gate, dt_bias rows) at K = 64 or 128 (KPL = 2, 4; at
K = 32 both maps are the identity, so that would test nothing).

Each emulated CTA costs ~0.1-0.5 s a token on one core (a Python thread per CUDA thread,
a warp barrier per shuffle), so the cases keep heads to what they check: two output
heads (q / k or v heads shared by two where a case groups them), one in the speculative
and the malformed-table cases (their subject is the sequences).

The core (compile_tiers; ~95 s on one core, ~220 s before the heads were cut): each case
once, in one channel map (RUNS), and two malformed tables: overlapping sequences
(checkpoint rows past the table's) and uncovered rows at both ends (zeroed). The other
channel map of each case and the clamped tables (past the end, negative entries:
seq_bounds, frost_seq_bounds_emulation_test) wait for FROST_FULL_MATRIX=1.
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
from compile_tiers import tiered  # noqa: E402

from cudnn.linear_attention.frost.kernels import decode_kernel, gmem_views, seq_bounds  # noqa: E402
from cudnn.linear_attention.frost.kernels.decode_config import (  # noqa: E402
    DECODE_OPERANDS, FrostDecodeConfig, checkpoint_rows, decode_operand_dtypes)
from cudnn.linear_attention.frost.kernels.launch_abi import cutlass_dtype  # noqa: E402
from tests.reference.compare import rel_err  # noqa: E402
from tests.reference.delta_rule import Primals  # noqa: E402
from tests.reference.inputs import InputConfig, make_inputs  # noqa: E402
from tests.reference.preprocess import Family  # noqa: E402
from tests.reference.serving import run_serving  # noqa: E402

from simt_emulator import Pointer, Val, emulate_class  # noqa: E402

O_BOUND = 1e-2      # bf16 outputs (the GPU bound); the emulation reaches ~3e-3
FP32_BOUND = 1e-5   # fp32 states and checkpoints: only the fp32 roundings of the loads
BF16_BOUND = 1e-2


def small_config(**fields) -> FrostDecodeConfig:
    """A FrostDecodeConfig at head dims below the kernel's (64, 128), built without
    __post_init__'s checks."""
    cfg = object.__new__(FrostDecodeConfig)
    for f in dataclasses.fields(FrostDecodeConfig):
        object.__setattr__(cfg, f.name, fields.get(f.name, f.default))
    return cfg


def _np(t):
    return None if t is None else t.detach().to(torch.float64).numpy().copy()


def run_emulated(cfg, arrays: dict, T: int, N: int, S: int, scale: float):
    """The launcher and kernel on numpy arrays by ABI name (written in place)."""
    kernel = emulate_class(decode_kernel.FrostDecode,
                           helper_modules=[gmem_views, seq_bounds])(cfg)
    dtypes = decode_operand_dtypes(cfg)
    ptrs = [Pointer(arrays.get(name), cutlass_dtype(dtypes[name])) for name in DECODE_OPERANDS]
    kernel(*ptrs, T, N, S, Val(scale), None)


CASES = {
    # GDN: a pool of 5 rows overwritten in place, slots -1 and 7 skipped, per-token
    # checkpoints, in-kernel L2 norm, safe gate with a_log and dt_bias, 2 sigmoid(beta)
    "gdn-pool-overwrite": dict(
        family=Family.GDN, lens=(3, 1, 2, 0, 4), H=1, HK=1, HV=2, K=32, slots=(4, -1, 0, 2, 7),
        pool=5, overwrite=True, every=1, ck="float32", state="float32",
        opts=dict(use_qk_l2norm=True, safe_gate=True, use_beta_sigmoid=True,
                  allow_neg_eigval=True)),
    # KDA: no pool (row n), separate final state, checkpoints every 2 tokens in bf16,
    # safe gate with a lower bound, sigmoid(beta), q heads shared by two output heads; one
    # V tile of 32 rows (8 rows a warp: the 16-entry transposed reduction)
    "kda-rows-ck2": dict(
        family=Family.KDA, lens=(5, 1, 6), H=1, HK=1, HV=2, K=64, slots=None, pool=None,
        overwrite=False, every=2, ck="bfloat16", state="float32", block_v=32, K_vec=128,
        opts=dict(safe_gate=True, gate_lower_bound=-3.0, use_beta_sigmoid=True)),
    # GDN-2: a pool written into a separate pool-shaped final state (slot 4 = S skipped), bf16 state,
    # linear-domain gate, v heads shared (HV < H)
    "gdn2-pool-linear": dict(
        family=Family.GDN2, lens=(2, 3, 1), H=2, HK=2, HV=1, K=32, slots=(1, 4, 3), pool=4,
        overwrite=False, every=0, ck=None, state="bfloat16",
        opts=dict(gate_domain="linear")),
    # GDN speculative steps of 16 and 9 tokens (the longest a decode plan serves per
    # sequence on average) over a pool in place, per-token checkpoints, one V tile of 32
    "gdn-spec16": dict(
        family=Family.GDN, lens=(16, 9), H=1, HK=1, HV=1, K=32, slots=(2, 0), pool=3,
        overwrite=True, every=1, ck="float32", state="float32", block_v=32,
        opts=dict(use_qk_l2norm=True, safe_gate=True, use_beta_sigmoid=True)),
    # KDA over 64 value rows per CTA (16 rows a warp: the 32-entry transposed reduction,
    # one sum per lane), V = 64, a pool with a slot past its end, per-token checkpoints
    "kda-bv64": dict(
        family=Family.KDA, lens=(3, 1, 2), H=2, HK=2, HV=2, K=64, V=64, slots=(2, 5, 0),
        pool=3, overwrite=True, every=1, ck="float32", state="float32", block_v=64,
        opts=dict(safe_gate=True, use_beta_sigmoid=True, use_qk_l2norm=True)),
    # KDA without a safe gate or any state, plain log gates
    "kda-stateless": dict(
        family=Family.KDA, lens=(4, 2), H=2, HK=2, HV=2, K=32, slots=None, pool=None,
        overwrite=False, every=0, ck=None, state=None, opts={}),
}


# each case once in the core (compile_tiers), the layouts alternating over the cases so
# both run for every family; the other layout of each with FROST_FULL_MATRIX=1
RUNS = [(name, contiguous) for contiguous in (False, True) for name in CASES]


@pytest.mark.parametrize("name,contiguous", tiered(
    RUNS, [i for i, (name, contiguous) in enumerate(RUNS) if list(CASES).index(name) % 2 == contiguous],
    ids=lambda r: f"{r[0]}-{'contiguous' if r[1] else 'strided'}", unpack=True))
def test_decode_source_matches_serving_reference(name, contiguous):
    c = CASES[name]
    fam, lens, K, V = c["family"], c["lens"], c["K"], c.get("V", 32)
    if contiguous:
        K = c.get("K_vec", 64)
    inputs = InputConfig(family=fam, seq_lens=lens, H=c["H"], HK=c["HK"], HV=c["HV"], K=K, V=V,
                         dtype=torch.bfloat16, **c["opts"])
    x = make_inputs(inputs, 11)
    T, N, HO = inputs.T, inputs.N, inputs.HO
    scale = 1.0 / math.sqrt(K)
    has_state = c["state"] is not None
    S = c["pool"] or N
    gen = torch.Generator().manual_seed(3)
    pool = torch.randn(S, HO, V, K, generator=gen) if has_state else None
    if pool is not None and c["state"] == "bfloat16":
        pool = pool.to(torch.bfloat16)
    slots = None if c["slots"] is None else torch.tensor(c["slots"], dtype=torch.int32)
    every = c["every"]
    lb = c["opts"].get("gate_lower_bound")
    cfg = small_config(
        family=fam.value, io_dtype="bfloat16", state_dtype=c["state"], H=c["H"], HK=c["HK"],
        HV=c["HV"], K=K, V=V, use_l2norm=inputs.use_qk_l2norm, has_initial_state=has_state,
        has_final_state=has_state, has_pool=slots is not None, checkpoint_every=every,
        checkpoint_dtype=c["ck"], beta_sigmoid=inputs.use_beta_sigmoid,
        neg_eigval=inputs.allow_neg_eigval, safe_gate=inputs.safe_gate,
        has_a_log=x.a_log is not None, has_dt_bias=x.dt_bias is not None,
        gate_lower_bound=-5.0 if lb is None else lb, linear_gate=inputs.gate_domain == "linear",
        block_v=c.get("block_v", 16), contiguous_channels=contiguous)

    arrays = {name: _np(getattr(x, name, None)) for name in ("q", "k", "v", "g", "beta", "w",
                                                              "a_log", "dt_bias")}
    arrays["cu_seqlens"] = x.cu_seqlens.numpy().astype(np.int32)
    arrays["out"] = np.full((T, HO, V), np.nan)
    sentinel = None
    if has_state:
        arrays["initial_state"] = _np(pool)
        if c["overwrite"]:
            arrays["final_state"] = arrays["initial_state"]  # one buffer bound to both
        else:
            sentinel = np.full((S, HO, V, K), 1234.5)
            arrays["final_state"] = sentinel
    if slots is not None:
        arrays["state_indices"] = slots.numpy().copy()
    if every:
        arrays["checkpoints"] = np.full((checkpoint_rows(T, N, every), HO, V, K), np.nan)
    run_emulated(cfg, arrays, T, N, S, scale)

    primals = Primals(x.q, x.k, x.v, x.g, x.beta, x.cu_seqlens, w=x.w,
                      initial_state=pool, a_log=x.a_log, dt_bias=x.dt_bias)
    ref = run_serving("emulated", fam, dataclasses.replace(inputs.options(), scale=scale),
                      primals, state_indices=slots, output_final_state=has_state,
                      checkpoint_every_n_tokens=every)
    o = torch.from_numpy(arrays["out"])
    assert not torch.isnan(o).any(), "an output row was never written"
    assert rel_err(o, ref.o) < O_BOUND, rel_err(o, ref.o)
    if has_state:
        before = pool if c["overwrite"] else torch.from_numpy(np.full((S, HO, V, K), 1234.5))
        want = ref.state_after(before)
        got = torch.from_numpy(arrays["final_state"])
        bound = FP32_BOUND if c["state"] == "float32" else BF16_BOUND
        assert rel_err(got, want) < bound, rel_err(got, want)
        for row in set(range(S)) - set(ref.written):  # rows no served sequence owns
            assert torch.equal(got[row], want[row]), f"pool row {row} was touched"
    if every:
        rows = sum((n + every - 1) // every for n in lens)
        got_ck = torch.from_numpy(arrays["checkpoints"][:rows])
        assert not torch.isnan(got_ck).any(), "a checkpoint row was never written"
        bound = FP32_BOUND if c["ck"] == "float32" else BF16_BOUND
        assert rel_err(got_ck, ref.checkpoints[:rows]) < bound, rel_err(got_ck, ref.checkpoints[:rows])


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))


# Malformed cu_seqlens tables (never read on the host): every access stays inside the
# operands (the emulator raises on any other), and output rows no sequence covers are zero.
BAD_TABLES = {
    "past-the-end": [0, 3, 9, 40],         # T = 8: the last entries point past the rows
    "gap-and-late-start": [2, 4, 4, 6],    # rows 0-1 and 6-7 uncovered
    "non-monotone": [0, 6, 2, 8],          # sequences overlap, checkpoint rows overflow
    "negative": [-5, 3, -1, 8],
}


@pytest.mark.parametrize("name", tiered(  # core: overlap and uncovered rows; the clamps: the full matrix
    list(BAD_TABLES), [list(BAD_TABLES).index("gap-and-late-start"), list(BAD_TABLES).index("non-monotone")]))
def test_decode_source_on_malformed_tables(name):
    table = BAD_TABLES[name]
    T, N, H, K, V, every = 8, len(table) - 1, 1, 32, 32, 2
    inputs = InputConfig(family=Family.GDN, seq_lens=(T,), H=H, HK=H, HV=H, K=K, V=V,
                         dtype=torch.bfloat16)
    x = make_inputs(inputs, 5)
    cfg = small_config(
        family="gdn", io_dtype="bfloat16", state_dtype="float32", H=H, HK=H, HV=H, K=K, V=V,
        use_l2norm=False, has_initial_state=True, has_final_state=True, has_pool=False,
        checkpoint_every=every, checkpoint_dtype="float32", beta_sigmoid=False,
        neg_eigval=False, safe_gate=False, has_a_log=False, has_dt_bias=False,
        gate_lower_bound=-5.0, linear_gate=False, block_v=16)
    arrays = {n: _np(getattr(x, n)) for n in ("q", "k", "v", "g", "beta")}
    arrays["cu_seqlens"] = np.array(table, dtype=np.int32)
    arrays["out"] = np.full((T, H, V), np.nan)
    arrays["initial_state"] = np.zeros((N, H, V, K))
    arrays["final_state"] = np.full((N, H, V, K), np.nan)
    arrays["checkpoints"] = np.full((checkpoint_rows(T, N, every), H, V, K), np.nan)
    run_emulated(cfg, arrays, T, N, N, 1.0 / math.sqrt(K))
    clamped = [min(max(c, 0), T) for c in table]
    covered = set()
    for n in range(N):
        covered.update(range(clamped[n], max(clamped[n + 1], clamped[n])))
    for t in set(range(T)) - covered:
        assert np.all(arrays["out"][t] == 0.0), f"uncovered row {t} not zeroed"
    assert not np.isnan(arrays["out"]).any(), "an output row was left unwritten"
