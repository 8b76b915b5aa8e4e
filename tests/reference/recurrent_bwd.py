"""Explicit (hand-written) backward of the token-by-token recurrence, float64, no autograd.

recurrent.py runs the delta rule forward and delta_rule.recurrent_grads differentiates it
with torch autograd. An engine kernel runs below autograd (a custom op's kernel cannot
record a graph), so a test-only engine that must produce gradients itself (GDN-2's backward,
the summaries' state gradient) needs a backward written out by hand; this is it, for all
three families, checked against the autograd one in recurrent_bwd_test.py.

Per token, FLA orientation S [K, V] per (sequence, output head), with a = exp(gamma_t):

    S' = a * S_prev (rows)   kb = b * k   e = S'^T kb   u = w * v - e
    S  = S' + k u^T          o = scale S^T q

and, walking the tokens backwards with dS the gradient of the state leaving token t:

    dS += scale q dO^T       dq = scale S dO
    dk  = dS u + b * dkb     du = dS^T k      dkb = S' de (de = -du)
    dS' = dS + kb de^T       db = k * dkb     dv = w * du   dw = v * du
    dgamma = a * rowsum(S_prev * dS')         dS_prev = a * dS'

(b, w, a scalars per head for GDN/KDA's beta and GDN's gate are summed over their
broadcast axis). Gradients then map back through the pre-processing adjoints and the
head-group sums exactly as delta_rule.chunked_grads does.
"""
from __future__ import annotations

import dataclasses

import torch

from tests.reference import preprocess as pp
from tests.reference.delta_rule import LinearAttentionGrads, Primals
from tests.reference.recurrent import to_stored


@dataclasses.dataclass(frozen=True)
class PreparedGrads:
    """Gradients w.r.t. the pre-processed tensors of preprocess.Prepared (HO heads).

    d_initial_state is in FLA orientation [N, HO, K, V] (always computed: zero start
    states have a gradient too)."""

    dq: torch.Tensor
    dk: torch.Tensor
    dv: torch.Tensor
    dgamma: torch.Tensor
    derase: torch.Tensor
    dwrite: torch.Tensor
    d_initial_state: torch.Tensor


def _sum_to(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """x [HO, D] reduced to like's [HO, 1] when like broadcasts over its last axis."""
    return x.sum(-1, keepdim=True) if like.shape[-1] == 1 and x.shape[-1] != 1 else x


@torch.no_grad()
def delta_rule_recurrence_bwd(p: pp.Prepared, dO: torch.Tensor,
                              d_final_state: torch.Tensor | None) -> PreparedGrads:
    """Backward of recurrent.delta_rule_recurrence on prepared inputs.

    dO [T, HO, V]; d_final_state None or FLA orientation [N, HO, K, V]; float64."""
    d = p.dims
    dO = dO.to(torch.float64)
    dq, dk, dv = (torch.zeros_like(t) for t in (p.q, p.k, p.v))
    dgamma, derase, dwrite = (torch.zeros_like(t) for t in (p.gamma, p.erase, p.write))
    zero = p.q.new_zeros(d.HO, d.K, d.V)
    dh0 = []
    for n, (start, end) in enumerate(d.bounds):
        S = zero if p.initial_state is None else p.initial_state[n]
        entering = []
        for t in range(start, end):
            entering.append(S)
            S = _step(p, t, S)[-1]
        dS = zero if d_final_state is None else d_final_state[n].to(torch.float64)
        for t in reversed(range(start, end)):
            S_prev = entering[t - start]
            a, S_dec, kb, u, S_t = _step(p, t, S_prev)
            dS = dS + p.scale * p.q[t][:, :, None] * dO[t][:, None, :]
            dq[t] = p.scale * torch.einsum("hkv,hv->hk", S_t, dO[t])
            du = torch.einsum("hkv,hk->hv", dS, p.k[t])
            de = -du
            dkb = torch.einsum("hkv,hv->hk", S_dec, de)
            dk[t] = torch.einsum("hkv,hv->hk", dS, u) + p.erase[t] * dkb
            derase[t] = _sum_to(p.k[t] * dkb, p.erase[t])
            dv[t] = p.write[t] * du
            dwrite[t] = _sum_to(p.v[t] * du, p.write[t])
            dS_dec = dS + kb[:, :, None] * de[:, None, :]
            dgamma[t] = _sum_to(a[:, :, 0] * (S_prev * dS_dec).sum(-1), p.gamma[t])
            dS = a * dS_dec
        dh0.append(dS)
    d_init = torch.stack(dh0) if dh0 else p.q.new_zeros(0, d.HO, d.K, d.V)
    return PreparedGrads(dq, dk, dv, dgamma, derase, dwrite, d_init)


def _step(p: pp.Prepared, t: int, S_prev: torch.Tensor):
    """One token of the recurrence: (a [HO, K|1, 1], S', kb, u, S_t)."""
    a = torch.exp(p.gamma[t])[:, :, None]
    S_dec = a * S_prev
    kb = p.erase[t] * p.k[t]
    u = p.write[t] * p.v[t] - torch.einsum("hkv,hk->hv", S_dec, kb)
    return a, S_dec, kb, u, S_dec + p.k[t][:, :, None] * u[:, None, :]


def explicit_recurrent_grads(fn: str, family: pp.Family, opts: pp.Options, x: Primals,
                             dO: torch.Tensor,
                             d_final_state: torch.Tensor | None) -> LinearAttentionGrads:
    """The gradients delta_rule.recurrent_grads returns, computed without autograd."""
    p = x.prepare(fn, family, opts)
    d = p.dims
    if tuple(dO.shape) != (d.T, d.HO, d.V):
        raise ValueError(f"{fn}: argument 'dO': expected shape {[d.T, d.HO, d.V]} [T, HO, V], "
                         f"got {list(dO.shape)}")
    dht = None if d_final_state is None else d_final_state.to(torch.float64).transpose(-1, -2)
    pg = delta_rule_recurrence_bwd(p, dO, dht)
    dq = pp.reduce_heads(pg.dq, d.H)
    dk = pp.reduce_heads(pg.dk, d.HK)
    dv = pp.reduce_heads(pg.dv, d.HV)
    if opts.use_qk_l2norm:
        dq = pp.l2norm_bwd(x.q.to(torch.float64), dq)
        dk = pp.l2norm_bwd(x.k.to(torch.float64), dk)
    dgamma = pg.dgamma if family.per_channel_gate else pg.dgamma[..., 0]
    dg, d_a_log, d_dt_bias = pp.log_decay_bwd(
        family, x.g.to(torch.float64), dgamma, opts, pp.to_float64(x.a_log),
        pp.to_float64(x.dt_bias))
    if family.vector_beta:  # GDN-2: beta is the erase gate alone, w the write gate
        dbeta_eff, dw = pg.derase, pg.dwrite
    else:  # GDN/KDA: one scalar beta both erases and writes
        dbeta_eff, dw = pg.derase[..., 0] + pg.dwrite[..., 0], None
    dbeta = pp.beta_activation_bwd(x.beta.to(torch.float64), dbeta_eff, opts)
    return LinearAttentionGrads(
        dq=dq, dk=dk, dv=dv, dg=dg, dbeta=dbeta, dw=dw,
        d_initial_state=None if x.initial_state is None else to_stored(pg.d_initial_state),
        d_a_log=d_a_log, d_dt_bias=d_dt_bias)
