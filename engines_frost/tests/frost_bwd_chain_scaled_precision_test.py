"""The backward chain's scalar decays as per-token factors (kernels/bwd_chain_scaled.py)
round no worse than the folded operands of the wgmma chain (bwd_chain_wgmma.py): a bf16
emulation of one chain step per chunk, both ways, against the float64 step
(frost_bwd_model.stage_chain), on random and on correlated keys. Pure Python (torch).

Rounded as the kernels round (everything else in float64): q-hat, k-hat, dO as staged
(bf16 inputs), dS^T as the wgmma A operand, P^T and (-M)^T, the 16 x 16 inverses, the back
substitution's right-hand side per block and every dR block fed back as an A operand;
folded: KD = k fk, QA = scale q a, -KBA = -beta k a rounded as tiles; scaled: dO fo
and dR fr (from fp32) rounded as A operands, dS^T K^T scaled by fk in fp32.
"""
import math
import os
import sys

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from frost_bwd_model import _chunk_rows, _grams, stage_chain  # noqa: E402
from frost_chunk_model import _unit_lower_inverse  # noqa: E402
from frost_mma_precision import _block_solve_bf16, bf16  # noqa: E402

SUB = 16


def chain_step(dS, q, k, g, beta, dO, scale, scaled, wy=False, in_chain=False):
    """(dR, dS entering the chunk) of one emulated chain step (module docstring); wy: the
    full-inverse form (wy_step; in_chain: without W')."""
    gam, kb, _ = _chunk_rows(g, beta, None, k, k)
    M, P = _grams(q, k, kb, gam, scale)
    a = torch.exp(gam[:, 0])
    last = gam[-1, 0]
    fk, fo, fr = torch.exp(last - gam[:, 0]), scale * a, -beta * a
    dSb = bf16(dS)
    if scaled:
        dU = bf16(P).T @ dO + fk[:, None] * (k @ dSb)
    else:
        dU = bf16(P).T @ dO + bf16(k * fk[:, None]) @ dSb
    c = dU.shape[0]
    Mb = bf16(M)
    if wy:
        return wy_step(dS, dU, q, k, M, Mb, fo, fr, last, dO, in_chain)
    dR = torch.zeros_like(dU)
    dRb = torch.zeros_like(dU)  # the A operands fed back and to the update
    for i0 in reversed(range(0, c, SUB)):
        i1 = min(i0 + SUB, c)
        y = bf16(dU[i0:i1] - Mb[i1:, i0:i1].T @ dRb[i1:])
        dR[i0:i1] = bf16(_unit_lower_inverse(M[i0:i1, i0:i1])).T @ y
        dRb[i0:i1] = bf16(dR[i0:i1])
    if scaled:
        dS_prev = q.T @ bf16(fo[:, None] * dO) + math.exp(last) * dS + k.T @ bf16(fr[:, None] * dR)
    else:
        dS_prev = bf16(scale * q * a[:, None]).T @ dO + math.exp(last) * dS - bf16(kb * a[:, None]).T @ dRb
    return dR, dS_prev


def wy_step(dS, dU, q, k, M, Mb, fo, fr, last, dO, in_chain=False):
    """The chain step with the forward producer's inverse and W' (kernels/fwd_ws_wy.py; a
    design for the backward, NOTES_bwd.md "The chain without its back substitution"): with
    A = (I + M)^-1, dR = A^T dU, and the update's (dR^T diag(fr)) K is dU^T W', W' = A
    diag(fr) K. A and W' from the block solve as the forward producer forms them (bf16
    block operands, W' rounded once), dU rounded once as the A operand of both products.
    in_chain (kernels/bwd_chain_ws4.py FrostBwdChainWs4InChain): no W', the update takes
    (dR^T diag(fr)) K with dR from its fp32 accumulator, scaled, rounded as the A operand."""
    c = dU.shape[0]
    A = _block_solve_bf16(M, Mb, torch.eye(c, dtype=torch.float64), _unit_lower_inverse)
    dUb = bf16(dU)
    dR = bf16(A).T @ dUb
    dS_prev = q.T @ bf16(fo[:, None] * dO) + math.exp(last) * dS
    if in_chain:
        return dR, dS_prev + k.T @ bf16(fr[:, None] * dR)
    Wp = bf16(_block_solve_bf16(M, Mb, fr[:, None] * k, _unit_lower_inverse))
    return dR, dS_prev + Wp.T @ dUb


def _rel(x, ref):
    return float((x - ref).norm() / ref.norm())


def _errors(gen, correlated, c=64, K=64, V=64, chunks=6):
    """Max over chunks of the relative dR and dS errors, folded and scaled."""
    worst = {False: [0.0, 0.0], True: [0.0, 0.0], "wy": [0.0, 0.0], "wyc": [0.0, 0.0]}
    for _ in range(chunks):
        q = bf16(F.normalize(torch.randn(c, K, generator=gen, dtype=torch.float64), dim=-1))
        if correlated:
            base = F.normalize(torch.randn(1, K, generator=gen, dtype=torch.float64), dim=-1)
            k = 0.9 * base + 0.436 * F.normalize(torch.randn(c, K, generator=gen, dtype=torch.float64), dim=-1)
        else:
            k = torch.randn(c, K, generator=gen, dtype=torch.float64)
        k = bf16(F.normalize(k, dim=-1))
        g = F.logsigmoid(torch.randn(c, generator=gen, dtype=torch.float64)) * (0.01 if correlated else 1.0)
        beta = (0.5 if correlated else 0.0) + 0.5 * torch.sigmoid(torch.randn(c, generator=gen, dtype=torch.float64))
        dO = bf16(torch.randn(c, V, generator=gen, dtype=torch.float64))
        dS = torch.randn(K, V, generator=gen, dtype=torch.float64)
        scale = 1.0 / math.sqrt(K)
        ref_dR, ref_dS = stage_chain(dS, q, k, torch.zeros_like(dO), g, beta, None, dO, scale)
        for mode in (False, True, "wy", "wyc"):
            dR, dS_prev = chain_step(dS, q, k, g, beta, dO, scale, mode is not False, wy=mode in ("wy", "wyc"),
                                     in_chain=mode == "wyc")
            worst[mode][0] = max(worst[mode][0], _rel(dR, ref_dR))
            worst[mode][1] = max(worst[mode][1], _rel(dS_prev, ref_dS))
    return worst


@pytest.mark.parametrize("correlated", [False, True], ids=["random-keys", "correlated-keys"])
def test_scaled_chain_rounds_no_worse_than_the_folded_one(correlated):
    worst = _errors(torch.Generator().manual_seed(11 + correlated), correlated)
    (fr, fs), (sr, ss) = worst[False], worst[True]
    assert sr < 1e-2 and ss < 1e-2, worst
    assert sr < 1.25 * fr + 1e-4 and ss < 1.25 * fs + 1e-4, worst
    assert (sr, ss) != (fr, fs)  # the two really round differently


def test_the_emulation_rounds_at_all():
    """A float64 pass-through would agree with stage_chain to ~1e-15."""
    worst = _errors(torch.Generator().manual_seed(3), False, chunks=2)
    assert min(worst[True]) > 1e-5 and min(worst[False]) > 1e-5, worst


@pytest.mark.parametrize("correlated", [False, True], ids=["random-keys", "correlated-keys"])
def test_full_inverse_step_rounds_like_the_back_substitution(correlated):
    """The full-inverse chain step (wy_step) against float64: inside the bound and within
    15 % of the scaled chain's back substitution, dR and dS alike, and really different."""
    worst = _errors(torch.Generator().manual_seed(11 + correlated), correlated)
    (sr, ss), (wr, ws) = worst[True], worst["wy"]
    assert wr < 1e-2 and ws < 1e-2, worst
    assert wr < 1.15 * sr + 1e-4 and ws < 1.15 * ss + 1e-4, worst
    assert (wr, ws) != (sr, ss)


@pytest.mark.parametrize("correlated", [False, True], ids=["random-keys", "correlated-keys"])
def test_inverse_in_chain_step_rounds_like_the_back_substitution(correlated):
    """The full-inverse step without W' (in_chain) against float64: inside the bound,
    within 15 % of the back substitution, and rounding differently from W' (its dS)."""
    worst = _errors(torch.Generator().manual_seed(11 + correlated), correlated)
    (sr, ss), (cr, cs), (wr, ws) = worst[True], worst["wyc"], worst["wy"]
    print(f"back substitution {sr:.3e} / {ss:.3e}, W' {wr:.3e} / {ws:.3e}, in chain {cr:.3e} / {cs:.3e}")
    assert cr < 1e-2 and cs < 1e-2, worst
    assert cr < 1.15 * sr + 1e-4 and cs < 1.15 * ss + 1e-4, worst
    assert cr == wr and cs != ws  # dR is the same product; the update rounds another operand


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
