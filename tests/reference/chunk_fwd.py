"""Chunked float64 forward of the gated delta rule (GDN and KDA), one function per stage.

Stage names follow FLA (cumsum, chunk_scaled_dot_kkt, solve_tril, recompute_w_u, chunk_h,
chunk_o) so the GPU kernels can mirror them. Tensors are chunk-packed [NC, HO, C, ..]
(chunking.py); below, per (chunk, head), C = BT rows i, j; Kg = 1 (GDN scalar gate) or K
(KDA per-channel gate); beta is [C, 1]; h = state entering the chunk, FLA orientation [K, V].

    cumsum      G_i  = sum_{j<=i} gamma_j                                   G      [C, Kg]
    kkt         A_ij = beta_i sum_c k_ic k_jc exp(G_ic - G_jc),  j < i      A      [C, C]
    solve_tril  T    = (I + A)^-1  (unit lower; forward substitution)        T      [C, C]
    w_u         w    = T (beta k exp(G)),   u = T (beta v)                    w [C, K], u [C, V]
    chunk_h     v_new = u - w h                                               v_new  [C, V]
                h_next = exp(G_last) * h + (k exp(G_last - G))^T v_new        h_next [K, V]
    chunk_o     o    = scale (q exp(G)) h + scale Aqk v_new                   o      [C, V]
                Aqk_ij = sum_c q_ic k_jc exp(G_ic - G_jc),  j <= i            Aqk    [C, C]

(exp(G_last) * h scales row c of h by exp(G_last,c).) Derivation: with D_i = Diag(exp G_i),
unrolling S_i = D(alpha_i) S_{i-1} + k_i u_i^T from S_0 = h gives
S_i = D_i h + sum_{j<=i} D_i D_j^-1 k_j u_j^T. Substituting into
u_i = beta_i (v_i - (D(alpha_i) S_{i-1})^T k_i) gives (I + A) U = beta V - beta (k exp G) h,
so U = u - w h = v_new; o_i = scale S_i^T q_i and h_next = S_C then read off directly.

Range: every exponent formed is <= 0 for log gates (exp G and exp(G_last - G) are decays
from the chunk start / to the chunk end; the pairwise ones are masked to j <= i, see
decay_gram.py), so nothing overflows whatever the chunk's total decay.
"""
from __future__ import annotations

import dataclasses

import torch

from tests.reference.chunking import ChunkLayout
from tests.reference.decay_gram import decayed_gram


def chunk_local_cumsum(gamma: torch.Tensor) -> torch.Tensor:
    """[.., C, Kg] per-token log-gates -> chunk-local inclusive cumulative sums."""
    return gamma.cumsum(dim=-2)


def chunk_scaled_dot_kkt(k: torch.Tensor, beta: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
    """A [.., C, C] = strictly lower part of (beta_i k_i . k_j decayed from j to i)."""
    return decayed_gram(beta * k, k, G, strict=True)


def solve_tril(A: torch.Tensor) -> torch.Tensor:
    """T = (I + A)^-1 for strictly lower A, row by row: T_i = e_i - sum_{j<i} A_ij T_j."""
    C = A.shape[-1]
    T = torch.zeros_like(A)
    for i in range(C):
        row = -(A[..., i : i + 1, :i] @ T[..., :i, :])[..., 0, :]
        row[..., i] += 1.0
        T[..., i, :] = row
    return T


def recompute_w_u(
    k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, G: torch.Tensor, T: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """w = T (beta k exp(G)) [.., C, K] and u = T (beta v) [.., C, V]."""
    return T @ (beta * k * torch.exp(G)), T @ (beta * v)


def chunk_h_fwd(
    k: torch.Tensor,
    w: torch.Tensor,
    u: torch.Tensor,
    G: torch.Tensor,
    layout: ChunkLayout,
    h0: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inter-chunk state recurrence, sequential over each sequence's chunks.

    Returns h [NC, HO, K, V] (state entering each chunk), v_new [NC, HO, C, V] and the
    final state [N, HO, K, V] (h0, or zero, for an empty sequence).
    """
    HO, K, V = k.shape[1], k.shape[-1], u.shape[-1]
    h = k.new_zeros(layout.num_chunks, HO, K, V)
    v_new = torch.zeros_like(u)
    finals = []
    for n, (first, end) in enumerate(layout.seq_chunks):
        state = k.new_zeros(HO, K, V) if h0 is None else h0[n]
        for c in range(first, end):
            h[c] = state
            v_new[c] = u[c] - w[c] @ state
            G_last = G[c, :, -1:, :]  # [HO, 1, Kg]
            k_to_end = k[c] * torch.exp(G_last - G[c])
            state = torch.exp(G_last).mT * state + k_to_end.mT @ v_new[c]
        finals.append(state)
    final = torch.stack(finals) if finals else k.new_zeros(0, HO, K, V)
    return h, v_new, final


def chunk_o_fwd(
    q: torch.Tensor, k: torch.Tensor, v_new: torch.Tensor, h: torch.Tensor, G: torch.Tensor, scale: float
) -> torch.Tensor:
    """o [.., C, V] = scale ((q exp G) h + causal decayed (q k^T) v_new)."""
    inter = (q * torch.exp(G)) @ h
    intra = decayed_gram(q, k, G, strict=False) @ v_new
    return scale * (inter + intra)


@dataclasses.dataclass(frozen=True)
class ChunkForward:
    """Every forward stage's product, chunk-packed (the backward recomputes these)."""

    G: torch.Tensor
    A: torch.Tensor
    T: torch.Tensor
    w: torch.Tensor
    u: torch.Tensor
    h: torch.Tensor
    v_new: torch.Tensor
    o: torch.Tensor
    final_state: torch.Tensor


@torch.no_grad()
def chunk_delta_rule_fwd(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    gamma: torch.Tensor,
    beta: torch.Tensor,
    layout: ChunkLayout,
    scale: float,
    h0: torch.Tensor | None,
) -> ChunkForward:
    """All stages on chunk-packed inputs q, k [NC,HO,C,K], v [NC,HO,C,V], gamma [NC,HO,C,Kg],
    beta [NC,HO,C,1], h0 [N,HO,K,V] (FLA orientation) or None."""
    G = chunk_local_cumsum(gamma)
    A = chunk_scaled_dot_kkt(k, beta, G)
    T = solve_tril(A)
    w, u = recompute_w_u(k, v, beta, G, T)
    h, v_new, final = chunk_h_fwd(k, w, u, G, layout, h0)
    o = chunk_o_fwd(q, k, v_new, h, G, scale)
    return ChunkForward(G=G, A=A, T=T, w=w, u=u, h=h, v_new=v_new, o=o, final_state=final)
