"""Emulation of the FROST mma kernel's bf16 rounding points (test-only, CPU).

mma (kernels/fwd_mma.py) keeps the state and every accumulator in fp32 but feeds the tensor
cores bf16 operands. This mirrors each place the kernel rounds to bf16 (everything else in
float64), per chunk of 64 rows with 16-row blocks:

- q-hat, k-hat after the in-kernel L2 norm; W0 = beta v (or w v);
- QA = scale q e^Gam, KBA = kb e^Gam, KD = k e^(Gam_last - Gam), the Gram A sides
  (q, kb) e^(Gam_t - Gam_r) and the Gram B side k e^(Gam_r - Gam_s) per block pair;
- M (as used in the block substitution) and P; Dinv_i (from fp32 M_ii); the substitution
  input X_i and every U_i; the state S (rounded as the A operand of the state products).

``frost_fwd_mma_emulated`` returns (o, final_state) in float64 like frost_chunk_model; its
error against the float64 recurrence predicts what the GPU kernel can reach. With
variant="pipelined" it rounds like fwd_pipelined instead, which differs in one place: for vector gates
the Gram B side is bf16(bf16(KE_j) X_ij), KE_j = k e^(Gam_e - Gam_s) rounded when stored,
X_ij = e^(Gam_r_i - Gam_e_j) in fp32 (e the last row of block j); mma rounds
k e^(Gam_r_i - Gam_s) once. With variant="scaled" (scalar gates only) it rounds like
fwd_wgmma_scaled: no decay-folded operands; the chain's wgmma read q-hat and k-hat, and the
per-token factors scale fp32 results: R = W0 - beta e^Gam (k S), O = scale e^Gam (q S) + P U,
S <- e^Gam_last S + k^T bf16(U e^(Gam_last - Gam)), U's fp32 solve result rounded once
for P U (and the next blocks) and once, scaled, for the state update. The WY_VARIANTS
(scalar gates) replace the block solve by the full inverse A = (I + M)^-1, formed from
bf16 block products as a producer warpgroup would, and applied by tensor-core products
(the design study of kernels/NOTES.md "Forward with the full inverse on the producer").
"""
from __future__ import annotations

import torch

from frost_chunk_model import CHUNK, SPAN_LIMIT, SUB, _pairwise, _unit_lower_inverse, run_chunked


def bf16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16).to(torch.float64)


def _gram(a_r, k, gam, lower_incl, two_step=False):
    """Block-factored Gram with bf16 operands: a_r are the (already rounded) A sides."""
    c = k.shape[0]
    out = torch.zeros(c, c, dtype=torch.float64)
    for i0 in range(0, c, SUB):
        i1 = min(i0 + SUB, c)
        r = gam[i0]
        for j0 in range(0, i1, SUB):
            j1 = min(j0 + SUB, c)
            if j0 == i0 and (gam[i0] - gam[i1 - 1]).max() >= SPAN_LIMIT:
                continue  # exact path, filled by the caller
            if two_step:
                e = gam[j1 - 1]
                b = bf16(bf16(k[j0:j1] * torch.exp(e - gam[j0:j1])) * torch.exp(r - e))
            else:
                b = bf16(k[j0:j1] * torch.exp(r - gam[j0:j1]))
            blk = a_r[i0:i1] @ b.T
            if j0 == i0:
                mask = torch.tril(torch.ones(i1 - i0, i1 - i0, dtype=torch.bool), 0 if lower_incl else -1)
                blk = torch.where(mask, blk, torch.zeros_like(blk))
            out[i0:i1, j0:j1] = blk
    return out


def neumann_inverse_bf16(L):
    """(I + L)^-1 of a strictly lower 16x16 block as tensor cores would form it: with
    N = -L, (I + N)(I + N^2)(I + N^4)(I + N^8) (exact: N^16 = 0), every product from bf16
    operands into fp32 (the planned replacement of the lane-per-column substitution,
    kernels/NOTES.md "Next steps after v2")."""
    X = torch.eye(L.shape[0], dtype=L.dtype) - bf16(L)
    power = -bf16(L)
    for _ in range(3):
        power = bf16(power) @ bf16(power)
        X = X + bf16(X) @ bf16(power)
    return X


INVERSES = {"substitution": _unit_lower_inverse, "neumann": neumann_inverse_bf16}


def _chunk(S, q, k, v, gam, beta, w, scale, variant, inverse=_unit_lower_inverse):
    c, K = k.shape
    two_step = variant == "pipelined" and gam.dim() == 2  # pipelined changes the vector-gate Gram only
    gam = torch.cumsum(gam.expand(c, K) if gam.dim() == 2 else gam[:, None].expand(c, K), 0)
    kb = beta * k if beta.dim() == 2 else beta[:, None] * k
    w0 = bf16(w * v if w is not None else beta[:, None] * v)
    A = torch.exp(gam)
    qa, kba = bf16(scale * q * A), bf16(kb * A)
    kd = bf16(k * torch.exp(gam[c - 1] - gam))
    ref = torch.stack([gam[(t // SUB) * SUB] for t in range(c)])
    rel = torch.exp(gam - ref)
    M = _gram(bf16(kb * rel), k, gam, False, two_step)
    P = scale * _gram(bf16(q * rel), k, gam, True, two_step)
    for i0 in range(0, c, SUB):  # exact diagonal blocks where the span is too wide to factor
        i1 = min(i0 + SUB, c)
        if (gam[i0] - gam[i1 - 1]).max() >= SPAN_LIMIT:
            M[i0:i1, i0:i1] = _pairwise(kb[i0:i1], k[i0:i1], gam[i0:i1], False)
            P[i0:i1, i0:i1] = scale * _pairwise(q[i0:i1], k[i0:i1], gam[i0:i1], True)
    Mb, Pb = bf16(M), bf16(P)
    Sb = bf16(S)
    if variant in WY_VARIANTS:
        return _chunk_wy(S, Sb, q, k, v, w0, gam, beta, M, Mb, Pb, scale, inverse, variant)
    scaled = variant == "scaled"
    if scaled:  # the factors are per token: column 0 of the (expanded) scalar gate scan
        a = A[:, 0]
        rhs = w0 - (beta * a)[:, None] * (k @ Sb)
        O = (scale * a)[:, None] * (q @ Sb)
        fk = torch.exp(gam[c - 1, 0] - gam[:, 0])[:, None]
    else:
        rhs = w0 - kba @ Sb
        O = qa @ Sb
    U = torch.zeros_like(rhs)
    Uk = torch.zeros_like(rhs)
    for i0 in range(0, c, SUB):
        i1 = min(i0 + SUB, c)
        x = bf16(rhs[i0:i1] - Mb[i0:i1, :i0] @ U[:i0])
        u = bf16(inverse(M[i0:i1, i0:i1])) @ x
        U[i0:i1] = bf16(u)
        if scaled:
            Uk[i0:i1] = bf16(u * fk[i0:i1])
    O = O + Pb @ U
    if scaled:
        S = torch.exp(gam[c - 1])[:, None] * S + k.T @ Uk
    else:
        S = torch.exp(gam[c - 1])[:, None] * S + kd.T @ U
    return O, S


#: full-inverse (WY) chains for scalar gates: the producer forms A = (I + M)^-1 and the
#: state-independent W' = A diag(fr) K and U0 = A W0, the chain does U = U0 + W' S with no
#: solve. "wy": A, W' rounded to bf16 once each (A's off-diagonal blocks from bf16 block
#: products), U0 kept fp32; "wy-bf16u0": U0 rounded to bf16 too; "wy-fp32a": A formed in
#: fp32 and rounded once; "wy-hilo": W' as two bf16 terms (hi + lo), A likewise, i.e. the
#: chain's U group issued twice. "wy-chain": the inverse applied in the chain instead, U =
#: bf16(R) A^T after R = W0 + diag(fr) K S as today (two dependent products in the chain, no
#: W'); "wy-chain-f16": the same with R and A in fp16 (wgmma's other 16-bit type).
#: "wy-solve": the producer runs the block substitution itself (the chain's solve, bf16
#: block operands) on R = I (giving A^T) and on R = diag(fr) K (giving W'^T), and stores
#: A diag(beta) for the raw v rows.
#: "wy-raw": wy-chain without q-hat and k-hat (the chain's raw operands, kernels/NOTES.md
#: "The full inverse on the producer, measured", item 3): the kernel's wgmma read q and k as
#: the caller gave them (bf16) and the l2 norms join the decays as per-token fp32 factors,
#: on the Gram's elements (M, P) and on the chain's fp32 results (k S, q S, U's columns).
#: "wy-raw-solve": the same raw operands with wy-solve's products (the four-role kernel,
#: kernels/fwd_ws4.py RawRing): A and W' = A diag(fr) K by the block substitution, fr =
#: -beta e^Gam nk on the raw k rows, U = A bf16(beta v) + W' S.
RAW_VARIANTS = ("wy-raw", "wy-raw-solve")
WY_VARIANTS = ("wy", "wy-bf16u0", "wy-fp32a", "wy-hilo", "wy-chain", "wy-chain-f16", "wy-solve", *RAW_VARIANTS)


def f16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float16).to(torch.float64)


def _blocked_inverse(M, Mb, inverse, fp32_blocks):
    """(I + M)^-1 by 16-row blocks as a warpgroup would form it: diagonal blocks D_i^-1 from
    fp32 M_ii (rounded to bf16), off-diagonal A_ij = -D_i^-1 sum_{j<=l<i} M_il A_lj, each
    product from bf16 operands into fp32 and its result rounded to bf16 (fp32_blocks: no
    rounding inside, the exact blocked inverse of the bf16 M)."""
    c = M.shape[0]
    r = (lambda x: x) if fp32_blocks else bf16
    A = torch.zeros(c, c, dtype=torch.float64)
    starts = list(range(0, c, SUB))
    for i0 in starts:
        i1 = min(i0 + SUB, c)
        A[i0:i1, i0:i1] = r(inverse(M[i0:i1, i0:i1]))
    for i0 in starts:
        i1 = min(i0 + SUB, c)
        for j0 in starts:
            if j0 >= i0:
                break
            acc = r(Mb[i0:i1, j0:i0]) @ r(A[j0:i0, j0:min(j0 + SUB, c)])
            A[i0:i1, j0:min(j0 + SUB, c)] = r(-(A[i0:i1, i0:i1] @ r(acc)))
    return A


def _block_solve_bf16(M, Mb, rhs, inverse):
    """(I + M)^-1 rhs by the chain's block substitution: each block's input and result
    rounded to bf16 as the tensor-core operands of the next blocks, results in fp32."""
    c = M.shape[0]
    U = torch.zeros_like(rhs)
    Ub = torch.zeros_like(rhs)
    for i0 in range(0, c, SUB):
        i1 = min(i0 + SUB, c)
        x = bf16(rhs[i0:i1] - Mb[i0:i1, :i0] @ Ub[:i0])
        U[i0:i1] = bf16(inverse(M[i0:i1, i0:i1])) @ x
        Ub[i0:i1] = bf16(U[i0:i1])
    return U


def _hilo(x):
    hi = bf16(x)
    return hi + bf16(x - hi)


def _chunk_wy(S, Sb, q, k, v, w0, gam, beta, M, Mb, Pb, scale, inverse, variant):
    c = k.shape[0]
    a = torch.exp(gam[:, 0])
    fr, fo = -(beta * a), scale * a
    fk = torch.exp(gam[c - 1, 0] - gam[:, 0])[:, None]
    A = _blocked_inverse(M, Mb, inverse, fp32_blocks=variant == "wy-fp32a")
    if variant == "wy-solve":
        ident = torch.eye(c, dtype=torch.float64)
        A = _block_solve_bf16(M, Mb, ident, inverse)
        Wp = bf16(_block_solve_bf16(M, Mb, fr[:, None] * k, inverse))
        U = bf16(A * beta[None, :]) @ bf16(v) + Wp @ Sb
    elif variant.startswith("wy-chain"):
        rnd = f16 if variant == "wy-chain-f16" else bf16
        U = rnd(A) @ rnd(w0 + fr[:, None] * (k @ Sb))
    else:
        rnd = _hilo if variant == "wy-hilo" else bf16
        Wp = rnd(rnd(A * fr[None, :]) @ k)  # W' = (A diag(fr)) K, k-hat already bf16
        U0 = rnd(A) @ w0
        if variant == "wy-bf16u0":
            U0 = bf16(U0)
        U = U0 + Wp @ Sb
    O = fo[:, None] * (q @ Sb) + Pb @ bf16(U)
    S = torch.exp(gam[c - 1])[:, None] * S + k.T @ bf16(U * fk)
    return O, S


def _chunk_raw(S, q, k, v, g, beta, w, scale, l2, inverse, solve=False):
    """One chunk of "wy-raw": q, k are the raw bf16 rows; nq, nk their inverse norms (1
    without the in-kernel l2 norm, the norm's own formula with it, in fp32 on the GPU);
    every decay is an elementwise e^(Gam_t - Gam_s) of the Gram epilogue or a per-token
    factor of the chain, so no span limit and no exact diagonal fallback. solve: A and W'
    by the block substitution, U = A W0 + W' S ("wy-raw-solve")."""
    c = k.shape[0]
    gam = torch.cumsum(g, 0)
    inv_norm = lambda x: 1.0 / torch.sqrt((x * x).sum(-1) + 1e-6)  # noqa: E731
    one = torch.ones(c, dtype=torch.float64)
    nq, nk = (inv_norm(q), inv_norm(k)) if l2 else (one, one)
    decay = torch.exp(torch.tril(gam[:, None] - gam[None, :]))
    M = torch.tril((beta * nk)[:, None] * (k @ k.T) * nk[None, :] * decay, -1)
    P = torch.tril((scale * nq)[:, None] * (q @ k.T) * nk[None, :] * decay)
    Mb, Pb, Sb = bf16(M), bf16(P), bf16(S)
    a = torch.exp(gam)
    if solve:
        A = _block_solve_bf16(M, Mb, torch.eye(c, dtype=torch.float64), inverse)
        Wp = bf16(_block_solve_bf16(M, Mb, -(beta * a * nk)[:, None] * k, inverse))
        U = bf16(A) @ bf16(beta[:, None] * v) + Wp @ Sb
    else:
        A = _blocked_inverse(M, Mb, inverse, fp32_blocks=False)
        R = beta[:, None] * v - (beta * a * nk)[:, None] * (k @ Sb)
        U = bf16(A) @ bf16(R)
    O = (scale * a * nq)[:, None] * (q @ Sb) + Pb @ bf16(U)
    S = torch.exp(gam[c - 1]) * S + k.T @ bf16(U * (torch.exp(gam[c - 1] - gam) * nk)[:, None])
    return O, S


def frost_fwd_mma_emulated(q, k, v, g, beta, w, cu_seqlens, *, scale, use_l2norm, initial_state=None,
                          variant="mma", inverse="substitution"):
    if variant not in ("mma", "pipelined", "scaled") + WY_VARIANTS:
        raise ValueError(f"frost_fwd_mma_emulated: variant must be mma, pipelined, scaled or one of {WY_VARIANTS}, "
                         f"got {variant!r}")
    if (variant == "scaled" or variant in WY_VARIANTS) and g.dim() != 2:
        raise ValueError(f"frost_fwd_mma_emulated: variant {variant} is for scalar gates (g [T, H])")
    invert = INVERSES[inverse]
    if variant in RAW_VARIANTS:  # the rows as given: the norms are the chunk's factors
        solve = variant == "wy-raw-solve"
        return run_chunked(
            q, k, v, g, beta, w, cu_seqlens, use_l2norm=False, initial_state=initial_state,
            chunk=CHUNK, operand=bf16,
            chunk_fn=lambda S, *rows: _chunk_raw(S, *rows, scale, use_l2norm, invert, solve))
    return run_chunked(
        q, k, v, g, beta, w, cu_seqlens, use_l2norm=use_l2norm, initial_state=initial_state,
        chunk=CHUNK, operand=bf16,
        chunk_fn=lambda S, *rows: _chunk(S, *rows, scale, variant, invert))
