"""Time of the FROST GDN pre-pass (kernels/chunk_inverse.py: A = (I + M)^-1 per chunk and
head, an experiment kernel) at the bench shape, beside its byte floor. A benchmark, not a
test (tests/numerics/test_frost_chunk_inverse.py checks its values).

    PYTHONPATH=$(python3 tools/pythonpath.py):bench python3 bench/frost_chunk_inverse_bench.py [--reps 50]

Shape: 8 x 4096 tokens, 16 heads, K = 128, bf16 k, fp32 gates and beta; l2norm off and on.
"""
from __future__ import annotations

import argparse

from bench_linear_attention import cuda_median_ms


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--seqs", type=int, default=8)
    ap.add_argument("--len", type=int, default=4096)
    args = ap.parse_args()
    import torch

    from cudnn.linear_attention.frost.kernels import chunk_inverse as ci
    from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

    H, K, N, L = 16, 128, args.seqs, args.len
    T = N * L
    dev = "cuda"
    k = torch.nn.functional.normalize(torch.randn(T, H, K, device=dev), dim=-1).to(torch.bfloat16)
    g = torch.nn.functional.logsigmoid(torch.randn(T, H, device=dev)) * 0.5
    beta = torch.rand(T, H, device=dev)
    cu = torch.arange(0, T + 1, L, dtype=torch.int32, device=dev)
    images = torch.empty(ci.chunk_rows(T, N), H, ci.CHUNK * ci.CHUNK, dtype=torch.bfloat16, device=dev)
    moved = k.numel() * 2 + (g.numel() + beta.numel()) * 4 + N * -(-L // ci.CHUNK) * H * ci.IMAGE_BYTES
    print(f"GPU: {torch.cuda.get_device_name()}; GDN pre-pass, {N} x {L} tokens, {H} heads, K = {K}; "
          f"{moved / 1e6:.0f} MB moved (k, gates, beta read; A written); median of {args.reps}")
    for l2 in (False, True):
        cfg = FrostFwdConfig(io_dtype="bfloat16", state_dtype="float32", H=H, HK=H, HV=H, K=K, V=K,
                             gate_per_channel=False, beta_per_channel=False, has_w=False, use_l2norm=l2,
                             has_initial_state=False, has_final_state=True, gate_align16=False)
        fn = ci.compile_chunk_inverse(cfg)
        launch_args = ci.chunk_inverse_args(k, g, beta, cu, images)
        ms = cuda_median_ms(lambda: fn(*launch_args), args.reps, warmup=3)
        print(f"pre-pass l2norm={int(l2)} {ms:7.4f} ms  {moved / ms / 1e9:6.2f} TB/s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
