"""One FROST backward at the bench shape inside a CUDA profiler range, for Nsight Compute.

    ncu --profile-from-start off --set full -f -o OUT/bwd \
        python3 bench/frost_bwd_profile.py [--family gdn] [--stages states,chain,grads]

The kernels are compiled (or loaded from FROST_KERNEL_CACHE) and run twice before the
range opens, so the profiled launches are warm and nothing else is captured. Shape: 8 x
4096 tokens, 16 heads, K = V = 128, bf16 (bench/bench_linear_attention.py's shape).
A benchmark tool, not a test: it checks nothing.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "numerics"))


def bench_shape_backward(family: str):
    """(x, dO, out, workspace) of one FROST backward at the bench shape, run once (so its
    kernels are compiled and the workspace filled): the inputs of la_frost_bwd_smoke.py's
    timing (unit-norm keys, a moderate gate)."""
    import torch

    from la_frost_bwd_smoke import grads_buffers, run_bwd
    from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs
    from tests.reference.preprocess import Family

    cfg = InputConfig(family=Family(family), seq_lens=(4096,) * 8, H=16, K=128, V=128,
                      dtype=torch.bfloat16, device="cuda")
    x = make_inputs(cfg, 0)
    x = dataclasses.replace(x, k=torch.nn.functional.normalize(x.k.float(), dim=-1).to(x.k.dtype), g=x.g * 0.5)
    dO, _ = make_grad_outputs(cfg, 1)
    out = grads_buffers(x, "cuda")
    return x, dO, out, run_bwd(x, dO, None, False, out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", default="gdn", choices=("gdn", "kda", "gdn2"))
    ap.add_argument("--stages", default="states,chain,grads")
    args = ap.parse_args()
    import torch

    from la_frost_bwd_smoke import run_bwd

    x, dO, out, ws = bench_shape_backward(args.family)
    stages = tuple(args.stages.split(","))
    for _ in range(2):
        for s in stages:
            run_bwd(x, dO, None, False, out, ws, stages=(s,))
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for s in stages:
        run_bwd(x, dO, None, False, out, ws, stages=(s,))
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print("profiled", args.family, stages, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
