"""What the cu_seqlens safety (any table is memory-safe, uncovered rows are zeroed) costs
at the bench shape, per GPU engine: a benchmark script, not a test.

Shape: 8 x 4096 tokens (a well-formed table), 16 heads, K = V = 128, bf16 q/k/v, fp32
gates, as bench_linear_attention.py. Budget: at most 1 % of the pass.
- FROST forward: the kernel as it ships against the same kernel with the safety compiled
  out (the test tooling's skip_stages=("bounds",), engines_frost/tests/
  frost_fwd_experiments.py: bounds read unclamped, no zeroing, so no zeroing grid row; a
  timing variant, never launched by the engine); the difference is the cost.
- cuTile forward and backward: the safety rides in the chunk-table launch (kernels/
  chunk_table.py, seq_bounds.py: the sanitised table, a clamp and a max scan in
  registers stored as cu_safe, and zeros in the uncovered rows of the pass's outputs:
  o, or the five gradients); no launch of its own. That launch as the pass makes it
  against its timing variant without the safety (safe=False: raw table, no cu_safe, no
  zeroing; never launched by the engine), alternating per round; the difference is the
  cost, against the whole pass.
- FROST backward: its clamps and its zeroing sit inside the three kernels with no timing
  variant; compare the "fwd+bwd" rows of bench_linear_attention.py between this checkout
  and one from before the safety.

Run on the GPU machine from the repo root (the package installed with `[all]`):
  PYTHONPATH=$(python3 tools/pythonpath.py):bench python3 bench/cu_seqlens_cost.py
  [--reps 30] [--family gdn kda]
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import statistics

import torch

from bench_linear_attention import cuda_median_ms, make_inputs

BUDGET = 0.01


def _row(label: str, full_ms: float, cost_ms: float, spread_ms: float | None = None) -> str:
    """One verdict line; with `spread_ms` (half the interquartile range of the paired
    differences) a cost inside the noise says so instead of claiming a side."""
    share = cost_ms / full_ms
    if spread_ms is not None and abs(cost_ms) <= spread_ms and spread_ms / full_ms > BUDGET:
        verdict = "NOT RESOLVED by the run's noise, against"
    else:
        verdict = "within" if share <= BUDGET else "OVER"
    noise = "" if spread_ms is None else f" +- {spread_ms * 1e3:.1f} us"
    return (f"{label:28s} pass {full_ms:8.3f} ms  safety {cost_ms * 1e3:8.1f} us{noise}  "
            f"{share * 100:6.2f} % ({verdict} the {BUDGET:.0%} budget)")


def paired_cost_ms(shipped, bare, reps: int, inner: int = 10) -> tuple[float, float, float]:
    """(median pass, median paired difference, half its interquartile range): the two
    variants alternate round by round, so clock and thermal drift fall on both alike
    (timing each variant in its own block swung the difference by +-5 % of the pass)."""
    full, diffs = [], []
    for _ in range(reps):
        a = cuda_median_ms(shipped, 1, warmup=1, inner=inner)
        b = cuda_median_ms(bare, 1, warmup=1, inner=inner)
        full.append(a)
        diffs.append(a - b)
    q = statistics.quantiles(diffs, n=4)
    return statistics.median(full), statistics.median(diffs), (q[2] - q[0]) / 2


def frost_forward(family: str, reps: int) -> str:
    from frost_stage_times import _launcher
    from tests.reference.preprocess import Family

    shipped, _ = _launcher(Family(family), "product", ())  # what the product compiles
    unguarded, _ = _launcher(Family(family), "product", ("bounds",))
    full, cost, spread = paired_cost_ms(shipped, unguarded, reps)
    return _row(f"{family} FROST forward", full, cost, spread)


def cutile(family: str, reps: int) -> list[str]:
    from cudnn.linear_attention.cutile.kernels.bwd import bwd_layout, chunked_bwd
    from cudnn.linear_attention.cutile.kernels.chunk_table import chunk_table_fwd
    from cudnn.linear_attention.cutile.kernels.fwd import BT, chunked_fwd, fwd_layout

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
    grads = [torch.empty_like(x) for x in (q, k, v, g, beta)]   # H = HV: no group partials

    def table(scratch, outputs, safe):
        return lambda: chunk_table_fwd(cu, scratch, T, BT, stream, zeroed=outputs, safe=safe)

    fwd = cuda_median_ms(lambda: chunked_fwd(q, k, v, g, beta, cu, o, fwd_scratch, kda=kda,
                                             scale=scale), reps, inner=10)
    bwd = cuda_median_ms(lambda: chunked_bwd(q, k, v, g, beta, cu, d_out, *grads, bwd_scratch,
                                             kda=kda, scale=scale), reps, inner=10)
    rows = []
    for label, full, scratch, outputs in (("forward", fwd, fwd_scratch, (o,)),
                                          ("backward", bwd, bwd_scratch, tuple(grads))):
        _, cost, spread = paired_cost_ms(table(scratch, outputs, True),
                                         table(scratch, outputs, False), reps)
        rows.append(_row(f"{family} cuTile {label}", full, cost, spread))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", nargs="+", default=["gdn", "kda"], choices=["gdn", "kda"])
    parser.add_argument("--reps", type=int, default=60)
    args = parser.parse_args()
    print(f"GPU: {torch.cuda.get_device_name()}; 8 x 4096 tokens, 16 heads, K = V = 128, bf16; "
          f"median of {args.reps} x 10 back-to-back calls; FROST kernels and cuTile chunk-table "
          f"launches: shipped and unguarded variants alternate per round, cost = median "
          f"paired difference")
    has_cutile = importlib.util.find_spec("cuda") is not None and \
        importlib.util.find_spec("cuda.tile") is not None
    for family in args.family:
        if not has_cutile:
            print(f"{family} cuTile: absent (cuda.tile is not installed)")
        for engine in (lambda: [frost_forward(family, args.reps)],
                       *([lambda: cutile(family, args.reps)] if has_cutile else [])):
            try:
                rows = engine()
            except Exception as e:  # report and go on: one missing kit must not hide the rest
                rows = [f"{family}: error: {type(e).__name__}: {str(e)[:200]}"]
            for row in rows:
                print(row, flush=True)


if __name__ == "__main__":
    main()
