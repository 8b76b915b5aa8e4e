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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", default="gdn", choices=("gdn", "kda", "gdn2"))
    ap.add_argument("--stages", default="states,chain,grads")
    args = ap.parse_args()
    import torch

    from la_frost_bwd_smoke import grads_buffers, run_bwd
    from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs
    from tests.reference.preprocess import Family

    cfg = InputConfig(family=Family(args.family), seq_lens=(4096,) * 8, H=16, K=128, V=128,
                      dtype=torch.bfloat16, device="cuda")
    x = make_inputs(cfg, 0)
    # unit-norm keys and a moderate gate, as the timing in la_frost_bwd_smoke.py uses
    x = dataclasses.replace(x, k=torch.nn.functional.normalize(x.k.float(), dim=-1).to(x.k.dtype), g=x.g * 0.5)
    dO, _ = make_grad_outputs(cfg, 1)
    out = grads_buffers(x, "cuda")
    stages = tuple(args.stages.split(","))
    ws = run_bwd(x, dO, None, False, out)
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
