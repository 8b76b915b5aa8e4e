"""L1 (GPU): the GDN forward in two kernels (engines_frost kernels/fwd_saved_inverse.py, an
experiment: the pre-pass's A read by the four-role chain) against the float64 token
recurrence (tests/reference naive_recurrent_gdn), O and the final state, relative L2 error
<= 1e-2 each; the product's forward on the same inputs beside it (the errors printed).
Cases: lengths 1 / 63 / 64 / 65 / 1000 / 4096 mixed, with and without l2norm, correlated
keys, the e^-30 gates, 40 short sequences.

  python -m pytest -s tests/numerics/test_frost_saved_inverse.py
"""
import math
import zlib

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from tests.reference.gdn import naive_recurrent_gdn  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.frost]  # skips: tests/conftest.py
REL_BOUND = 1e-2
H = 16
K = V = 128

CASES = [
    ("mixed", [1, 63, 64, 65, 1000, 4096], "typical", False),
    ("mixed_l2norm", [4096, 65, 1, 1000, 63, 64], "typical", True),
    ("correlated_l2norm", [2048, 300], "correlated", True),
    ("gates_e30", [1000, 129], "e30", False),
    ("short_many", [(i * 7) % 16 + 1 for i in range(40)], "typical", False),
]


def _rel(x, ref):
    return ((x.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


@pytest.mark.parametrize("name,lens,kind,l2norm", CASES, ids=[c[0] for c in CASES])
def test_two_kernel_forward_against_float64(name, lens, kind, l2norm):
    from cudnn.linear_attention.frost.kernels import fwd
    from cudnn.linear_attention.frost.kernels.fwd_saved_inverse import TwoKernelForward

    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(name.encode()))
    rnd = lambda *s: torch.randn(*s, device="cuda", generator=gen)  # noqa: E731
    T, N = sum(lens), len(lens)
    k = rnd(T, H, K)
    if kind == "correlated":
        common = F.normalize(rnd(1, H, K), dim=-1)
        k = 0.9 * common + 0.436 * F.normalize(k, dim=-1)
    if not l2norm:
        k = F.normalize(k, dim=-1)
    g = F.logsigmoid(rnd(T, H)) * 0.5
    if kind == "e30":
        g[::7] = -30.0
    x = dict(q=rnd(T, H, K).bfloat16(), k=k.bfloat16(), v=rnd(T, H, V).bfloat16(), g=g,
             beta=torch.sigmoid(rnd(T, H)),
             cu_seqlens=torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device="cuda"))
    o = torch.full((T, H, V), float("nan"), dtype=torch.bfloat16, device="cuda")
    ht = torch.full((N, H, V, K), float("nan"), dtype=torch.float32, device="cuda")
    checked = fwd.check_operands(q=x["q"], k=x["k"], v=x["v"], g=x["g"], beta=x["beta"], w=None,
                                 cu_seqlens=x["cu_seqlens"], out=o, initial_state=None, final_state=ht,
                                 use_l2norm=l2norm, gate_per_channel=False, beta_per_channel=False)
    TwoKernelForward(checked, 1 / math.sqrt(K))()
    torch.cuda.synchronize()
    d64 = {n: t.double() if t.is_floating_point() else t.long() for n, t in x.items()}
    ro, rht = naive_recurrent_gdn(*(d64[p] for p in ("q", "k", "v", "g", "beta")), d64["cu_seqlens"],
                                  scale=1 / math.sqrt(K), output_final_state=True, use_qk_l2norm=l2norm)
    errs = {"O": _rel(o, ro), "final_state": _rel(ht, rht)}
    po = torch.empty_like(o)
    pht = torch.empty_like(ht)
    fwd.frost_fwd(q=x["q"], k=x["k"], v=x["v"], g=x["g"], beta=x["beta"], w=None, cu_seqlens=x["cu_seqlens"],
                  out=po, initial_state=None, final_state=pht, scale=1 / math.sqrt(K), use_l2norm=l2norm,
                  gate_per_channel=False, beta_per_channel=False, stream=None)
    torch.cuda.synchronize()
    print(f"{name}: two kernels O {errs['O']:.2e} state {errs['final_state']:.2e}; product O "
          f"{_rel(po, ro):.2e} state {_rel(pht, rht):.2e}")
    assert all(e <= REL_BOUND for e in errs.values()), (name, errs)
