"""The token-by-token float64 delta-rule recurrence shared by GDN, KDA and GDN-2.

All three families are one update with per-family broadcasting (docs/LINEAR_ATTENTION.md §3.1-§3.3), in FLA
orientation S in R^{K x V} per (sequence, output head):

    S'  = Diag(alpha_t) S_{t-1}          alpha_t = exp(gamma_t): scalar (GDN) or [K]
    e_t = S'^T (b_t * k_t)               erase: b = beta (GDN/KDA, scalar) or b in R^K (GDN-2)
    u_t = w_t * v_t - e_t                write: w = beta (GDN/KDA, scalar) or w in R^V (GDN-2)
    S_t = S' + k_t u_t^T
    o_t = scale * S_t^T q_t              (readout after the update)

Each sequence of cu_seqlens starts from its initial state (or zero). All heads of a token
are updated together; tokens and sequences are walked one at a time, so this is meant for
small problems (autograd through it keeps every per-token state alive).
"""
from __future__ import annotations

import torch

from tests.reference.preprocess import Prepared


def delta_rule_recurrence(p: Prepared) -> tuple[torch.Tensor, torch.Tensor]:
    """Runs the recurrence on pre-processed inputs.

    Returns (o [T, HO, V], final_state [N, HO, K, V] in FLA orientation), float64.
    """
    d = p.dims
    zero = p.q.new_zeros(d.HO, d.K, d.V)
    outputs: list[torch.Tensor] = []
    finals: list[torch.Tensor] = []
    for n, (start, end) in enumerate(d.bounds):
        S = zero if p.initial_state is None else p.initial_state[n]
        for t in range(start, end):
            S = torch.exp(p.gamma[t])[:, :, None] * S  # [HO, K or 1, 1] scales rows of S
            erase_key = p.erase[t] * p.k[t]  # [HO, K]
            e = torch.einsum("hkv,hk->hv", S, erase_key)
            u = p.write[t] * p.v[t] - e  # [HO, V]
            S = S + p.k[t][:, :, None] * u[:, None, :]
            outputs.append(p.scale * torch.einsum("hkv,hk->hv", S, p.q[t]))
        finals.append(S)
    o = torch.stack(outputs) if outputs else p.q.new_zeros(0, d.HO, d.V)
    return o, torch.stack(finals)


def to_stored(state: torch.Tensor) -> torch.Tensor:
    """FLA orientation [.., K, V] -> the stored V-major [.., V, K] (X = S^T)."""
    return state.transpose(-1, -2)
