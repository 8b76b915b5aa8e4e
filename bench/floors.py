"""Byte and FLOP floors of the linear-attention cases the bench times, and the rates of the
GPU they run on, measured in the same process.

Byte floor: every operand the call must read and every result it must write, once, with
nothing in between (no intermediate in global memory): the forward reads q, k, v, the gates
g, beta (GDN-2: its erase gate b per channel and write gate w) and writes o; forward +
backward also reads them again with dO and writes dq, dk, dv, dg, dbeta (GDN-2: dw). At the
bench shape (8 x 4096 tokens, 16 heads, K = V = 128, bf16 rows, fp32 gates) GDN's forward
is 541 MB.

FLOP floor: the matrix products of the chunked algorithm (chunks of C = 64 tokens, per
head), counted as the kernels compute them (dense C x C products, the causal masks not
discounted), 2 FLOP per multiply-add:
- forward: the Grams M = kb k^T and P = q k^T (2 x 2 C^2 K), the unit-triangular inverse
  of I + M ((2/3) C^3), U = T (W0 - KBA S) (2 C K V + 2 C^2 V), the output QA S + P U
  (2 C K V + 2 C^2 V), the state update KD^T U (2 C K V);
- backward (recomputing the states): the states pass without the output (M, the
  inverse, U, the update: 2 C^2 K + (2/3) C^3 + 4 C K V + 2 C^2 V), the chain (both
  Grams 4 C^2 K; dU = P^T dO + KD dS: 2 C^2 V + 2 C K V; dR by the triangular solve:
  C^2 V; dS <- QA^T dO - KBA^T dR: 4 C K V) and the grads (dO S^T, dR S^T, U dS^T: 6 C K
  V; the scores dO U^T, dR U^T: 4 C^2 V; the score adjoints dZp k, dZm k, dZp^T q,
  dZm^T kb: 8 C^2 K).
At the bench shape: 87 GFLOP forward, 325 GFLOP forward + backward.

Rates: a device-to-device copy of BYTES_PROBE bytes (read + write) and a bf16 matmul of
MATMUL_PROBE^3, timed by the product CLI's CUDA-event timer (median of 7), so a floor in
milliseconds is for the GPU the bench ran on.
"""
from __future__ import annotations

import math

CHUNK = 64
FAMILIES = ("gdn", "kda", "gdn2")
BYTES_PROBE = 1 << 30
MATMUL_PROBE = 8192


def _check(family: str) -> None:
    if family not in FAMILIES:
        raise ValueError(f"floors: family must be one of {FAMILIES}, got {family!r}")


def io_bytes(family: str, T: int, H: int, K: int, V: int, backward: bool, io: int = 2, gate: int = 4) -> int:
    """Bytes a call must move: io-byte rows, gate-byte gates (GDN, KDA: fp32 g and beta;
    GDN-2's b and w are io rows like k and v)."""
    _check(family)
    g = T * H * (K if family in ("kda", "gdn2") else 1) * gate
    beta = T * H * K * io if family == "gdn2" else T * H * gate
    w = T * H * V * io if family == "gdn2" else 0
    inputs = T * H * (2 * K + V) * io + g + beta + w
    out = T * H * V * io
    if not backward:
        return inputs + out
    grads = inputs  # dq, dk, dv, dg, dbeta (, dw): one per input, same shapes and dtypes
    return inputs + out + (inputs + out) + grads  # forward; backward reads inputs and dO


def chunk_flops(K: int, V: int, backward: bool, C: int = CHUNK) -> float:
    """FLOP of one (chunk, head) (module docstring): forward, or forward + backward."""
    inverse = 2 * C ** 3 / 3
    fwd = 4 * C * C * K + inverse + 6 * C * K * V + 4 * C * C * V
    if not backward:
        return fwd
    states = 2 * C * C * K + inverse + 4 * C * K * V + 2 * C * C * V
    chain = 4 * C * C * K + 3 * C * C * V + 6 * C * K * V
    grads = 8 * C * C * K + 4 * C * C * V + 6 * C * K * V
    return fwd + states + chain + grads


def flops(lengths: list[int], H: int, K: int, V: int, backward: bool) -> float:
    """FLOP of a call over sequences of these lengths (each chunked on its own)."""
    chunks = sum(math.ceil(n / CHUNK) for n in lengths)
    return chunks * H * chunk_flops(K, V, backward)


def measured_rates() -> tuple[float, float]:
    """(bytes per second of a device copy, counting its read and its write; bf16 dense
    FLOP per second) on the current CUDA device."""
    import torch

    from cudnn.cli.bench import cuda_median_ms  # the product CLI's event timer

    x = torch.empty(BYTES_PROBE // 2, dtype=torch.bfloat16, device="cuda").normal_()
    y = torch.empty_like(x)
    copy_ms = cuda_median_ms(lambda: y.copy_(x), 7, 1)
    del x, y
    a = torch.randn(MATMUL_PROBE, MATMUL_PROBE, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(MATMUL_PROBE, MATMUL_PROBE, dtype=torch.bfloat16, device="cuda")
    mm_ms = cuda_median_ms(lambda: a @ b, 7, 1)
    return 2 * BYTES_PROBE / (copy_ms * 1e-3), 2 * MATMUL_PROBE ** 3 / (mm_ms * 1e-3)


def floor_ms(family: str, lengths: list[int], H: int, K: int, V: int, backward: bool,
             rates: tuple[float, float]) -> tuple[float, float]:
    """(byte floor, FLOP floor) in ms at the given rates (measured_rates)."""
    byte_rate, flop_rate = rates
    T = sum(lengths)
    return (io_bytes(family, T, H, K, V, backward) / byte_rate * 1e3,
            flops(lengths, H, K, V, backward) / flop_rate * 1e3)
