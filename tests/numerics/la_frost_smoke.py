"""GPU smoke check and timing of the FROST forward kernels (GDN, KDA, GDN-2) on sm_90.

Runs kernels.fwd.frost_fwd on seeded bf16 inputs (tests/reference/inputs.py) and compares
out and final_state with the float64 token recurrences naive_recurrent_* (relative L2
error, bound 1e-2). One line per case; exit status 1 if any case fails or raises (the
traceback is printed and the run continues). Unless --quick, then times the kernel at
8 x 4096 tokens, 16 heads, K = V = 128, bf16 (CUDA events around 10 back-to-back bound
launches, warm-up, median of 20; also the time of one frost_fwd call, host checks
included) for each algorithm, and prints consecutive layers side by side (SUMMARY
lines, kernel times: pipelined against mma, wgmma against pipelined) when both ran.

Run on the GPU machine from the repo root, with CuTe DSL importable:
  PYTHONPATH=$(python3 tools/pythonpath.py) python3 tests/numerics/la_frost_smoke.py --family all
(--algorithm one or more of oracle mma pipelined wgmma wgmmagram wgmmagram16 wgmmagram64 wgmmascaled
wgmmascaledlead wgmmascaledws wgmmawyws wgmmawycws wgmmawyws64 wgmmawycws64 wgmmawyws4 wgmmawyws4raw
wgmmawycws4raw, or all (the default: oracle, mma, pipelined, wgmma), each forced by the test tooling
(engines_frost/tests/frost_fwd_experiments.py, launched through frost_fwd's own checks by its
use_kernel): wgmma (fwd_wgmma.py: the pipelined layer with the chain's products on warpgroup
MMA) is the product's kernel for these bf16 forwards on sm_90a (and for bf16 training
forwards there), pipelined (fwd_pipelined.py) its base (the product's on other archs), mma
(fwd_mma.py) the tensor-core kernel pipelined derives from, oracle the SIMT oracle
(test-only), wgmmagram wgmma with the scalar-gate Gram on warpgroup MMA (fwd_wgmma_gram.py,
m64n32 blocks; wgmmagram16, wgmmagram64: m64n16, m64n64; an experiment, GDN only: other
families run plain wgmma under those names), wgmmascaled wgmma with GDN's decays as
per-token factors on the chain's fp32 results and no operand stage (fwd_wgmma_scaled.py, the
product's GDN chain, whereas this script's wgmma keeps them folded into bf16 operands, the
A/B; GDN only likewise; wgmmascaledlead with the next chunk's rows copied a chunk ahead,
wgmmascaledws warp-specialised: a producer role for the next chunk's rows and Gram, fwd_ws.py;
wgmmawyws the same with the chunk's inverse formed by the producer and no solve in the chain,
fwd_ws_wy.py, wgmmawycws without W' (the chain applies the inverse); wgmmawyws64 /
wgmmawycws64 those with the m64n64 wgmma Gram in their producer; wgmmawyws4 wy-ws's chain
with its producer split into a math and a copy warpgroup, fwd_ws4.py, wgmmawyws4raw that on
the raw q / k rows with the norms as factors (fwd_ws4.RawRing), wgmmawycws4raw that without
W' (RawRingInChain); these for plain K = V = 128 forwards, else they run as wgmmascaled);
e.g. --algorithm pipelined wgmma. With wgmma and a wgmmagram or wgmmascaled kernel both run,
a "<name> vs wgmma" line per case gives their outputs' relative difference (close, not
bitwise: another summation order, other rounding points).)
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import traceback
from pathlib import Path

import torch

# the test tooling's kernel layers (frost_fwd_experiments.py, frost_fwd_oracle.py)
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "engines_frost" / "tests"))
from frost_fwd_experiments import ALGORITHMS, use_kernel  # noqa: E402

#: kernel names this script takes beyond the tooling's layers: wgmma with the GDN Gram on
#: warpgroup MMA (frost_fwd_experiments.GRAM_WIDTHS: m64n32, m64n16, m64n64 blocks)
GRAM_KERNELS = {"wgmmagram": "wgmma", "wgmmagram16": "wgmma16", "wgmmagram64": "wgmma64"}
#: and wgmma with the GDN chain's decays as per-token factors, no operand stage (fwd_wgmma_scaled.py;
#: wgmmascaledlead: the next chunk's rows copied a chunk ahead as well; wgmmascaledws: warp-specialised,
#: fwd_ws.py; wgmmawyws: warp-specialised with the full inverse on the producer, fwd_ws_wy.py;
#: wgmmawycws: the same without W')
SCALED_KERNELS = {"wgmmascaled": "scaled", "wgmmascaledlead": "scaled-lead", "wgmmascaledws": "scaled-ws",
                  "wgmmawyws": "wy-ws", "wgmmawycws": "wyc-ws"}
#: the full-inverse kernels with the m64n64 wgmma Gram in their producer, the four-role one's
#: on its math warpgroup (name: (decay, gram))
WS_GRAM_KERNELS = {"wgmmawyws64": ("wy-ws", "wgmma64"), "wgmmawycws64": ("wyc-ws", "wgmma64"),
                   "wgmmawyws4": ("wy-ws4", "wgmma64"), "wgmmawyws4raw": ("wy-ws4raw", "wgmma64"),
                   "wgmmawycws4raw": ("wyc-ws4raw", "wgmma64"),
                   # v copied into the raw ring with its chunk's rows (frost_fwd_v_ahead.py)
                   "wgmmawycws4va": ("wyc-ws4va", "wgmma64"),
                   # q and k by tensor-memory copies, then also v in the ring by bulk copies
                   # (frost_fwd_tma_rows.py)
                   "wgmmawycws4tma": ("wyc-ws4tma", "wgmma64"), "wgmmawycws4tmava": ("wyc-ws4tmava", "wgmma64")}
KERNELS = (*ALGORITHMS, *GRAM_KERNELS, *SCALED_KERNELS, *WS_GRAM_KERNELS)
COMPARED = (*GRAM_KERNELS, *SCALED_KERNELS, *WS_GRAM_KERNELS)  # each against wgmma where both ran


def kernel_knobs(name: str) -> tuple[str, str, str]:
    """(algorithm, gram, decay) of one of KERNELS: what the name says (the plain layers:
    the mma Gram and folded decays)."""
    if name in GRAM_KERNELS:
        return "wgmma", GRAM_KERNELS[name], "folded"
    if name in SCALED_KERNELS:
        return "wgmma", "mma", SCALED_KERNELS[name]
    if name in WS_GRAM_KERNELS:
        decay, gram = WS_GRAM_KERNELS[name]
        return "wgmma", gram, decay
    return name, "mma", "folded"


def kernel_block(name: str):
    """use_kernel for one of KERNELS (FROST_FWD_GRAM and FROST_FWD_DECAY are not read: each
    name says its Gram and decays, kernel_knobs; FROST_FWD_ROWS and FROST_FWD_STORES are:
    the row copies and the stores of every vector-gate wgmma kernel)."""
    algorithm, gram, decay = kernel_knobs(name)
    return use_kernel(algorithm, gram=gram, decay=decay)

from tests.reference.compare import rel_err  # noqa: E402
from tests.reference.gdn import naive_recurrent_gdn  # noqa: E402
from tests.reference.gdn2 import naive_recurrent_gdn2  # noqa: E402
from tests.reference.inputs import InputConfig, make_inputs  # noqa: E402
from tests.reference.kda import naive_recurrent_kda  # noqa: E402
from tests.reference.preprocess import Family  # noqa: E402

BOUND = 1e-2
FAMILIES = {"gdn": Family.GDN, "kda": Family.KDA, "gdn2": Family.GDN2}
REFERENCES = {Family.GDN: naive_recurrent_gdn, Family.KDA: naive_recurrent_kda, Family.GDN2: naive_recurrent_gdn2}
MIXED = (1, 63, 64, 65, 1000)
DEVICE = "cuda"
BACK_TO_BACK = 10  # kernel launches per timed sample


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    seq_lens: tuple[int, ...]
    H: int
    HV: int
    K: int
    V: int
    initial_state: bool
    l2norm: bool
    final_state: bool = True
    state_dtype: torch.dtype = torch.float32
    long: bool = False  # skipped under --quick
    strong_decay: bool = False  # every 7th token decays by e^-30: the mma layer's exact diagonal-block path
    correlated: bool = False  # keys at cosine ~0.8 with one another, beta >= 0.5, slow decay


CASES = [
    Case("mixed-h16-k128", MIXED, 16, 16, 128, 128, True, False),
    Case("mixed-h16-k128-l2", MIXED, 16, 16, 128, 128, False, True),
    Case("mixed-gva-k128-l2-h0", MIXED, 8, 16, 128, 128, True, True),
    Case("mixed-h16-k64", MIXED, 16, 16, 64, 64, True, True),
    Case("mixed-gva-k64-nofinal", MIXED, 8, 16, 64, 64, False, False, final_state=False),
    Case("mixed-h4-k64v128-bf16state", (0, 130, 1, 0, 77), 4, 4, 64, 128, True, True, state_dtype=torch.bfloat16),
    Case("mixed-h4-k128-strong-decay", (1, 63, 64, 65, 300), 4, 4, 128, 128, True, True, strong_decay=True),
    Case("correlated-h2-k128-l2", (256, 100), 2, 2, 128, 128, True, True, correlated=True),
    Case("long4096-h16-k128-l2-h0", (4096,), 16, 16, 128, 128, True, True, long=True),
    Case("long4096-gva-k64", (4096,), 8, 16, 64, 64, False, False, long=True),
]


def _frost_fwd():
    from cudnn.linear_attention.frost.kernels.fwd import frost_fwd
    return frost_fwd


def _launch(family, x, out, h0, ht, scale, l2, bind=False):
    """frost_fwd on the inputs x: the kernel layer of the use_kernel block around it."""
    return _frost_fwd()(
        q=x.q, k=x.k, v=x.v, g=x.g, beta=x.beta, w=x.w, cu_seqlens=x.cu_seqlens, out=out, initial_state=h0,
        final_state=ht, scale=scale, use_l2norm=l2, gate_per_channel=family.per_channel_gate,
        beta_per_channel=family.vector_beta, stream=None, bind=bind,
    )


def run_case(family: Family, case: Case, algorithms: list[str], seed: int) -> int:
    """Checks each algorithm on one input draw (one float64 reference); returns the failures."""
    cfg = InputConfig(family=family, seq_lens=case.seq_lens, H=case.H, HV=case.HV, K=case.K, V=case.V,
                      dtype=torch.bfloat16, state_dtype=case.state_dtype, device=DEVICE,
                      use_qk_l2norm=case.l2norm, with_initial_state=case.initial_state)
    x = make_inputs(cfg, seed)
    if case.strong_decay:
        g = x.g.clone()
        g[::7] = -30.0
        x = dataclasses.replace(x, g=g)
    if case.correlated:  # the block solve's hard case (bf16 emulation: out 8e-3 against the bound 1e-2)
        gen = torch.Generator(device="cpu").manual_seed(seed + 7)
        base = torch.randn(1, x.k.shape[1], x.k.shape[2], generator=gen)
        k = 0.8 * base + 0.6 * torch.randn(x.k.shape, generator=gen)
        x = dataclasses.replace(
            x, k=k.to(device=DEVICE, dtype=x.k.dtype),
            beta=(0.5 + 0.5 * torch.rand(x.beta.shape, generator=gen)).to(device=DEVICE, dtype=x.beta.dtype),
            g=(-0.02 * torch.rand(x.g.shape, generator=gen)).to(device=DEVICE, dtype=x.g.dtype))
    scale = 1.0 / math.sqrt(case.K)
    ref_o, ref_s = REFERENCES[family](*x.args(), **{**x.options(), "scale": scale}, output_final_state=True)
    failures = 0
    outputs = {}
    for algorithm in algorithms:
        try:
            out = torch.full((cfg.T, cfg.HO, case.V), float("nan"), dtype=torch.bfloat16, device=DEVICE)
            ht = (torch.full((cfg.N, cfg.HO, case.V, case.K), float("nan"), dtype=case.state_dtype, device=DEVICE)
                  if case.final_state else None)
            with kernel_block(algorithm):
                _launch(family, x, out, x.initial_state, ht, scale, case.l2norm)
            torch.cuda.synchronize()
            outputs[algorithm] = (out, ht)
            eo = rel_err(out, ref_o)
            es = rel_err(ht, ref_s) if ht is not None else 0.0
            ok = eo <= BOUND and es <= BOUND  # nan fails both comparisons
            print(f"{algorithm:9s} {family.value:5s} {case.name:28s} rel_out={eo:.2e} rel_state={es:.2e} "
                  f"{'PASS' if ok else 'FAIL'}", flush=True)
        except Exception:
            ok = False
            print(f"{algorithm:9s} {family.value:5s} {case.name:28s} ERROR", flush=True)
            traceback.print_exc()
        failures += not ok
    for name in COMPARED:
        if "wgmma" not in outputs or name not in outputs:
            continue
        (o3, s3), (og, sg) = outputs["wgmma"], outputs[name]
        same = torch.equal(o3, og) and (s3 is None or torch.equal(s3, sg))
        print(f"{name} vs wgmma {family.value:5s} {case.name:28s} rel_out={rel_err(og, o3):.2e} "
              f"rel_state={rel_err(sg, s3) if s3 is not None else 0.0:.2e} {'bitwise' if same else 'differ'}",
              flush=True)
    return failures


def _median_ms(step, reps: int, inner: int) -> float:
    """Median over reps of the CUDA-event time of `inner` back-to-back steps, per step (the
    CLI's timer; the caller has warmed up)."""
    from cudnn.cli.bench import cuda_median_ms

    return cuda_median_ms(step, reps, inner, warmup=0)


def time_family(family: Family, algorithm: str, l2: bool, reps: int = 20) -> tuple[float, float]:
    """(kernel ms, call ms) at the bench shape. kernel: the bound launch (frost_fwd's
    BoundLaunch, no checks) BACK_TO_BACK times between two events, so the GPU never waits
    for the host; call: one frost_fwd call (checks, lookup, launch) between the events,
    so the host's time before the launch and its jitter are in it (the only number this
    script printed at first: its pipelined GDN read 0.72 ms where the bench's kernel read 0.47)."""
    cfg = InputConfig(family=family, seq_lens=(4096,) * 8, H=16, K=128, V=128, dtype=torch.bfloat16,
                      device=DEVICE, use_qk_l2norm=l2)
    x = make_inputs(cfg, 0)
    out = torch.empty(cfg.T, 16, 128, dtype=torch.bfloat16, device=DEVICE)
    ht = torch.empty(8, 16, 128, 128, dtype=torch.float32, device=DEVICE)
    scale = 1.0 / math.sqrt(128)
    tensors = dict(q=x.q, k=x.k, v=x.v, g=x.g, beta=x.beta, w=x.w, cu_seqlens=x.cu_seqlens, out=out,
                   initial_state=None, final_state=ht, state_checkpoints=None, values=None)
    stream = torch.cuda.current_stream()
    with kernel_block(algorithm):
        for _ in range(3):
            _launch(family, x, out, None, ht, scale, l2)
        bound = _launch(family, x, out, None, ht, scale, l2, bind=True)
        torch.cuda.synchronize()
        kernel = _median_ms(lambda: bound.launch(tensors, stream), reps, BACK_TO_BACK)
        call = _median_ms(lambda: _launch(family, x, out, None, ht, scale, l2), reps, 1)
    return kernel, call


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", choices=[*FAMILIES, "all"], default="all")
    ap.add_argument("--quick", action="store_true", help="skip the 4096-token cases and the timing")
    ap.add_argument("--algorithm", nargs="+", choices=[*KERNELS, "all"], default=["all"],
                    help="kernel layer(s) to check and time (wgmma: the product's on sm_90a, pipelined: "
                         "elsewhere; the tooling's oracle: SIMT oracle, mma: pipelined's base)")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        return 0
    algorithms = list(ALGORITHMS) if "all" in args.algorithm else list(dict.fromkeys(args.algorithm))
    families = list(FAMILIES.values()) if args.family == "all" else [FAMILIES[args.family]]
    failures = 0
    for family in families:
        for i, case in enumerate(CASES):
            if case.long and args.quick:
                continue
            try:
                failures += run_case(family, case, algorithms, seed=100 + i)
            except Exception:  # inputs or reference failed
                failures += len(algorithms)
                print(f"{'':9s} {family.value:5s} {case.name:28s} ERROR (inputs/reference)", flush=True)
                traceback.print_exc()
    if not args.quick:
        times = {}
        for algorithm in algorithms:
            for family in families:
                for l2 in (False, True):
                    try:
                        ms, call = time_family(family, algorithm, l2)
                        times[algorithm, family, l2] = ms
                        print(f"TIME {algorithm} {family.value:5s} 8x4096 h16 K=V=128 bf16 l2norm={int(l2)}: "
                              f"{ms:.3f} ms kernel ({call:.3f} ms per frost_fwd call)", flush=True)
                    except Exception:
                        failures += 1
                        print(f"TIME {algorithm} {family.value:5s} ERROR", flush=True)
                        traceback.print_exc()
        for old, new in (("mma", "pipelined"), ("pipelined", "wgmma"), *(("wgmma", name) for name in COMPARED)):
            for family in families:
                for l2 in (False, True):
                    if (old, family, l2) in times and (new, family, l2) in times:
                        t_old, t_new = times[old, family, l2], times[new, family, l2]
                        print(f"SUMMARY {family.value:5s} l2norm={int(l2)}: {old} {t_old:.3f} ms  {new} "
                              f"{t_new:.3f} ms  {new}/{old} {t_new / t_old:.2f}  ({t_new * 1e3 / 64:.2f} us "
                              f"per chunk)", flush=True)
    print(f"{'OK' if failures == 0 else f'{failures} FAILED'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
