"""The GDN forward in two kernels (kernels/fwd_saved_inverse.py: the pre-pass's A read by the
four-role chain, an experiment) against the product's forward kernel, in one process at
the bench shape: the product, the two kernels together, the chain alone and the pre-pass
alone; with --decay, the test tooling's four-role experiments of that knob too (e.g.
wyc-ws4rawo: the output stored by the copy warpgroup). A benchmark, not a test
(tests/numerics/test_frost_saved_inverse.py and la_frost_smoke.py check values).

    PYTHONPATH=$(python3 tools/pythonpath.py):bench:engines_frost/tests \
        python3 bench/frost_saved_inverse_bench.py [--reps 30] [--l2norm 0 1] [--decay wyc-ws4rawo]

Shape: 8 x 4096 tokens, 16 heads, K = V = 128, bf16 (bench_linear_attention.py's); l2norm
off and on. Kernel times: back-to-back launches, CUDA events, median.
"""
from __future__ import annotations

import argparse
import math

from bench_linear_attention import cuda_median_ms
from frost_stage_times import base_launch
from tests.reference.preprocess import Family


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--l2norm", type=int, nargs="+", default=[0, 1], choices=[0, 1])
    ap.add_argument("--decay", nargs="*", default=[], help="four-role decay knobs timed beside the product")
    args = ap.parse_args()
    import torch

    from cudnn.linear_attention.frost.kernels import fwd
    from cudnn.linear_attention.frost.kernels.fwd_saved_inverse import TwoKernelForward

    print(f"GPU: {torch.cuda.get_device_name()}; GDN forward, 8 x 4096 tokens, 16 heads, K = V = 128, bf16; "
          f"kernel ms, median of {args.reps}")
    scale = 1 / math.sqrt(128)
    stream = torch.cuda.current_stream()
    for l2 in map(bool, args.l2norm):
        checked, _ = base_launch(Family("gdn"), l2norm=l2)
        arch = fwd.device_arch(checked.tensors["q"].device)
        kernel = fwd._compiled(checked.config, arch)
        kargs = kernel.args(checked.tensors, checked.T, checked.N, scale, stream)
        two = TwoKernelForward(checked, scale)
        rows = [("product", lambda: kernel(*kargs))]
        for decay in args.decay:
            from frost_fwd_experiments import tooling_config

            k2 = fwd._compiled(tooling_config(checked.config, "v3", decay=decay), arch)
            rows.append((decay, lambda k2=k2, a2=k2.args(checked.tensors, checked.T, checked.N, scale, stream):
                         k2(*a2)))
        rows += [("pre-pass + chain", two),
                 ("chain alone", lambda: two.chain(*two.chain_args)),
                 ("pre-pass alone", lambda: two.prepass(*two.prepass_args))]
        for _ in range(2):  # two rounds, alternating
            for label, fn in rows:
                ms = cuda_median_ms(fn, args.reps, warmup=3)
                print(f"l2norm={int(l2)} {label:18s} {ms:7.4f} ms", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
