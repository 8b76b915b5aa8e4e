"""Per-launch CUDA-event times of the cuTile forward (where the time goes).

  PYTHONPATH=engines_cutile:.:bench python bench/stage_times.py
"""
import math

import torch

from bench_linear_attention import cuda_median_ms, make_inputs


def main():
    from cudnn.linear_attention.cutile.kernels.fwd import chunked_fwd, fwd_layout
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
        for stage in ("table", "wy"):
            times[stage] = cuda_median_ms(lambda: chunked_fwd(
                q, k, v, g, beta, cu, o, s, kda=kda, scale=sc, stages=(stage,)), 20)
        for bv in (32, 64, 128):
            times[f"chunk bv={bv}"] = cuda_median_ms(lambda: chunked_fwd(
                q, k, v, g, beta, cu, o, s, kda=kda, scale=sc, bv=bv, stages=("chunk",)), 20)
        print(f"{'KDA' if kda else 'GDN'} fwd stages:",
              ", ".join(f"{k_} {v_:.3f} ms" for k_, v_ in times.items()), flush=True)


if __name__ == "__main__":
    main()
