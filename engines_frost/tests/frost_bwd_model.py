"""Float64 CPU model of the FROST backward kernels' algorithm (test-only).

The backward runs three kernels per (sequence, output head) (kernels/NOTES_bwd.md):

1. states   the forward chain again, writing the state entering every chunk (a
            checkpoint row, bf16 S^T) and U = (I + M)^-1 (W0 - KBA S) per token; or, when
            the forward wrote state_checkpoints, values: U of each chunk from its
            checkpointed S, chunks independent (forward_checkpoints_model, stage_values);
            or, when it wrote U as well (v1.3), nothing: U is the forward's
            (forward_values_model);
2. chain    the state gradient backwards over the chunks: with dS the gradient of the
            state leaving chunk c,
                dU = P^T dO + KD dS,   dR = (I + M)^-T dU,
                dS <- (QA)^T dO + Diag(A_last) dS - KBA^T dR
            writing dS (per chunk) and dR (per token); dS after the first chunk is
            d_initial_state;
3. grads    per chunk, independently: from S, dS, U, dR and the chunk's rows
                dQA = dO S^T,  dKBA = -dR S^T,  dKD = U dS^T,  dP = dO U^T,  dM = -dR U^T
                dq^ = scale A dQA + [dP scale e^(G_t - G_s)] k^
                dkb = A dKBA + [dM e^(G_t - G_s)] k^
                dk^_dir = e^(G_last - G) dKD + [..]^T q^ + [..]^T kb
                dG = q^ dq^ + kb dkb - k^ dk^_dir,
                dG_last += sum_t k^ e^(G_last - G) dKD + A_last sum_v S dS
            then dk^ = dk^_dir + beta dkb, dbeta = sum k^ dkb + sum v dR (GDN-2: per
            channel, dw = v dR, dv = w dR), dv = beta dR, dg = reverse cumsum of dG
            inside the chunk, and the L2-norm adjoint.

Notation as frost_chunk_model (S [K, V] in FLA orientation, QA = scale q^ e^G, KBA = kb e^G,
KD = k^ e^(G_last - G)). ``frost_bwd_model`` returns the gradients of
<o, dO> + <final_state, d_final_state>; frost_bwd_model_test checks them against autograd
through the forward model.
"""
from __future__ import annotations

import torch

from frost_chunk_model import CHUNK, _l2norm, _pairwise, _solve


def _chunk_rows(g, beta, w, k, v):
    """Per-chunk forward quantities shared by the three stages (c real rows)."""
    c, K = k.shape
    gam = torch.cumsum(g.expand(c, K) if g.dim() == 2 else g[:, None].expand(c, K), 0)
    kb = beta * k if beta.dim() == 2 else beta[:, None] * k
    w0 = w * v if w is not None else beta[:, None] * v
    return gam, kb, w0


def _grams(q, k, kb, gam, scale):
    M = _pairwise(kb, k, gam, False)
    P = scale * _pairwise(q, k, gam, True)
    return M, P


def _decay(gam):
    """e^(G_t - G_s) for s <= t (else 0), per channel: [t, s, K]."""
    c = gam.shape[0]
    diff = gam[:, None, :] - gam[None, :, :]
    mask = torch.tril(torch.ones(c, c, dtype=torch.bool))
    return torch.where(mask[:, :, None], torch.exp(diff), torch.zeros_like(diff))


def stage_states(S, q, k, v, g, beta, w):
    """Kernel 1 on one chunk: (U [c, V], S leaving the chunk)."""
    gam, kb, w0 = _chunk_rows(g, beta, w, k, v)
    M = _pairwise(kb, k, gam, False)
    A = torch.exp(gam)
    U = _solve(M, w0 - (kb * A) @ S)
    last = gam[-1]
    return U, torch.exp(last)[:, None] * S + (k * torch.exp(last - gam)).T @ U


def stage_values(S, q, k, v, g, beta, w):
    """Kernel 1 when the forward's checkpoints are given (``values``), on one chunk: U
    [c, V] from the checkpointed S entering it; no state update, chunks independent."""
    gam, kb, w0 = _chunk_rows(g, beta, w, k, v)
    return _solve(_pairwise(kb, k, gam, False), w0 - (kb * torch.exp(gam)) @ S)


def forward_checkpoints_model(q, k, v, g, beta, w, cu_seqlens, *, use_l2norm, initial_state=None):
    """Float64 state_checkpoints as the pipelined forward writes them (kernels/checkpoints.py):
    [T // 64 + N, HO, V, K], row packed_row0(n) + j = S^T entering chunk j of sequence
    n; rows no chunk writes are NaN (so any read of them shows)."""
    return _forward_training_model(q, k, v, g, beta, w, cu_seqlens, use_l2norm, initial_state)[0]


def forward_values_model(q, k, v, g, beta, w, cu_seqlens, *, use_l2norm, initial_state=None):
    """Float64 U [T, HO, V] as the pipelined forward writes it under write_values: each chunk's
    U = (I + M)^-1 (W0 - KBA S) from the state its chain carries into the chunk (the
    states kernel's U, stage_states); rows no sequence covers are NaN."""
    return _forward_training_model(q, k, v, g, beta, w, cu_seqlens, use_l2norm, initial_state)[1]


def _forward_training_model(q, k, v, g, beta, w, cu_seqlens, use_l2norm, initial_state):
    """(state_checkpoints, U) of a training forward (the two functions above)."""
    from cudnn.linear_attention.frost.kernels.checkpoints import checkpoint_rows, packed_row0

    f64 = torch.float64
    T, H, K = q.shape
    HK, HV, V = k.shape[1], v.shape[1], v.shape[2]
    HO = max(H, HV)
    N = cu_seqlens.numel() - 1
    q, k, v, g, beta = (x.to(f64) for x in (q, k, v, g, beta))
    w = None if w is None else w.to(f64)
    qh, kh = (_l2norm(q), _l2norm(k)) if use_l2norm else (q, k)
    out = torch.full((checkpoint_rows(T, N), HO, V, K), float("nan"), dtype=f64)
    values = torch.full((T, HO, V), float("nan"), dtype=f64)
    cu = [int(x) for x in cu_seqlens.tolist()]
    for n in range(N):
        row0 = packed_row0(cu, n)
        for h in range(HO):
            hk, hv = h // (HO // HK), h // (HO // HV)
            S = (initial_state[n, h].to(f64).T.clone() if initial_state is not None
                 else torch.zeros(K, V, dtype=f64))
            for j, t0 in enumerate(range(cu[n], cu[n + 1], CHUNK)):
                t1 = min(t0 + CHUNK, cu[n + 1])
                out[row0 + j, h] = S.T
                values[t0:t1, h], S = stage_states(S, qh[t0:t1, h // (HO // H)], kh[t0:t1, hk], v[t0:t1, hv],
                                                   g[t0:t1, h], beta[t0:t1, h], None if w is None else w[t0:t1, h])
    return out, values


def stage_chain(dS, q, k, v, g, beta, w, dO, scale):
    """Kernel 2 on one chunk: (dR [c, V], gradient of the state entering the chunk)."""
    gam, kb, _ = _chunk_rows(g, beta, w, k, v)
    M, P = _grams(q, k, kb, gam, scale)
    A = torch.exp(gam)
    last = gam[-1]
    dU = P.T @ dO + (k * torch.exp(last - gam)) @ dS
    c = dU.shape[0]
    dR = torch.linalg.solve_triangular((torch.eye(c, dtype=M.dtype) + M).T, dU, upper=True)
    dS_prev = (scale * q * A).T @ dO + torch.exp(last)[:, None] * dS - (kb * A).T @ dR
    return dR, dS_prev


def stage_grads(S, dS, U, dR, q, k, v, g, beta, w, dO, scale):
    """Kernel 3 on one chunk: gradients w.r.t. q^, k^ (before the L2-norm adjoint), v, the
    per-token log gates g, beta and w."""
    gam, kb, _ = _chunk_rows(g, beta, w, k, v)
    A = torch.exp(gam)
    last = gam[-1]
    E = _decay(gam)                                     # [t, s, K]
    dQA = dO @ S.T
    dKBA = -dR @ S.T
    dKD = U @ dS.T
    dP = torch.tril(dO @ U.T)
    dM = torch.tril(-dR @ U.T, -1)
    kd_scale = torch.exp(last - gam)
    dq = scale * A * dQA + torch.einsum("ts,sd,tsd->td", scale * dP, k, E)
    dkb = A * dKBA + torch.einsum("ts,sd,tsd->td", dM, k, E)
    dk_dir = (kd_scale * dKD + torch.einsum("ts,td,tsd->sd", scale * dP, q, E)
              + torch.einsum("ts,td,tsd->sd", dM, kb, E))
    dG = q * dq + kb * dkb - k * dk_dir
    dG[-1] += (k * kd_scale * dKD).sum(0) + torch.exp(last) * (S * dS).sum(1)
    if beta.dim() == 2:   # GDN-2: erase gate b per channel, write gate w
        dk = dk_dir + beta * dkb
        dbeta = k * dkb
        dv = w * dR
        dw = v * dR
    else:
        dk = dk_dir + beta[:, None] * dkb
        dbeta = (k * dkb).sum(1) + (v * dR).sum(1)
        dv = beta[:, None] * dR
        dw = None
    if g.dim() == 1:
        dG = dG.sum(1)
    dg = dG.flip(0).cumsum(0).flip(0)
    return dq, dk, dv, dg, dbeta, dw


def _l2norm_bwd(x, dx_hat):
    r = torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)
    x_hat = x * r
    return r * (dx_hat - x_hat * (x_hat * dx_hat).sum(-1, keepdim=True))


def frost_bwd_model(q, k, v, g, beta, w, cu_seqlens, dO, *, scale, use_l2norm, initial_state=None,
                    d_final_state=None, chunk=CHUNK, state_checkpoints=None, values=None):
    """Float64 gradients (dq, dk, dv, dg, dbeta, dw or None, d_initial_state or None) of
    <o, dO> + <final_state, d_final_state> by the three-kernel algorithm above; with the
    forward's ``state_checkpoints`` (forward_checkpoints_model's layout, chunk 64), kernel 1
    is ``values``: each chunk's S is read from its packed row, U from stage_values; with
    the forward's ``values`` too (forward_values_model's [T, HO, V]), kernel 1 does not
    run: U is read from its rows."""
    from cudnn.linear_attention.frost.kernels.checkpoints import packed_row0

    if values is not None and state_checkpoints is None:
        raise ValueError("frost_bwd_model: values (the forward's U) are read with state_checkpoints only")
    if state_checkpoints is not None and chunk != CHUNK:
        raise ValueError(f"frost_bwd_model: checkpoints are per {CHUNK}-token chunk, got chunk={chunk}")
    f64 = torch.float64
    T, H, K = q.shape
    HK, HV, V = k.shape[1], v.shape[1], v.shape[2]
    HO = max(H, HV)
    N = cu_seqlens.numel() - 1
    q, k, v, g, beta, dO = (x.to(f64) for x in (q, k, v, g, beta, dO))
    w = None if w is None else w.to(f64)
    qh, kh = (_l2norm(q), _l2norm(k)) if use_l2norm else (q, k)
    dq_hat, dk_hat = torch.zeros(T, H, K, dtype=f64), torch.zeros(T, HK, K, dtype=f64)
    dv = torch.zeros(T, HV, V, dtype=f64)
    dg, dbeta = torch.zeros_like(g), torch.zeros_like(beta)
    dw = None if w is None else torch.zeros_like(w)
    dh0 = None if initial_state is None else torch.zeros(N, HO, V, K, dtype=f64)
    cu = [int(x) for x in cu_seqlens.tolist()]
    for n in range(N):
        starts = list(range(cu[n], cu[n + 1], chunk))
        for h in range(HO):
            hq, hk, hv = h // (HO // H), h // (HO // HK), h // (HO // HV)

            def rows(t0, h=h, hq=hq, hk=hk, hv=hv):
                t1 = min(t0 + chunk, cu[n + 1])
                return (t0, t1, qh[t0:t1, hq], kh[t0:t1, hk], v[t0:t1, hv], g[t0:t1, h], beta[t0:t1, h],
                        None if w is None else w[t0:t1, h])

            S = (initial_state[n, h].to(f64).T.clone() if initial_state is not None
                 else torch.zeros(K, V, dtype=f64))
            saved = []
            for i, t0 in enumerate(starts):   # kernel 1
                t0, t1, qc, kc, vc, gc, bc, wc = rows(t0)
                if state_checkpoints is not None:   # values: chunks independent
                    S_c = state_checkpoints[packed_row0(cu, n) + i, h].to(f64).T
                    if values is not None:   # the forward's U: no kernel 1 at all
                        saved.append((S_c, values[t0:t1, h].to(f64)))
                    else:
                        saved.append((S_c, stage_values(S_c, qc, kc, vc, gc, bc, wc)))
                    continue
                U, S_next = stage_states(S, qc, kc, vc, gc, bc, wc)
                saved.append((S, U))
                S = S_next
            dS = (d_final_state[n, h].to(f64).T.clone() if d_final_state is not None
                  else torch.zeros(K, V, dtype=f64))
            leaving = [None] * len(starts)
            dRs = [None] * len(starts)
            for i in reversed(range(len(starts))):   # kernel 2
                t0, t1, qc, kc, vc, gc, bc, wc = rows(starts[i])
                leaving[i] = dS
                dRs[i], dS = stage_chain(dS, qc, kc, vc, gc, bc, wc, dO[t0:t1, h], scale)
            if dh0 is not None:
                dh0[n, h] = dS.T
            for i, t0 in enumerate(starts):   # kernel 3
                t0, t1, qc, kc, vc, gc, bc, wc = rows(t0)
                S_c, U = saved[i]
                gq, gk, gv, gg, gb, gw = stage_grads(S_c, leaving[i], U, dRs[i], qc, kc, vc, gc, bc, wc,
                                                     dO[t0:t1, h], scale)
                dq_hat[t0:t1, hq] += gq
                dk_hat[t0:t1, hk] += gk
                dv[t0:t1, hv] += gv
                dg[t0:t1, h] = gg
                dbeta[t0:t1, h] = gb
                if dw is not None:
                    dw[t0:t1, h] = gw
    dq = _l2norm_bwd(q, dq_hat) if use_l2norm else dq_hat
    dk = _l2norm_bwd(k, dk_hat) if use_l2norm else dk_hat
    return dq, dk, dv, dg, dbeta, dw, dh0
