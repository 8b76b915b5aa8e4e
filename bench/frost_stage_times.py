"""Where a FROST forward chunk spends its time: the kernel timed with each per-chunk stage
compiled out (the test tooling's skip_stages, engines_frost/tests/frost_fwd_experiments.py),
a benchmark script, not a test.

Without hardware counters, a stage's cost is read as the difference between the full
kernel and the kernel without it (the barriers between stages stay, so each difference is
what that stage adds to the chunk's critical path, including its barrier wait). Results of
the skipped variants are wrong by construction and are not checked; the full kernel is
checked by tests/numerics/la_frost_smoke.py. The last variant leaves out the cu_seqlens
safety instead (bounds read unclamped, no zeroing of uncovered rows; bench/cu_seqlens_cost.py
reports it against its budget).

Run on the GPU machine from the repo root (CuTe DSL importable):
  PYTHONPATH=$(python3 tools/pythonpath.py) python3 bench/frost_stage_times.py [--family gdn kda]
    [--algorithm product] [--reps 20] [--l2norm]
(--algorithm: the kernel layer, built as the test tooling builds it: product (default) what
the product compiles for the shape (wgmma here, on sm_90a), mma the pipelined layer's base,
pipelined forced, wgmma the pipelined layer with the chain's products on warpgroup MMA, whose
"chain" stage is the wgmma chain.
FROST_FWD_GRAM=wgmma with wgmma or product: GDN's Gram stage on warpgroup MMA, fwd_wgmma_gram.py;
GDN's wgmma chain has the decays as factors and no operand stage (fwd_wgmma_scaled.py, the
product's): its "operands" row is the factor rows alone; FROST_FWD_DECAY=folded: the
chain with the decays folded into bf16 operands; =scaled-ws: the warp-specialised kernel,
FROST_FWD_WS_REGS=consumer,producer its setmaxnreg split.)
Shape: 8 x 4096 tokens, 16 heads, K = V = 128, bf16, final state fp32 (the bench shape).
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch

from bench_linear_attention import cuda_median_ms
from tests.reference.inputs import InputConfig, make_inputs
from tests.reference.preprocess import Family

# the test tooling's kernel layers and experiment knobs (frost_fwd_experiments.py)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engines_frost" / "tests"))
from frost_fwd_experiments import (  # noqa: E402
    decay_requested,
    gram_requested,
    rows_requested,
    stores_requested,
    tooling_config,
    ws_regs_requested,
)

VARIANTS = ((), ("rows",), ("operands",), ("gram",), ("chain",), ("rows", "operands", "gram"),
            ("rows", "operands", "gram", "chain"), ("bounds",))
CHUNKS = 4096 // 64


def base_launch(family: Family, device: str = "cuda", l2norm: bool = False):
    """(checked launch, inputs) of the bench shape, with the product's config; device="cpu"
    for enumerating configs without a GPU (tools/gpu/frost_precompile.py); l2norm: q and k
    normalised in the kernel (the rows stage), drawn unnormalised."""
    from cudnn.linear_attention.frost.kernels import fwd

    cfg = InputConfig(family=family, seq_lens=(4096,) * 8, H=16, K=128, V=128,
                      dtype=torch.bfloat16, device=device, use_qk_l2norm=l2norm)
    x = make_inputs(cfg, 0)
    out = torch.empty(cfg.T, 16, 128, dtype=torch.bfloat16, device=device)
    ht = torch.empty(8, 16, 128, 128, dtype=torch.float32, device=device)
    checked = fwd.check_operands(
        q=x.q, k=x.k, v=x.v, g=x.g, beta=x.beta, w=x.w, cu_seqlens=x.cu_seqlens, out=out,
        initial_state=None, final_state=ht, use_l2norm=l2norm,
        gate_per_channel=family.per_channel_gate, beta_per_channel=family.vector_beta)
    return checked, x


def stage_configs(family: Family, algorithm: str, device: str = "cuda", l2norm: bool = False):
    """The kernel config of every timed variant, in VARIANTS order (the full kernel's is the
    product config where `algorithm` is what the product picks)."""
    checked, _ = base_launch(family, device, l2norm)
    return [tooling_config(checked.config, algorithm, skip_stages=skip, gram=gram_requested(), decay=decay_requested(),
                           ws_regs=ws_regs_requested(decay_requested()), rows=rows_requested(),
                           stores=stores_requested()) for skip in VARIANTS]


def _launcher(family: Family, algorithm: str, skip: tuple[str, ...], l2norm: bool = False):
    """(launch(), compile seconds) for the bench shape with `skip` compiled out."""
    from cudnn.linear_attention.frost.kernels import fwd

    checked, x = base_launch(family, l2norm=l2norm)
    kernel_cfg = tooling_config(checked.config, algorithm, skip_stages=skip, gram=gram_requested(),
                                decay=decay_requested(), ws_regs=ws_regs_requested(decay_requested()))
    start = time.perf_counter()
    kernel = fwd._compiled(kernel_cfg, fwd.device_arch(x.q.device))
    compile_s = time.perf_counter() - start
    stream = torch.cuda.current_stream()
    args = kernel.args(checked.tensors, checked.T, checked.N, 1.0 / math.sqrt(128), stream)
    return (lambda: kernel(*args)), compile_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", nargs="+", default=["gdn", "kda"], choices=["gdn", "kda", "gdn2"])
    parser.add_argument("--algorithm", default="product", choices=["product", "mma", "pipelined", "wgmma"])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--l2norm", action="store_true",
                        help="q and k L2-normalised in the kernel (its cost lands in the rows stage)")
    parser.add_argument("--only-full", action="store_true",
                        help="time the full kernel only (for profiling one launch under ncu)")
    parser.add_argument("--variants", nargs="+", metavar="SKIP",
                        help="the variants to time instead of the default list: 'full' or stages joined by "
                             "'+' (e.g. gram inverse chain: the four-role forward's math and chain, "
                             "FROST_FWD_DECAY=wyc-ws4raw or the product's)")
    args = parser.parse_args()
    variants = VARIANTS[:1] if args.only_full else VARIANTS
    if args.variants:
        variants = [() if v == "full" else tuple(v.split("+")) for v in args.variants]
    print(f"GPU: {torch.cuda.get_device_name()}; 8 x 4096, 16 heads, K = V = 128, bf16; "
          f"{args.algorithm}; l2norm={int(args.l2norm)}; median of {args.reps}; us per chunk = ms / {CHUNKS} chunks")
    for name in args.family:
        family = Family(name)
        full = None
        for skip in variants:
            launch, compile_s = _launcher(family, args.algorithm, skip, args.l2norm)
            ms = cuda_median_ms(launch, args.reps, warmup=3)
            full = ms if full is None and not skip else full
            label = "full" if not skip else "without " + "+".join(skip)
            adds = "" if full is None else f"stage adds {(full - ms) / CHUNKS * 1e3:6.2f} us/chunk; "
            print(f"{name:4s} {label:38s} {ms:7.3f} ms {ms / CHUNKS * 1e3:6.2f} us/chunk "
                  f"({adds}compiled in {compile_s:5.1f} s)", flush=True)


if __name__ == "__main__":
    main()
