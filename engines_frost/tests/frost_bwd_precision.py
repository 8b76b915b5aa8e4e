"""bf16 emulation of the FROST vector-gate gradient kernel's per-chunk algebra (test-only).

`grads_vec(...)` follows bwd_grads_vec.py step by step on one chunk, in float64 with a
bf16 rounding wherever the kernel stores or feeds a bf16 operand: the stored states and
values (S, dS, U, dR, dO, q^, k^), the scores dZp, dZm, and the decayed score-adjoint
operands, either as the kernel builds them (a bf16 hi + lo pair, `split=True`) or rounded
once (`split=False`, the design the GPU measured at dG 1.6e-2 relative error on one case;
this emulation reproduced that number to two digits). Returns dG per row and channel after
the reverse cumsum, i.e. the kernel's dg for one chunk and output head.
"""
from __future__ import annotations

import torch

SUB = 16
CHUNK = 64


def bf16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16).double()


def hi_lo(x: torch.Tensor) -> torch.Tensor:
    hi = bf16(x)
    return hi + bf16(x - hi)


def grads_vec(S, dS, U, dR, q, k, g, beta, dO, scale, *, split: bool = True, exact: bool = False):
    """dg [c, K] of one chunk (c <= 64 real rows). beta [c] (KDA) or [c, K] (GDN-2).
    exact=True skips every rounding (the factored algebra in float64)."""
    R = (lambda x: x) if exact else bf16
    RB = (lambda x: x) if exact else (hi_lo if split else bf16)
    c, K = k.shape
    C = CHUNK
    pad = C - c
    zero_rows = lambda x: torch.cat([x, x.new_zeros(pad, *x.shape[1:])])  # noqa: E731
    G = torch.cumsum(g, 0)
    G = torch.cat([G, G[-1:].expand(pad, K)])           # padded rows repeat G_last
    q, k, U, dR, dO = (zero_rows(x) for x in (q, k, U, dR, dO))
    beta = zero_rows(beta)
    S, dS, U, dR, dO, q, k = (R(x) for x in (S, dS, U, dR, dO, q, k))
    kb = k * (beta if beta.dim() == 2 else beta[:, None])
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
        for sb in range(bi + 1):
            cols = slice(sb * SUB, sb * SUB + SUB)
            b = RB(k[cols] * torch.exp(G[r] - G[cols]))
            aq = aq + dzp[rows, cols] @ b
            akb = akb + dzm[rows, cols] @ b
        for tb in range(bi, C // SUB):
            cols = slice(tb * SUB, tb * SUB + SUB)
            f = torch.exp(G[cols] - G[e])
            ak = ak + dzp[cols, rows].T @ RB(q[cols] * f) + dzm[cols, rows].T @ RB(kb[cols] * f)
        down = torch.exp(G[rows] - G[r])
        dq[rows], dkb[rows], dkd[rows] = aq * down, akb * down, ak * torch.exp(G[e] - G[rows])
    dG = (q * dq + kb * dkb - k * dkd)[:c]
    dG[-1] += tail
    return dG.flip(0).cumsum(0).flip(0)
