"""What the cu_seqlens safety (any table is memory-safe, uncovered rows are zeroed) costs
at the bench shape, per GPU engine: a benchmark script, not a test.

Shape: 8 x 4096 tokens (a well-formed table), 16 heads, K = V = 128, bf16 q/k/v, fp32
gates, as bench_linear_attention.py. Budget: at most 1 % of the pass.
- FROST forward: the kernel as it ships against the same kernel with the safety compiled
  out (FrostFwdConfig.skip_stages=("bounds",): bounds read unclamped, no zeroing; a timing
  variant, never launched by the engine); the difference is the cost.
- cuTile forward and backward: the safety is launches of its own on the pass's stream
  (the sanitised table: a clamp and a running max; one zeroing launch per output,
  kernels/seq_bounds.py). Timed alone, back to back, against the whole pass: an upper
  bound of what they add to it.
- FROST backward: its clamps and its zeroing sit inside the three kernels with no timing
  variant; compare the "fwd+bwd" rows of bench_linear_attention.py between this checkout
  and one from before the safety.

Run on the GPU machine from the repo root (the package installed with `[all]`):
  PYTHONPATH=$(python3 tools/pythonpath.py):bench python3 bench/cu_seqlens_cost.py
  [--reps 30] [--family gdn kda]
"""
from __future__ import annotations

import argparse
import math

import torch

from bench_linear_attention import cuda_median_ms, make_inputs

BUDGET = 0.01


def _row(label: str, full_ms: float, cost_ms: float) -> str:
    share = cost_ms / full_ms
    verdict = "within" if share <= BUDGET else "OVER"
    return (f"{label:28s} pass {full_ms:8.3f} ms  safety {cost_ms * 1e3:8.1f} us  "
            f"{share * 100:6.2f} % ({verdict} the {BUDGET:.0%} budget)")


def frost_forward(family: str, reps: int) -> str:
    from frost_stage_times import _launcher
    from tests.reference.preprocess import Family

    shipped, _ = _launcher(Family(family), "v2", ())
    unguarded, _ = _launcher(Family(family), "v2", ("bounds",))
    full = cuda_median_ms(shipped, reps, inner=10)
    bare = cuda_median_ms(unguarded, reps, inner=10)
    return _row(f"{family} FROST forward", full, full - bare)


def cutile(family: str, reps: int) -> list[str]:
    from cudnn.linear_attention.cutile.kernels import seq_bounds
    from cudnn.linear_attention.cutile.kernels.bwd import bwd_layout, chunked_bwd
    from cudnn.linear_attention.cutile.kernels.fwd import chunked_fwd, fwd_layout

    kda = family == "kda"
    q, k, v, g, beta, cu = make_inputs(8, 4096, 16, 128, 128, kda)
    T, H, K = q.shape
    V, N = v.shape[2], cu.numel() - 1
    common = dict(kda=kda, io_dtype=q.dtype, io_itemsize=2, int32_dtype=torch.int32,
                  float32_dtype=torch.float32)
    stream = torch.cuda.current_stream()
    scale = 1 / math.sqrt(K)

    def carve(layout):
        return layout.carve(torch.empty(layout.size, dtype=torch.uint8, device=q.device))

    o = torch.empty(T, H, V, dtype=q.dtype, device=q.device)
    fwd_scratch = carve(fwd_layout(T, N, H, K, V, **common))
    bwd_scratch = carve(bwd_layout(T, N, H, H, K, V, **common))
    d_out = torch.randn_like(o)
    grads = [torch.empty_like(x) for x in (q, k, v, g, beta)]

    def safety(scratch, outputs):
        def run():
            safe = seq_bounds.sanitized_cu_seqlens(cu, T, scratch, stream)
            for out in outputs:
                seq_bounds.zero_uncovered_rows(safe, out, N, stream)
        return run

    fwd = cuda_median_ms(lambda: chunked_fwd(q, k, v, g, beta, cu, o, fwd_scratch, kda=kda,
                                             scale=scale), reps, inner=10)
    bwd = cuda_median_ms(lambda: chunked_bwd(q, k, v, g, beta, cu, d_out, *grads, bwd_scratch,
                                             kda=kda, scale=scale), reps, inner=10)
    return [_row(f"{family} cuTile forward", fwd,
                 cuda_median_ms(safety(fwd_scratch, [o]), reps, inner=10)),
            _row(f"{family} cuTile backward", bwd,
                 cuda_median_ms(safety(bwd_scratch, grads), reps, inner=10))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", nargs="+", default=["gdn", "kda"], choices=["gdn", "kda"])
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    print(f"GPU: {torch.cuda.get_device_name()}; 8 x 4096 tokens, 16 heads, K = V = 128, bf16; "
          f"median of {args.reps} x 10 back-to-back calls")
    for family in args.family:
        for engine in (lambda: [frost_forward(family, args.reps)],
                       lambda: cutile(family, args.reps)):
            try:
                rows = engine()
            except Exception as e:  # report and go on: one missing kit must not hide the rest
                rows = [f"{family}: error: {type(e).__name__}: {str(e)[:200]}"]
            for row in rows:
                print(row, flush=True)


if __name__ == "__main__":
    main()
