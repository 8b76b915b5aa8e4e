"""Per-launch CUDA-event times of the cuTile forward (where the time goes).

  PYTHONPATH=$(python3 tools/pythonpath.py) python3 bench/stage_times.py [--reps 20] [--bv 32,64,128]
      [--bwd] [--bwd-occupancy 1,2]

Shapes as bench_linear_attention.py (8 x 4096 tokens, 16 heads, K = V = 128, bf16).
Stages: chunk table, stage 1 (GDN: "wy"; KDA: "wy1" = tier-1 scores for every chunk,
"wy2" = the tier-2 launch, which serves only chunks tier 1 flagged and otherwise exits
per CTA), stage 2 ("chunk") at each V block, and the whole forward.  --bwd adds the
backward's launches by kind (kernels/bwd.py stages) and the whole backward, once per
--bwd-occupancy value (the dqkwg / bwd_wy kernels' CTAs-per-SM hint; the kernels say 1,
2 is compiled on first use).
"""
import argparse
import math

import torch

from bench_linear_attention import cuda_median_ms, make_inputs


def main():
    from cudnn.linear_attention.cutile.kernels.fwd import chunked_fwd, fwd_layout
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--bv", default="64", help="stage-2 V blocks to time, comma-separated")
    p.add_argument("--bwd", action="store_true", help="also time the backward's launches")
    p.add_argument("--bwd-occupancy", default="1",
                   help="dqkwg / bwd_wy occupancy hints to time, comma-separated")
    a = p.parse_args()
    for kda in (False, True):
        q, k, v, g, beta, cu = make_inputs(8, 4096, 16, 128, 128, kda)
        T, H, K = q.shape
        lay = fwd_layout(T, 8, H, K, K, kda=kda, io_dtype=q.dtype, io_itemsize=2,
                         int32_dtype=torch.int32, float32_dtype=torch.float32)
        s = lay.carve(torch.empty(lay.size, dtype=torch.uint8, device="cuda"))
        o = torch.empty_like(v)
        sc = 1 / math.sqrt(K)
        chunked_fwd(q, k, v, g, beta, cu, o, s, kda=kda, scale=sc)
        times = {}
        for stage in ("table",) + (("wy1", "wy2") if kda else ("wy",)):
            times[stage] = cuda_median_ms(lambda: chunked_fwd(
                q, k, v, g, beta, cu, o, s, kda=kda, scale=sc, stages=(stage,)), a.reps)
        for bv in (int(x) for x in a.bv.split(",")):
            times[f"chunk bv={bv}"] = cuda_median_ms(lambda: chunked_fwd(
                q, k, v, g, beta, cu, o, s, kda=kda, scale=sc, bv=bv, stages=("chunk",)),
                a.reps)
        times["all"] = cuda_median_ms(lambda: chunked_fwd(
            q, k, v, g, beta, cu, o, s, kda=kda, scale=sc), a.reps)
        live = int(s["count"].item())   # table rows past the chunk count hold no flags
        flagged = int((s["reroute"][:live] != 0).sum()) if kda else 0
        print(f"{'KDA' if kda else 'GDN'} fwd stages:",
              ", ".join(f"{k_} {v_:.3f} ms" for k_, v_ in times.items()),
              f"(tier-2 chunks: {flagged})" if kda else "", flush=True)
        if a.bwd:
            for occ in (int(x) for x in a.bwd_occupancy.split(",")):
                bwd_stages(kda, (q, k, v, g, beta, cu), a.reps, occ)


def bwd_stages(kda, inputs, reps, occupancy):
    from cudnn.linear_attention.cutile.kernels.bwd import bwd_layout, chunked_bwd
    q, k, v, g, beta, cu = inputs
    T, H, K = q.shape
    lay = bwd_layout(T, 8, H, H, K, K, kda=kda, io_dtype=q.dtype, io_itemsize=2,
                     int32_dtype=torch.int32, float32_dtype=torch.float32)
    s = lay.carve(torch.empty(lay.size, dtype=torch.uint8, device="cuda"))
    d_out = torch.randn_like(v)
    grads = [torch.empty_like(x) for x in (q, k, v, g, beta)]

    def run(stages=None):
        chunked_bwd(q, k, v, g, beta, cu, d_out, *grads, s, kda=kda, scale=1 / math.sqrt(K),
                    stages=stages, occupancy=occupancy)
    run()
    times = {st: cuda_median_ms(lambda: run((st,)), reps)
             for st in ("table", "wy", "recompute", "dhu", "dqkwg", "bwd_wy")}
    times["all"] = cuda_median_ms(run, reps)
    print(f"{'KDA' if kda else 'GDN'} bwd stages (occupancy {occupancy}):",
          ", ".join(f"{k_} {v_:.3f} ms" for k_, v_ in times.items()), flush=True)


if __name__ == "__main__":
    main()
