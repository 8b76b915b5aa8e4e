"""The decayed intra-chunk Gram matrix and its explicit adjoint.

Both intra-chunk products of the chunked delta rule (the WY matrix A and the causal
q-k attention) have the form, per (chunk, head), rows i and columns j of one chunk:

    M_ij = sum_c x_ic y_jc exp(G_ic - G_jc)     for j < i (strict) or j <= i (inclusive)

G [.., C, Kg] is the chunk-local cumulative log-gate; Kg = 1 is a scalar gate (GDN), where
M = (x y^T) * exp(G_i - G_j), and Kg = K is KDA's per-channel gate.

Adjoint, for an upstream dM (entries outside the mask ignored), with the masked decay
E_ijc = exp(G_ic - G_jc):

    dx_ic = sum_j dM_ij y_jc E_ijc      dy_jc = sum_i dM_ij x_ic E_ijc
    dG    = x * dx - y * dy             (summed over channels when Kg = 1)

(G_ic enters row i with a + sign and column i with a - sign; the diagonal cancels.)

Numerics: the exponent is only formed where j <= i, where it is G_i - G_j = sum of the
gates strictly after j up to i, <= 0 for log gates, so it never overflows. This reference
builds the pairwise [.., C, C, K] decay directly (float64) in blocks of leading items to
bound memory. A kernel that factorises it as (x_i e^{G_i - G_r}) (y_j e^{G_r - G_j}) around a
reference row r must bound |G_r - G_j|: over a sub-chunk of L rows with per-token log-gate
>= lb this is L * |lb| (16 * 5 = 80 < ln(FLT_MAX) ~ 88.7 for fp32 with gate_lower_bound -5).
"""
from __future__ import annotations

from typing import Callable

import torch

# Per block of leading items the per-channel path materialises [B, C, C, K] float64
# values; 2**24 of them is 128 MiB, small enough for CPU test machines.
_BLOCK_ELEMENTS = 1 << 24


def causal_mask(C: int, strict: bool, device: torch.device) -> torch.Tensor:
    """[C, C] bool: j < i (strict) or j <= i."""
    i = torch.arange(C, device=device)
    return (i[None, :] < i[:, None]) if strict else (i[None, :] <= i[:, None])


def _scalar_decay(G: torch.Tensor, strict: bool) -> torch.Tensor:
    """G [.., C, 1] -> exp(G_i - G_j) [.., C, C], zero outside the mask."""
    g = G[..., 0]
    diff = g[..., :, None] - g[..., None, :]
    mask = causal_mask(g.shape[-1], strict, G.device)
    return torch.exp(diff.masked_fill(~mask, float("-inf")))


def _channel_decay(G: torch.Tensor, strict: bool) -> torch.Tensor:
    """G [.., C, K] -> exp(G_ic - G_jc) [.., C, C, K], zero outside the mask."""
    diff = G[..., :, None, :] - G[..., None, :, :]
    mask = causal_mask(G.shape[-2], strict, G.device)
    return torch.exp(diff.masked_fill(~mask[..., None], float("-inf")))


def _blocked(fn: Callable[..., tuple[torch.Tensor, ...]], *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Applies fn over blocks of the flattened leading dims (all but the last two)."""
    lead = tensors[0].shape[:-2]
    flat = [t.reshape(-1, *t.shape[-2:]) for t in tensors]
    items = flat[0].shape[0]
    C, K = tensors[0].shape[-2], max(t.shape[-1] for t in tensors)
    step = max(1, _BLOCK_ELEMENTS // max(1, C * C * K))
    pieces = [fn(*(t[s : s + step] for t in flat)) for s in range(0, items, step)]
    if not pieces:
        pieces = [fn(*flat)]
    outs = tuple(torch.cat(parts, dim=0) for parts in zip(*pieces))
    return tuple(o.reshape(*lead, *o.shape[1:]) for o in outs)


def decayed_gram(x: torch.Tensor, y: torch.Tensor, G: torch.Tensor, strict: bool) -> torch.Tensor:
    """M [.., C, C] from x [.., C, K], y [.., C, K], G [.., C, Kg]."""
    if G.shape[-1] == 1:
        return (x @ y.mT) * _scalar_decay(G, strict)

    def block(xb, yb, Gb):
        return (torch.einsum("bic,bjc,bijc->bij", xb, yb, _channel_decay(Gb, strict)),)

    return _blocked(block, x, y, G)[0]


def decayed_gram_bwd(
    dM: torch.Tensor, x: torch.Tensor, y: torch.Tensor, G: torch.Tensor, strict: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Adjoint of decayed_gram: returns (dx [.., C, K], dy [.., C, K], dG [.., C, Kg])."""
    if G.shape[-1] == 1:
        P = dM * _scalar_decay(G, strict)
        dx, dy = P @ y, P.mT @ x
    else:

        def block(dMb, xb, yb, Gb):
            E = _channel_decay(Gb, strict)
            return torch.einsum("bij,bjc,bijc->bic", dMb, yb, E), torch.einsum("bij,bic,bijc->bjc", dMb, xb, E)

        dx, dy = _blocked(block, dM, x, y, G)
    dG = x * dx - y * dy
    if G.shape[-1] == 1:
        dG = dG.sum(-1, keepdim=True)
    return dx, dy, dG
