"""What the order of the fp32 sums inside the tensor cores can do to a training forward's U
and checkpoints (CPU, float64 emulation of the fp32 / bf16 arithmetic; no GPU).

the wgmma layer's training launchers (kernels/fwd_wgmma.py) store U and the state checkpoints at the pipelined layer's
bf16 rounding points from the same bf16 operands (frost_compile_wgmma_test: the same stores,
the solve's own accumulator); what differs is that R^T = W0^T + S^T KBA^T and the state
update run on warpgroup MMA instead of mma.sync. Both add k16 steps into an fp32
accumulator in the same order of steps (W0 or the decayed state first, then k = 0, 16,
...); only how a unit sums inside a step could differ. The H200 summed the backward's
wgmma and mma.sync products bitwise alike, so U is predicted bitwise the pipelined layer's; this bounds the
other case. One GDN sequence runs the forward's chunk algebra twice on the same bf16
operands: each k16 step rounded to fp32 once, and each step as two k8 halves rounded in
between (R and the state update only: the solve stays mma.sync in both kernels). The
stored U and checkpoints of the two differ (the emulation does exercise another order),
by at most a quarter of la_frost_bwd_smoke.FWD_ROUNDING_BOUND (what the GPU smoke accepts
for the wgmma layer's U against the recompute path's wherever the forward writing U runs wgmma: the
product's for bf16 on sm_90a, or forced by --fwd-kernel wgmma) and a quarter of U's own
bf16 error against the unrounded algebra. Measured here (relative L2, 32 chunks, K = V =
128): random keys ~4e-5 against a bf16 error of ~2.9e-3; the smoke's correlated keys
(cosine ~0.8, an ill-conditioned solve) 2-5e-4 against ~5e-3. The smoke applies that
bound wherever wgmma writes U (the product's training forward for bf16 on sm_90a) and
requires bitwise where pipelined does (the last test: which cases get which).
"""
import math

import pytest
import torch

from tests.numerics.la_frost_bwd_smoke import FWD_ROUNDING_BOUND

C, SUB = 64, 16


def _bf16(x):
    return x.to(torch.bfloat16).to(torch.float64)


def _f32(x):
    return x.to(torch.float32).to(torch.float64)


def _mma(acc, a, b, halves: bool):
    """acc + a b in k16 steps into an fp32 accumulator (a, b bf16 values): each step's
    products summed exactly and rounded once, or (halves) as two k8 steps."""
    for k0 in range(0, a.shape[1], SUB):
        steps = ((k0, k0 + 8), (k0 + 8, k0 + SUB)) if halves else ((k0, k0 + SUB),)
        for lo, hi in steps:
            acc = _f32(acc + a[:, lo:hi] @ b[lo:hi])
    return acc


def _forward(k, v, g, beta, halves: bool, exact: bool = False):
    """(U [T, V], checkpoints [chunks, V, K]) of one GDN sequence: the chunk algebra of
    fwd_mma's chain (S^T in registers, blocked solve) at its bf16 / fp32 rounding points,
    or (exact) without rounding."""
    rb = (lambda x: x) if exact else _bf16
    rf = (lambda x: x) if exact else _f32
    T, K = k.shape
    S = torch.zeros(v.shape[1], K, dtype=torch.float64)
    us, states = [], []
    for t0 in range(0, T, C):
        states.append(rb(S))
        kc, vc, bc = rb(k[t0:t0 + C]), v[t0:t0 + C], beta[t0:t0 + C, None]
        gam = torch.cumsum(g[t0:t0 + C], 0)
        kba = rb(-(kc * bc) * torch.exp(gam)[:, None])
        kd = rb(kc * torch.exp(gam[-1] - gam)[:, None])
        w0 = rb(vc * bc)
        m = torch.tril(bc * (kc @ kc.T) * torch.exp(torch.clamp(gam[:, None] - gam[None, :], max=0)), -1)
        mneg = rb(-m)
        r = w0.T + S @ kba.T if exact else _mma(w0.T.clone(), _bf16(S), kba.T, halves)
        ut = []
        for i in range(C // SUB):
            rows = slice(SUB * i, SUB * i + SUB)
            x = r[:, rows]
            for j in range(i):
                b = mneg[rows, SUB * j:SUB * j + SUB].T
                x = x + ut[j] @ b if exact else _mma(x, _bf16(ut[j]), b, False)
            dinv = rb(torch.linalg.inv(torch.eye(SUB, dtype=torch.float64) + rf(m[rows, rows])))
            ut.append(x @ dinv.T if exact else _mma(torch.zeros_like(x), _bf16(x), dinv.T, False))
        us.append(rb(torch.cat(ut, 1).T))
        S = rf(S * math.exp(gam[-1]))
        for j in range(C // SUB):
            b = kd[SUB * j:SUB * j + SUB]
            S = S + ut[j] @ b if exact else _mma(S, _bf16(ut[j]), b, halves)
    return torch.cat(us), torch.stack(states)


def _inputs(correlated: bool, T=32 * C, K=128, V=128, seed=0):
    gen = torch.Generator().manual_seed(seed)
    k = torch.randn(T, K, generator=gen, dtype=torch.float64)
    beta = torch.sigmoid(torch.randn(T, generator=gen, dtype=torch.float64))
    g = torch.nn.functional.logsigmoid(torch.randn(T, generator=gen, dtype=torch.float64)) * 0.1
    if correlated:  # la_frost_bwd_smoke's correlated case: keys at cosine ~0.8, beta >= 0.5, slow decay
        k = 0.8 * torch.randn(1, K, generator=gen, dtype=torch.float64) + 0.6 * k
        beta = 0.5 + 0.5 * torch.rand(T, generator=gen, dtype=torch.float64)
        g = -0.02 * torch.rand(T, generator=gen, dtype=torch.float64)
    k = torch.nn.functional.normalize(k, dim=-1)
    return k, torch.randn(T, V, generator=gen, dtype=torch.float64), g, beta


def _rel(x, y):
    return ((x - y).norm() / y.norm()).item()


@pytest.mark.parametrize("correlated", [False, True], ids=["random", "correlated"])
def test_another_sum_order_moves_u_and_checkpoints_far_less_than_the_bound(correlated):
    k, v, g, beta = _inputs(correlated)
    u_one, s_one = _forward(k, v, g, beta, halves=False)
    u_two, s_two = _forward(k, v, g, beta, halves=True)
    u_exact, s_exact = _forward(k, v, g, beta, halves=False, exact=True)
    order_u, order_s = _rel(u_two, u_one), _rel(s_two[1:], s_one[1:])
    rounding_u = _rel(u_one, u_exact)
    assert order_u > 0 and order_s > 0, (order_u, order_s)  # the two orders do differ
    assert order_u <= FWD_ROUNDING_BOUND / 4 and order_s <= FWD_ROUNDING_BOUND / 4, (order_u, order_s)
    assert order_u <= rounding_u / 4, (order_u, rounding_u)
    assert _rel(s_one[1:], s_exact[1:]) < 1e-2  # the emulation itself is the forward's algebra


def test_the_smoke_bounds_u_where_wgmma_writes_it(monkeypatch):
    """Which [ckpt+U] cases the GPU smoke holds to FWD_ROUNDING_BOUND instead of bitwise,
    and where it requires the training forward's O bitwise the plain one's: derived from
    the kernel layers the product (compile_kernel.product_algorithm) or --fwd-kernel
    picks, so wgmma training forwards (bf16 and fp16 on sm_90a) get the bound, pipelined ones (other
    archs, a forced pipelined) bitwise, and plain and training forward always share a layer."""
    import tests.numerics.la_frost_bwd_smoke as smoke

    bf16 = next(c for c in smoke.CASES if c.dtype == "bfloat16")
    fp16 = next(c for c in smoke.CASES if c.dtype == "float16")
    for family in ("gdn", "kda"):
        assert smoke.values_on_wgmma(bf16, family, "sm_90a")  # the product's training forward: wgmma
        assert smoke.values_on_wgmma(fp16, family, "sm_90a")
        assert not smoke.values_on_wgmma(bf16, family, "sm_100a") and not smoke.values_on_wgmma(fp16, family, "sm_100a")
        assert smoke.one_forward_kernel(bf16, family, "sm_90a") and smoke.one_forward_kernel(fp16, family, "sm_90a")
    monkeypatch.setattr(smoke, "FWD_KERNEL", "pipelined")  # --fwd-kernel pipelined: every forward on pipelined
    for case in (bf16, fp16):
        assert not smoke.values_on_wgmma(case, "gdn", "sm_90a") and smoke.one_forward_kernel(case, "gdn", "sm_90a")


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
