"""Float64 references of the span summaries (docs/CONTEXT_PARALLEL.md, the algebra): the affine state map.

For one span (a sequence of cu_seqlens) and output head, each token maps the state it
receives affinely (FLA orientation S [K, V], recurrent.py):

    S_t = A_t S_{t-1} + k_t (w_t * v_t)^T,    A_t = (I - k_t (b_t * k_t)^T) Diag(alpha_t)

so the span maps its entering state S_0 to S_L = M S_0 + D with M = A_L ... A_1 (K x K)
and D the final state from a zero start. Stored (V-major, X = S^T): X_L = X_0 M^T + X_D.

- summary_reference -> (final_state [N, HO, V, K] = X_L from the given initial state or
  zero, transition [N, HO, K, K] = M^T), both built token by token from explicit A_t
  matrices, independently of recurrent.py's vector form.
- summary_bwd_reference -> (d_initial_state [N, HO, V, K], transition [N, HO, K, K] = M):
  the gradient of L = sum_t <o_t, dO_t> + <X_L, d_final_state> w.r.t. X_0, which needs
  neither v nor w (the map is affine, its linear part does not see them):
  dS_{t-1} = A_t^T (dS_t + scale q_t dO_t^T), dS_L = d_final_state (or 0). Stored:
  X_dh0 = X_dht M + X_G with X_G the d_initial_state without d_final_state.

Ports as the graph's summary nodes take them: k [T, HK, K], v [T, HV, V], gates at HO =
g.shape[1] heads; the backward's q [T, H, K] and dO [T, HO, V]. The pre-processing
(l2norm, beta sigmoid, gate domains, safe gates) is preprocess.py's, fed a stand-in for
the port the summary does not have (q forward, v backward), whose values never matter.
"""
from __future__ import annotations

import torch

from tests.reference import preprocess as pp

F64 = torch.float64


def stand_in_heads(known: int, other: int, ho: int) -> int:
    """Heads for the absent q (forward: known = HK, other = HV) or v (backward: known =
    HK, other = H) such that the head rules hold: HK in {H, HV}, max(H, HV) = HO. When k
    is grouped with the absent port's partner (known == other) the absent one takes HO
    heads; otherwise k's heads are the absent port's own."""
    return ho if known == other else known


def _transitions(p: pp.Prepared, t: int) -> torch.Tensor:
    """A_t [HO, K, K] = (I - k (b*k)^T) Diag(alpha) for token t."""
    K = p.dims.K
    eye = torch.eye(K, dtype=F64, device=p.k.device)
    alpha = torch.exp(p.gamma[t]).expand(-1, K)                      # [HO, K]
    erase = torch.einsum("hi,hj->hij", p.k[t], p.erase[t] * p.k[t])  # k (b*k)^T
    return (eye - erase) * alpha[:, None, :]                          # right Diag(alpha)


def summary_reference(family: pp.Family, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
                      beta: torch.Tensor, cu_seqlens: torch.Tensor, *,
                      w: torch.Tensor | None = None, initial_state: torch.Tensor | None = None,
                      opts: pp.Options = pp.Options(), a_log: torch.Tensor | None = None,
                      dt_bias: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(final_state [N, HO, V, K], transition M^T [N, HO, K, K]), float64."""
    T, HK, K = k.shape
    HO = g.shape[1]
    q = k.new_zeros(T, stand_in_heads(HK, v.shape[1], HO), K)
    p = pp.prepare("summary_reference", family, opts, q, k, v, g, beta, cu_seqlens, w=w,
                   initial_state=initial_state, a_log=a_log, dt_bias=dt_bias)
    d = p.dims
    finals, trans = [], []
    for n, (start, end) in enumerate(d.bounds):
        S = p.q.new_zeros(d.HO, d.K, d.V) if p.initial_state is None else p.initial_state[n]
        M = torch.eye(d.K, dtype=F64, device=k.device).expand(d.HO, -1, -1)
        for t in range(start, end):
            A = _transitions(p, t)
            write = p.write[t] * p.v[t]                                     # [HO, V]
            S = A @ S + torch.einsum("hk,hv->hkv", p.k[t], write)
            M = A @ M
        finals.append(S.transpose(-1, -2))
        trans.append(M.transpose(-1, -2))
    return _stack(finals, (d.HO, d.V, d.K), k), _stack(trans, (d.HO, d.K, d.K), k)


def summary_bwd_reference(family: pp.Family, q: torch.Tensor, k: torch.Tensor,
                          g: torch.Tensor, beta: torch.Tensor, cu_seqlens: torch.Tensor,
                          dO: torch.Tensor, *, d_final_state: torch.Tensor | None = None,
                          opts: pp.Options = pp.Options(), a_log: torch.Tensor | None = None,
                          dt_bias: torch.Tensor | None = None
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """(d_initial_state [N, HO, V, K], transition M [N, HO, K, K]), float64."""
    T, H, K = q.shape
    HK, HO, V = k.shape[1], g.shape[1], dO.shape[-1]
    v = q.new_zeros(T, stand_in_heads(HK, H, HO), V)
    w = q.new_zeros(T, HO, V) if family is pp.Family.GDN2 else None
    p = pp.prepare("summary_bwd_reference", family, opts, q, k, v, g, beta, cu_seqlens, w=w,
                   a_log=a_log, dt_bias=dt_bias)
    d = p.dims
    dO = dO.to(F64)
    grads, trans = [], []
    for n, (start, end) in enumerate(d.bounds):
        dS = (p.q.new_zeros(d.HO, d.K, d.V) if d_final_state is None
              else d_final_state[n].to(F64).transpose(-1, -2))
        M = torch.eye(d.K, dtype=F64, device=q.device).expand(d.HO, -1, -1)
        for t in reversed(range(start, end)):
            A = _transitions(p, t)
            dS = A.transpose(-1, -2) @ (dS + p.scale * torch.einsum("hk,hv->hkv", p.q[t], dO[t]))
            M = M @ A
        grads.append(dS.transpose(-1, -2))
        trans.append(M)
    return _stack(grads, (d.HO, d.V, d.K), q), _stack(trans, (d.HO, d.K, d.K), q)


def _stack(rows: list[torch.Tensor], dims: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    if not rows:
        return like.new_zeros(0, *dims, dtype=F64)
    return torch.stack([r.contiguous() for r in rows])
