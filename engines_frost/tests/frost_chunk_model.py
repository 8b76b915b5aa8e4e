"""Float64 CPU model of the FROST forward kernel's chunk algorithm (test-only).

It follows the kernel step by step (kernels/NOTES.md): per (sequence, output head) a
serial walk over chunks of C tokens, the last one partial; inside a chunk

    Gam  = inclusive cumsum of the log gates (per channel for vector gates)
    kb_t = b_t * k_t (GDN-2) or beta_t k_t
    M_ts = sum_d kb_t[d] k_s[d] exp(Gam_t[d] - Gam_s[d])          s < t
    P_ts = scale sum_d q_t[d] k_s[d] exp(Gam_t[d] - Gam_s[d])     s <= t
    RHS  = (w * v or beta v) - (kb * exp(Gam)) S ;  (I + M) U = RHS   (forward substitution)
    O    = scale (q * exp(Gam)) S + P U
    S   <- exp(Gam_last) * S + (k * exp(Gam_last - Gam))^T U

with S [K, V] in FLA orientation (the stored state is S^T). ``decay_mode`` selects how
the pairwise decays are formed: "pairwise" is the oracle (exp of each difference), "factored" is
the mma layer's 16-row sub-block factorisation (exp(Gam_t - Gam_r) exp(Gam_r - Gam_s) through a
reference row r, with the exact pairwise fallback for diagonal blocks whose decay span
exceeds SPAN_LIMIT) together with the mma layer's blocked solve (16x16 diagonal inverses, block
forward substitution); "factored_ke" is the pipelined layer's variant of it, the B side of tile (i, j) formed
as KE_j X_ij = (k_s exp(Gam_e - Gam_s)) exp(Gam_r - Gam_e) through e, the last row of block
j (padded rows of a partial chunk repeat the last real row's Gam). All must agree with
tests/reference naive_recurrent_* to ~1e-12.
"""
from __future__ import annotations

import torch

CHUNK = 64
SUB = 16
SPAN_LIMIT = 80.0  # nats; below it exp(+span) stays far from fp32 overflow (e^88)


def _l2norm(x: torch.Tensor) -> torch.Tensor:
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def _pairwise(a: torch.Tensor, b: torch.Tensor, gam: torch.Tensor, lower_incl: bool) -> torch.Tensor:
    """sum_d a_t[d] b_s[d] exp(gam_t[d] - gam_s[d]), masked to s < t (or s <= t)."""
    c = a.shape[0]
    diff = gam[:, None, :] - gam[None, :, :]  # [t, s, K]
    mask = torch.tril(torch.ones(c, c, dtype=torch.bool), 0 if lower_incl else -1)
    diff = torch.where(mask[:, :, None], diff, torch.full_like(diff, -torch.inf))
    return torch.einsum("td,sd,tsd->ts", a, b, torch.exp(diff))


def _b_side(b, gam, j0, j1, r, via_block_end):
    """k_s exp(Gam_r - Gam_s) for the rows s of block j: directly (mma) or as KE_j X_ij (pipelined)."""
    if not via_block_end:
        return b[j0:j1] * torch.exp(r - gam[j0:j1])
    e = gam[j1 - 1]  # block j's last row (j1 = min(j0 + SUB, c): padded rows share it)
    return (b[j0:j1] * torch.exp(e - gam[j0:j1])) * torch.exp(r - e)


def _factored(a: torch.Tensor, b: torch.Tensor, gam: torch.Tensor, lower_incl: bool,
              via_block_end: bool = False) -> torch.Tensor:
    """The same matrix built the mma way: per 16-row block pair, two scaled operands, one product."""
    c = a.shape[0]
    out = torch.zeros(c, c, dtype=a.dtype)
    for i0 in range(0, c, SUB):
        i1 = min(i0 + SUB, c)
        r = gam[i0]  # reference row: first row of block i
        for j0 in range(0, i1, SUB):
            j1 = min(j0 + SUB, c)
            if j0 < i0:  # strictly below the diagonal block: Gam_t <= Gam_r <= Gam_s
                lhs = a[i0:i1] * torch.exp(gam[i0:i1] - r)
                rhs = _b_side(b, gam, j0, j1, r, via_block_end)
                out[i0:i1, j0:j1] = lhs @ rhs.T
                continue
            span = (gam[i0] - gam[i1 - 1]).max()
            if span < SPAN_LIMIT:  # diagonal block, reference row inside it
                lhs = a[i0:i1] * torch.exp(gam[i0:i1] - r)
                rhs = _b_side(b, gam, j0, j1, r, via_block_end)  # <= exp(span)
                blk = lhs @ rhs.T
            else:
                blk = _pairwise(a[i0:i1], b[j0:j1], gam[i0:i1], True)
            mask = torch.tril(torch.ones(i1 - i0, i1 - i0, dtype=torch.bool), 0 if lower_incl else -1)
            out[i0:i1, j0:j1] = torch.where(mask, blk, torch.zeros_like(blk))
    return out


def _solve(M, rhs):
    """(I + M) U = RHS by row-wise forward substitution (the oracle)."""
    U = torch.zeros_like(rhs)
    for t in range(rhs.shape[0]):
        U[t] = rhs[t] - M[t, :t] @ U[:t]
    return U


def _unit_lower_inverse(L):
    """(I + L)^-1 for a strictly lower L by substitution, one column per lane in the kernel."""
    n = L.shape[0]
    X = torch.zeros(n, n, dtype=L.dtype)
    for t in range(n):
        X[t] = -L[t, :t] @ X[:t]
        X[t, t] += 1.0
    return X


def _solve_blocked(M, rhs):
    """mma: 16-row block forward substitution, U_i = D_i^-1 (RHS_i - sum_{j<i} M_ij U_j)
    with D_i = I + M_ii inverted per block (a warp per block in the kernel)."""
    U = torch.zeros_like(rhs)
    c = rhs.shape[0]
    for i0 in range(0, c, SUB):
        i1 = min(i0 + SUB, c)
        x = rhs[i0:i1] - M[i0:i1, :i0] @ U[:i0]
        U[i0:i1] = _unit_lower_inverse(M[i0:i1, i0:i1]) @ x
    return U


def _chunk(S, q, k, v, gam, beta, w, scale, decay_mode):
    """One chunk of c real rows; returns (O [c, V], new S [K, V])."""
    c, K = k.shape
    gam = torch.cumsum(gam.expand(c, K) if gam.dim() == 2 else gam[:, None].expand(c, K), 0)
    kb = beta * k if beta.dim() == 2 else beta[:, None] * k
    rhs0 = w * v if w is not None else beta[:, None] * v
    if decay_mode not in ("pairwise", "factored", "factored_ke"):
        raise ValueError(f"frost_fwd_model: decay_mode must be pairwise, factored or factored_ke, got {decay_mode!r}")

    def build(a, b, g, lower_incl):
        if decay_mode == "pairwise":
            return _pairwise(a, b, g, lower_incl)
        return _factored(a, b, g, lower_incl, via_block_end=decay_mode == "factored_ke")

    M = build(kb, k, gam, False)
    P = scale * build(q, k, gam, True)
    A = torch.exp(gam)
    rhs = rhs0 - (kb * A) @ S
    U = _solve(M, rhs) if decay_mode == "pairwise" else _solve_blocked(M, rhs)
    O = scale * (q * A) @ S + P @ U
    last = gam[c - 1]
    S = torch.exp(last)[:, None] * S + (k * torch.exp(last - gam)).T @ U
    return O, S


def run_chunked(q, k, v, g, beta, w, cu_seqlens, *, use_l2norm, initial_state, chunk,
                chunk_fn, operand=lambda x: x):
    """Float64 (o [T, HO, V], final_state [N, HO, V, K]): walks every (sequence, output head)
    chunk by chunk, `chunk_fn(S, q, k, v, g, beta, w) -> (O, S)` doing one chunk (the exact
    model here, the bf16 emulation of mma/pipelined in frost_mma_precision.py). `operand` rounds the
    (normalised) q and k as the kernel stores them."""
    f64 = torch.float64
    T, H, K = q.shape
    HK, HV, V = k.shape[1], v.shape[1], v.shape[2]
    HO = max(H, HV)
    N = cu_seqlens.numel() - 1
    q, k, v, g, beta = (x.to(f64) for x in (q, k, v, g, beta))
    w = None if w is None else w.to(f64)
    if use_l2norm:
        q, k = _l2norm(q), _l2norm(k)
    q, k = operand(q), operand(k)
    o = torch.zeros(T, HO, V, dtype=f64)
    final = torch.zeros(N, HO, V, K, dtype=f64)
    cu = [int(x) for x in cu_seqlens.tolist()]
    for n in range(N):
        for h in range(HO):
            qh, kh, vh = h // (HO // H), h // (HO // HK), h // (HO // HV)
            S = (initial_state[n, h].to(f64).T.clone() if initial_state is not None
                 else torch.zeros(K, V, dtype=f64))
            for t0 in range(cu[n], cu[n + 1], chunk):
                t1 = min(t0 + chunk, cu[n + 1])
                O, S = chunk_fn(S, q[t0:t1, qh], k[t0:t1, kh], v[t0:t1, vh], g[t0:t1, h],
                                beta[t0:t1, h], None if w is None else w[t0:t1, h])
                o[t0:t1, h] = O
            final[n, h] = S.T
    return o, final


def frost_fwd_model(q, k, v, g, beta, w, cu_seqlens, *, scale, use_l2norm, initial_state=None,
                    chunk=CHUNK, decay_mode="pairwise"):
    """Float64 (o [T, HO, V], final_state [N, HO, V, K]) by the kernel's chunk algorithm."""
    return run_chunked(
        q, k, v, g, beta, w, cu_seqlens, use_l2norm=use_l2norm, initial_state=initial_state,
        chunk=chunk,
        chunk_fn=lambda S, *rows: _chunk(S, *rows, scale, decay_mode))
