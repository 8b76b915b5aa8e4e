"""L1 (GPU): the FROST GDN pre-pass (kernels/chunk_inverse.py, an experiment kernel) against
float64: per (chunk, output head) A = (I + M)^-1 with M_ts = beta_t (k_t . k_s)
e^(Gam_t - Gam_s) for s < t (Gam the chunk's inclusive gate scan, k l2-normalised when
use_l2norm), the rows past a sequence's end zero (so A is the identity there).

Bound: relative Frobenius error <= 1e-2 per chunk (A is stored in bf16; its float64 value
is formed from the bf16 inputs). Cases: lengths 0 / 1 / 63 / 64 / 65 / 1000 mixed, many
short sequences, strongly correlated keys, the e^-30 gates of the diagonal-block fallback,
with and without l2norm; rows no chunk claims are never written (checked against a NaN fill).

  python -m pytest -s tests/numerics/test_frost_chunk_inverse.py
"""
import math
import zlib

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional


pytestmark = [pytest.mark.gpu, pytest.mark.frost]  # skips: tests/conftest.py
REL_BOUND = 1e-2
C = 64


def reference_a(k, g, beta, bos, eos, j, h, hk, l2norm):
    """float64 A of chunk j of the sequence [bos, eos) on head h (key head hk)."""
    t0 = bos + j * C
    n = min(C, eos - t0)
    kc = torch.zeros(C, k.shape[-1], dtype=torch.float64, device=k.device)
    kc[:n] = k[t0:t0 + n, hk].double()
    if l2norm:
        kc = kc / torch.sqrt((kc * kc).sum(-1, keepdim=True) + 1e-6)
    gam = torch.zeros(C, dtype=torch.float64, device=k.device)
    gam[:n] = torch.cumsum(g[t0:t0 + n, h].double(), 0)
    gam[n:] = gam[n - 1]
    b = torch.zeros(C, dtype=torch.float64, device=k.device)
    b[:n] = beta[t0:t0 + n, h].double()
    m = (kc @ kc.T) * torch.exp(torch.clamp(gam[:, None] - gam[None, :], max=0.0)) * b[:, None]
    m = torch.tril(m, -1)
    return torch.linalg.inv(torch.eye(C, dtype=torch.float64, device=k.device) + m)


CASES = [
    ("mixed", [0, 1, 63, 64, 65, 1000], "typical", False),
    ("mixed_l2norm", [1, 63, 64, 65, 1000, 0], "typical", True),
    ("short_many", [(i * 7) % 16 + 1 for i in range(40)], "typical", True),
    ("correlated", [300, 129], "correlated", True),
    ("gates_e30", [200, 64], "e30", False),
]


@pytest.mark.parametrize("name,lens,kind,l2norm", CASES, ids=[c[0] for c in CASES])
def test_chunk_inverse_against_float64(name, lens, kind, l2norm):
    from cudnn.linear_attention.frost.kernels import chunk_inverse as ci
    from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

    torch.manual_seed(zlib.crc32(name.encode()))
    H = 16  # the bench's heads: one compile serves both
    K = V = 128
    T, N = sum(lens), len(lens)
    dev = "cuda"
    cu = torch.tensor([0] + list(torch.cumsum(torch.tensor(lens), 0).tolist()), dtype=torch.int32, device=dev)
    k = torch.randn(max(T, 1), H, K, device=dev)
    if kind == "correlated":
        k = k[:1] + 0.05 * k  # every key near the first: M close to singular structure
    if not l2norm:
        k = F.normalize(k, dim=-1)
    k = k.to(torch.bfloat16)
    g = F.logsigmoid(torch.randn(max(T, 1), H, device=dev)) * 0.5
    if kind == "e30":
        g[::5] = -30.0
    beta = torch.rand(max(T, 1), H, device=dev)
    cfg = FrostFwdConfig(io_dtype="bfloat16", state_dtype="float32", H=H, HK=H, HV=H, K=K, V=V,
                         gate_per_channel=False, beta_per_channel=False, has_w=False, use_l2norm=l2norm,
                         has_initial_state=False, has_final_state=True, gate_align16=False)
    fn = ci.compile_chunk_inverse(cfg)
    R = ci.chunk_rows(T, N)
    images = torch.full((R, H, C * C), float("nan"), dtype=torch.bfloat16, device=dev)
    fn(*ci.chunk_inverse_args(k[:T], g[:T], beta[:T], cu, images))
    torch.cuda.synchronize()
    a = ci.decode_images(images)
    claimed = set()
    worst = 0.0
    for n in range(N):
        bos, eos = int(cu[n]), int(cu[n + 1])
        for j in range(math.ceil((eos - bos) / C)):
            row = bos // C + n + j
            claimed.add(row)
            for h in range(H):
                ref = reference_a(k, g, beta, bos, eos, j, h, h, l2norm)
                got = a[row, h].double()
                err = (torch.linalg.norm(got - ref) / torch.linalg.norm(ref)).item()
                worst = max(worst, err)
                assert err <= REL_BOUND, f"{name}: sequence {n} chunk {j} head {h}: rel err {err:.3e}"
    for row in range(R):
        if row not in claimed:
            assert torch.isnan(a[row].float()).all(), f"{name}: row {row} claims no chunk but was written"
    print(f"{name}: {len(claimed)} chunks x {H} heads, worst rel err {worst:.2e}")
