"""bf16 emulation of the FROST vector-gate gradient kernel's per-chunk algebra (test-only).

`grads_vec(...)` follows bwd_grads_vec.py step by step on one chunk, in float64 with a
bf16 rounding wherever the kernel stores or feeds a bf16 operand: the stored states and
values (S, dS, U, dR, dO, q^, k^), the scores dZp, dZm, and the decayed score-adjoint
operands, either as the kernel builds them (a bf16 hi + lo pair, `split=True`), rounded
once (`split=False`, the design the GPU measured at dG 1.6e-2 relative error on one case;
this emulation reproduced that number to two digits) or, `split="tf32"`, as
FrostBwdConfig.vec_tf32_adjoints feeds them to the tf32 MMA (the fp32 value's low 13
mantissa bits dropped: truncation, the worse of the two roundings the tensor core could
apply to an fp32 register read as tf32; the scores are bf16, exact in tf32). Returns dG
per row and channel after the reverse cumsum, i.e. the kernel's dg for one chunk and
output head (with `with_qk`, dq^ and dk^ before the L2-norm adjoint as well).

`exponent` models how the kernel forms the decay factors of those operands in fp32 (the
gates' in-chunk cumsum in fp32, the exponent rounded to fp32, ex2 taken as exact, each
product rounded to fp32): "sub_mul" is decayed_b's FADD then FMUL by log2 e, "fused"
FrostBwdConfig.vec_fast_decay's single FFMA against the reference gate pre-multiplied by
log2 e per channel (rounded once more, and no longer exact when G_row ~ G_ref: the error
of the exponent grows with |G| rather than with |G_ref - G_row|); None keeps them in
float64. Blocks whose decay span reaches SPAN_LIMIT take their diagonal exactly, as the
kernel does.
"""
from __future__ import annotations

import torch

SUB = 16
CHUNK = 64
SPAN_LIMIT = 80.0
LOG2_E = 1.4426950408889634  # cute.arch.exp's constant, used in fp32
EXPONENTS = (None, "sub_mul", "fused")


def bf16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16).double()


def hi_lo(x: torch.Tensor) -> torch.Tensor:
    hi = bf16(x)
    return hi + bf16(x - hi)


def tf32_truncated(x: torch.Tensor) -> torch.Tensor:
    """x (fp32 values) with the low 13 mantissa bits cleared."""
    bits = x.float().view(torch.int32) & ~0x1FFF
    return bits.view(torch.float32).double()


def f32(x: torch.Tensor) -> torch.Tensor:
    return x.float().double()


def decay(G, ref, rows, sign: int, exponent):
    """e^(sign (G_rows - G_ref)) per row and channel as the kernel's decayed_b forms it."""
    if exponent is None:
        return torch.exp(sign * (G[rows] - G[ref]))
    L = f32(torch.tensor(LOG2_E, dtype=torch.float64))
    if exponent == "sub_mul":
        e = f32(f32(sign * (G[rows] - G[ref])) * L)
    elif exponent == "fused":
        e = f32(G[rows] * (sign * L) + f32(G[ref] * (-sign * L)))
    else:
        raise ValueError(f"exponent must be one of {EXPONENTS}, got {exponent!r}")
    return f32(torch.exp2(e))


def grads_vec(S, dS, U, dR, q, k, g, beta, dO, scale, *, split: bool | str = True, exact: bool = False,
              exponent=None, with_qk: bool = False):
    """dg [c, K] of one chunk (c <= 64 real rows), or (dq^, dk^, dg) with with_qk. beta [c]
    (KDA) or [c, K] (GDN-2). exact=True skips every rounding (the factored algebra in
    float64)."""
    R = (lambda x: x) if exact else bf16
    if split not in (True, False, "tf32"):
        raise ValueError(f"split must be True, False or 'tf32', got {split!r}")
    RB = (lambda x: x) if exact else tf32_truncated if split == "tf32" else (hi_lo if split else bf16)
    c, K = k.shape
    C = CHUNK
    pad = C - c
    zero_rows = lambda x: torch.cat([x, x.new_zeros(pad, *x.shape[1:])])  # noqa: E731
    G = torch.cumsum(g, 0) if exponent is None else f32(torch.cumsum(g.float(), 0))
    P = (lambda x: x) if exponent is None else f32   # an fp32 product of the kernel
    G = torch.cat([G, G[-1:].expand(pad, K)])           # padded rows repeat G_last
    q, k, U, dR, dO = (zero_rows(x) for x in (q, k, U, dR, dO))
    beta = zero_rows(beta)
    S, dS, U, dR, dO, q, k = (R(x) for x in (S, dS, U, dR, dO, q, k))
    bcol = beta if beta.dim() == 2 else beta[:, None].expand(C, K)
    kb = k * bcol
    dzp = R(torch.tril(scale * (dO @ U.T)))
    dzm = R(torch.tril(-(dR @ U.T), -1))
    dq = torch.zeros(C, K, dtype=torch.float64)
    dkb = torch.zeros_like(dq)
    dkd = torch.zeros_like(dq)
    tail = torch.exp(G[C - 1]) * (S * dS).sum(1)
    for bi in range(C // SUB):
        rows = slice(bi * SUB, bi * SUB + SUB)
        r, e = bi * SUB, bi * SUB + SUB - 1
        aq = (dO[rows] @ S.T) * scale * torch.exp(G[r])
        akb = -(dR[rows] @ S.T) * torch.exp(G[r])
        ak = (U[rows] @ dS.T) * torch.exp(G[C - 1] - G[e])
        tail = tail + (k[rows] * torch.exp(G[e] - G[rows]) * ak).sum(0)
        diag = bool((G[r] - G[e]).max() < SPAN_LIMIT)   # else the diagonal block exactly
        for sb in range(bi + diag):
            cols = slice(sb * SUB, sb * SUB + SUB)
            b = RB(P(k[cols] * decay(G, r, cols, -1, exponent)))
            aq = aq + dzp[rows, cols] @ b
            akb = akb + dzm[rows, cols] @ b
        for tb in range(bi + 1 - diag, C // SUB):
            cols = slice(tb * SUB, tb * SUB + SUB)
            f = decay(G, e, cols, 1, exponent)
            ak = ak + dzp[cols, rows].T @ RB(P(q[cols] * f)) + dzm[cols, rows].T @ RB(P(P(k[cols] * f) * bcol[cols]))
        down = torch.exp(G[rows] - G[r])
        dq[rows], dkb[rows], dkd[rows] = aq * down, akb * down, ak * torch.exp(G[e] - G[rows])
        if not diag:  # exact_diagonal: pairwise factors e^-(|G_t - G_x|) <= 1 within the block
            f = torch.exp(-(G[rows][:, None] - G[rows][None, :]).abs())   # [t, x, K]
            dq[rows] += torch.einsum("tx,xd,txd->td", dzp[rows, rows], k[rows], f)
            dkb[rows] += torch.einsum("tx,xd,txd->td", dzm[rows, rows], k[rows], f)
            dkd[rows] += torch.einsum("xt,xd,txd->td", dzp[rows, rows], q[rows], f) + \
                torch.einsum("xt,xd,txd->td", dzm[rows, rows], kb[rows], f)
    dG = (q * dq + kb * dkb - k * dkd)[:c]
    dG[-1] += tail
    dg = dG.flip(0).cumsum(0).flip(0)
    if with_qk:
        return dq[:c], (dkd + bcol * dkb)[:c], dg
    return dg
