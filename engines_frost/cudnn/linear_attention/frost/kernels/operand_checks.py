"""Host-side checks of the token operands every FROST launcher takes (the chunked
forward, frost_fwd, and the recurrent one, frost_decode): q, k, v [T, heads, dim] in
bf16 / fp16, the gates, beta (and GDN-2's w), cu_seqlens and the output rows. Each
failure is a ValueError naming the launcher, the argument, what it must be and what it
is. Imports no torch (the tensors come in).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def dtype_name(t) -> str:
    return str(t.dtype).removeprefix("torch.")


def fail(who: str, arg: str, expected: str, got) -> ValueError:
    return ValueError(f"{who}: {arg} must be {expected}, got {got}")


def check(who: str, name, t, shape, dtypes, device) -> None:
    """Unless t is on `device`, of `shape`, one of `dtypes` and contiguous: ValueError."""
    if t.device != device:
        raise fail(who, name, f"on {device} (the device of q)", t.device)
    if tuple(t.shape) != tuple(shape):
        raise fail(who, name, f"of shape {list(shape)}", list(t.shape))
    if dtype_name(t) not in dtypes:
        raise fail(who, name, f"of dtype {' or '.join(dtypes)}", t.dtype)
    if not t.is_contiguous():
        raise fail(who, name, "contiguous (the kernels read and write packed rows)",
                   f"strides {t.stride()}")


@dataclass(frozen=True)
class TokenDims:
    T: int
    H: int
    HK: int
    HV: int
    HO: int
    K: int
    V: int
    N: int
    io: str
    device: Any


def check_token_operands(who: str, *, q, k, v, g, beta, w, cu_seqlens, out,
                         gate_per_channel: bool, beta_per_channel: bool,
                         min_seqs: int = 0) -> TokenDims:
    """The checks both launchers share; returns the dims they read off q, k, v and
    cu_seqlens. min_seqs: the fewest sequences cu_seqlens may describe."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 3:
            raise fail(who, name, "rank 3 [T, heads, dim]", list(t.shape))
    device = q.device
    T, H, K = q.shape
    HK, HV, V = k.shape[1], v.shape[1], v.shape[2]
    HO = max(H, HV)
    io = dtype_name(q)
    if io not in ("bfloat16", "float16"):
        raise fail(who, "q", "of dtype bfloat16 or float16", q.dtype)
    check(who, "q", q, (T, H, K), (io,), device)
    check(who, "k", k, (T, HK, K), (io,), device)
    check(who, "v", v, (T, HV, V), (io,), device)
    check(who, "g", g, (T, HO, K) if gate_per_channel else (T, HO), ("float32",), device)
    if beta_per_channel:
        check(who, "beta", beta, (T, HO, K), (io,), device)
        if w is None:
            raise fail(who, "w", "a [T, HO, V] tensor when beta_per_channel (GDN-2)", None)
        check(who, "w", w, (T, HO, V), (io,), device)
    else:
        check(who, "beta", beta, (T, HO), ("float32",), device)
        if w is not None:
            raise fail(who, "w", "None unless beta_per_channel (GDN-2)", list(w.shape))
    if cu_seqlens.dim() != 1 or cu_seqlens.numel() < min_seqs + 1:
        raise fail(who, "cu_seqlens", f"a 1-D [N + 1] tensor with N >= {min_seqs}",
                   list(cu_seqlens.shape))
    N = cu_seqlens.numel() - 1
    check(who, "cu_seqlens", cu_seqlens, (N + 1,), ("int32",), device)
    check(who, "out", out, (T, HO, V), (io,), device)
    return TokenDims(T, H, HK, HV, HO, K, V, N, io, device)
