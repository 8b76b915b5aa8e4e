"""Chunked float64 backward of the gated delta rule (GDN and KDA): explicit formulas, no autograd.

Mirrors FLA's stages (chunk_bwd_dv_local, chunk_bwd_dhu, chunk_bwd_dqkwg,
prepare_wy_repr_bwd, reverse chunk-local cumsum). The forward stages (cumsum, WY, chunk_h)
are recomputed first; nothing is saved from the forward. Notation as in chunk_fwd.py, per
(chunk, head): h = state entering the chunk, dh = dL/d(state leaving the chunk), dO [C, V],
E = exp(G), E_to_end = exp(G_last - G).

    dv_local  dv_o   = scale Aqk^T dO                                            [C, V]
    dhu       (reverse over chunks, dh = dL/d h_final for a sequence's last chunk)
              dv_new = dv_o + (k E_to_end) dh                                     [C, V]
              dh_prev = exp(G_last) * dh + scale (q E)^T dO - w^T dv_new           [K, V]
              (dh_prev of a sequence's first chunk is d_initial_state)
    dqkwg     dq  = scale (dO h^T) E + [gram adjoint of dAqk = scale dO v_new^T, j <= i]_x
              dk  = (v_new dh^T) E_to_end + [same]_y
              dw  = -dv_new h^T
              dG  = q*dq - k*dk,  and row C-1 also gets
                    dG_last = sum_i (k*dk_h)_i + exp(G_last) sum_v h*dh       (dk_h = first dk term)
    wy_bwd    dT = dv_new (beta v)^T + dw (beta k E)^T ;  dA = -T^T dT T^T  (j < i)
              d(beta v) = T^T dv_new ;  d(beta k E) = T^T dw
              d(beta k) = d(beta k E) E + [gram adjoint of dA]_x ;  dk += beta d(beta k) + [..]_y
              dv = beta d(beta v) ;  dbeta = sum_c k d(beta k) + sum_v v d(beta v)
              dG += (beta k E) * d(beta k E) + [gram adjoint]_G
    cumsum    dgamma_i = sum_{j>=i} dG_j  (reverse cumsum within the chunk)

The gram adjoint is in decay_gram.py; for Kg = 1 every dG term is summed over channels.
Zero-padded rows of a partial chunk get no gradient except through G_last, which the
reverse cumsum hands to the chunk's real rows (G at the padded rows equals G_last).

Precision: dgamma sums O(1) terms that cancel when the decay is strong (true dgamma ~ alpha):
at gamma ~ -12 float64 gives ~1e-10 relative error on dg here, against ~1e-15 elsewhere;
low-precision kernels should accumulate dG and its reverse cumsum in fp32 at least.
"""
from __future__ import annotations

import dataclasses

import torch

from tests.reference.chunk_fwd import (
    chunk_h_fwd,
    chunk_local_cumsum,
    chunk_scaled_dot_kkt,
    recompute_w_u,
    solve_tril,
)
from tests.reference.chunking import ChunkLayout
from tests.reference.decay_gram import decayed_gram, decayed_gram_bwd


def _sum_to_gate(x: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
    """Reduces a [.., K] channel term to the gate width Kg of G (sum when Kg = 1)."""
    return x.sum(-1, keepdim=True) if G.shape[-1] == 1 else x


def chunk_local_cumsum_bwd(dG: torch.Tensor) -> torch.Tensor:
    """Adjoint of the chunk-local inclusive cumsum: a reverse cumsum over rows."""
    return dG.flip(-2).cumsum(-2).flip(-2)


def chunk_bwd_dv_local(q: torch.Tensor, k: torch.Tensor, G: torch.Tensor, dO: torch.Tensor, scale: float) -> torch.Tensor:
    """dv_o [.., C, V] = scale Aqk^T dO: the intra-chunk part of dL/dv_new."""
    return scale * decayed_gram(q, k, G, strict=False).mT @ dO


def chunk_bwd_dhu(
    q: torch.Tensor,
    k: torch.Tensor,
    w: torch.Tensor,
    G: torch.Tensor,
    dO: torch.Tensor,
    dv_local: torch.Tensor,
    dht: torch.Tensor | None,
    layout: ChunkLayout,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reverse state-gradient recurrence.

    Returns dh [NC, HO, K, V] (dL/d state leaving each chunk), the full dv_new
    [NC, HO, C, V] and dh0 [N, HO, K, V] (dL/d state entering each sequence).
    """
    HO, K, V = k.shape[1], k.shape[-1], dO.shape[-1]
    dh = k.new_zeros(layout.num_chunks, HO, K, V)
    dv_new = torch.zeros_like(dv_local)
    dh0 = []
    for n, (first, end) in enumerate(layout.seq_chunks):
        grad = k.new_zeros(HO, K, V) if dht is None else dht[n].clone()
        for c in reversed(range(first, end)):
            dh[c] = grad
            G_last = G[c, :, -1:, :]  # [HO, 1, Kg]
            dv_new[c] = dv_local[c] + (k[c] * torch.exp(G_last - G[c])) @ grad
            q_from_start = q[c] * torch.exp(G[c])
            grad = torch.exp(G_last).mT * grad + scale * q_from_start.mT @ dO[c] - w[c].mT @ dv_new[c]
        dh0.append(grad)
    return dh, dv_new, torch.stack(dh0) if dh0 else k.new_zeros(0, HO, K, V)


def chunk_bwd_dqkwg(
    q: torch.Tensor,
    k: torch.Tensor,
    v_new: torch.Tensor,
    h: torch.Tensor,
    dh: torch.Tensor,
    dO: torch.Tensor,
    dv_new: torch.Tensor,
    G: torch.Tensor,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-chunk gradients from the output and the state hand-off: (dq, dk, dw, dG).

    h [.., K, V] is the state entering the chunk, dh [.., K, V] the gradient of the state
    leaving it. dk and dG here are partial (the WY part is added by prepare_wy_repr_bwd).
    """
    E = torch.exp(G)
    G_last = G[..., -1:, :]  # [.., 1, Kg]
    E_to_end = torch.exp(G_last - G)

    dq_inter = scale * (dO @ h.mT) * E
    dAqk = scale * (dO @ v_new.mT)
    dq_intra, dk_intra, dG_intra = decayed_gram_bwd(dAqk, q, k, G, strict=False)
    dk_h = (v_new @ dh.mT) * E_to_end
    dw = -(dv_new @ h.mT)

    dq = dq_inter + dq_intra
    dk = dk_intra + dk_h
    dG = _sum_to_gate(q * dq_inter - k * dk_h, G) + dG_intra
    decay_term = torch.exp(G_last[..., 0, :]) * _sum_to_gate((h * dh).sum(-1), G)  # [.., Kg]
    dG_last = _sum_to_gate(k * dk_h, G).sum(-2) + decay_term
    dG[..., -1, :] += dG_last
    return dq, dk, dw, dG


def prepare_wy_repr_bwd(
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    G: torch.Tensor,
    T: torch.Tensor,
    dw: torch.Tensor,
    du: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Adjoint of A/T/w/u through k, v, beta and G: returns (dk, dv, dbeta [.., C, 1], dG)."""
    E = torch.exp(G)
    kb = beta * k
    kbE = kb * E
    bv = beta * v

    dT = du @ bv.mT + dw @ kbE.mT
    d_bv = T.mT @ du
    d_kbE = T.mT @ dw
    dA = -(T.mT @ dT @ T.mT)
    d_kb_A, dk_A, dG_A = decayed_gram_bwd(dA, kb, k, G, strict=True)

    d_kb = d_kbE * E + d_kb_A
    dk = beta * d_kb + dk_A
    dv = beta * d_bv
    dbeta = (k * d_kb).sum(-1, keepdim=True) + (v * d_bv).sum(-1, keepdim=True)
    dG = _sum_to_gate(kbE * d_kbE, G) + dG_A
    return dk, dv, dbeta, dG


@dataclasses.dataclass(frozen=True)
class ChunkGrads:
    """Gradients w.r.t. the chunk-packed, pre-processed inputs of chunk_delta_rule_fwd."""

    dq: torch.Tensor
    dk: torch.Tensor
    dv: torch.Tensor
    dgamma: torch.Tensor
    dbeta: torch.Tensor
    dh0: torch.Tensor  # [N, HO, K, V], FLA orientation


@torch.no_grad()
def chunk_delta_rule_bwd(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    gamma: torch.Tensor,
    beta: torch.Tensor,
    layout: ChunkLayout,
    scale: float,
    h0: torch.Tensor | None,
    dO: torch.Tensor,
    dht: torch.Tensor | None,
) -> ChunkGrads:
    """All backward stages; inputs as chunk_delta_rule_fwd plus dO [NC,HO,C,V] and
    dht [N,HO,K,V] (gradient of the final state, FLA orientation) or None."""
    # Recompute the forward stages (the GPU backward keeps no forward intermediates either).
    G = chunk_local_cumsum(gamma)
    T = solve_tril(chunk_scaled_dot_kkt(k, beta, G))
    w, u = recompute_w_u(k, v, beta, G, T)
    h, v_new, _ = chunk_h_fwd(k, w, u, G, layout, h0)

    dv_local = chunk_bwd_dv_local(q, k, G, dO, scale)
    dh, dv_new, dh0 = chunk_bwd_dhu(q, k, w, G, dO, dv_local, dht, layout, scale)
    dq, dk_o, dw, dG_o = chunk_bwd_dqkwg(q, k, v_new, h, dh, dO, dv_new, G, scale)
    dk_wy, dv, dbeta, dG_wy = prepare_wy_repr_bwd(k, v, beta, G, T, dw, dv_new)
    dgamma = chunk_local_cumsum_bwd(dG_o + dG_wy)
    return ChunkGrads(dq=dq, dk=dk_o + dk_wy, dv=dv, dgamma=dgamma, dbeta=dbeta, dh0=dh0)
