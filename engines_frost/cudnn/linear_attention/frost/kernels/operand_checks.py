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


def queryless_heads(HK: int, HV: int, HO: int) -> int:
    """The q head count of a launch without q (a forward compiled with write_output=False):
    HO when k is grouped like v, else k's own: what the head rules (HK in {H, HV}, HO =
    max(H, HV)) accept, the heads summary.py's zero stand-in q had."""
    return HO if HK == HV else HK


def check_token_operands(who: str, *, q, k, v, g, beta, w, cu_seqlens, out,
                         gate_per_channel: bool, beta_per_channel: bool,
                         min_seqs: int = 0, queryless: bool = False) -> TokenDims:
    """The checks both launchers share; returns the dims they read off q, k, v and
    cu_seqlens. min_seqs: the fewest sequences cu_seqlens may describe. queryless: a launch
    that reads no q and writes no out (both must be None; H is queryless_heads, HO g's
    head count); otherwise both must be tensors."""
    if queryless:
        for name, t in (("q", q), ("out", out)):
            if t is not None:
                raise fail(who, name, "None for a kernel compiled with write_output=False (it reads no q and "
                           "writes no output)", f"a tensor of dims {list(t.shape)}")
    else:
        for name, t in (("q", q), ("out", out)):
            if t is None:
                raise fail(who, name, "a tensor (None only with write_output=False)", None)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t is not None and t.dim() != 3:
            raise fail(who, name, "rank 3 [T, heads, dim]", list(t.shape))
    lead = k if queryless else q  # the tensor the io dtype, device and T are read off
    device = lead.device
    T, _, K = lead.shape
    HK, HV, V = k.shape[1], v.shape[1], v.shape[2]
    if queryless:
        if g.dim() not in (2, 3):
            raise fail(who, "g", "rank 2 [T, HO] or 3 [T, HO, K]", list(g.shape))
        H = queryless_heads(HK, HV, g.shape[1])
    else:
        H = q.shape[1]
    HO = max(H, HV)
    io = dtype_name(lead)
    if io not in ("bfloat16", "float16"):
        raise fail(who, "k" if queryless else "q", "of dtype bfloat16 or float16", lead.dtype)
    if not queryless:
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
    if not queryless:
        check(who, "out", out, (T, HO, V), (io,), device)
    return TokenDims(T, H, HK, HV, HO, K, V, N, io, device)
