"""Per-stage CUDA-event times of the cuTile forward (where the time goes).

  PYTHONPATH=engines_cutile:. python bench/stage_times.py
"""
import math

import torch

from bench_linear_attention import cuda_median_ms, make_inputs


def main():
    import cuda.tile as ct
    from cudnn.linear_attention.cutile.kernels import fwd as F
    from cudnn.linear_attention.cutile.kernels.chunk_fwd import la_chunk_fwd_kernel
    from cudnn.linear_attention.cutile.kernels.chunk_table import chunk_table_fwd
    from cudnn.linear_attention.cutile.kernels.wy_fwd import la_wy_fwd_kernel
    for kda in (False, True):
        q, k, v, g, beta, cu = make_inputs(8, 4096, 16, 128, 128, kda)
        T, H, K = q.shape
        lay = F.fwd_layout(T, 8, H, K, K, q.dtype, 2, torch.int32)
        s = lay.carve(torch.empty(lay.size, dtype=torch.uint8, device="cuda"))
        o = torch.empty_like(v)
        st = torch.cuda.current_stream()
        sc = 1 / math.sqrt(K)
        table = s["table"]
        t0 = cuda_median_ms(lambda: chunk_table_fwd(cu, table, s["count"], 8, 64, st), 20)
        t1 = cuda_median_ms(lambda: ct.launch(st, (table.shape[0], H, 1), la_wy_fwd_kernel, (
            q, k, v, g, beta, cu, table, s["w"], s["u"], s["p"], sc, 1, 1, 64, 6, 128, 128,
            kda, False)), 20)
        ph = s["count"].view(1, 1, 1, 1)
        for bv in (32, 64, 128):
            t2 = cuda_median_ms(lambda: ct.launch(st, (8, H, 128 // bv), la_chunk_fwd_kernel, (
                q, k, s["w"], s["u"], s["p"], g, cu, ph, ph, o, sc, 1, 64, 128, bv, kda,
                False, False, False)), 20)
            print(f"{'KDA' if kda else 'GDN'}: table {t0:.3f} ms, wy {t1:.3f} ms, "
                  f"chunk(bv={bv}) {t2:.3f} ms", flush=True)


if __name__ == "__main__":
    main()
