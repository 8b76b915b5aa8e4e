"""GPU smoke check of the cuTile GDN / KDA backward against the float64 chunked reference.

Run on the GPU machine from the repo root:
  PYTHONPATH=$(python3 tools/pythonpath.py) python3 tests/numerics/la_cutile_bwd_smoke.py
"""
import math
import sys

import torch
import torch.nn.functional as F

from tests.reference.gdn import naive_chunk_gdn_bwd
from tests.reference.kda import naive_chunk_kda_bwd


def rel(a, b):
    b = b.double()
    return ((a.double() - b).norm() / b.norm().clamp_min(1e-30)).item()


def run_case(lens, H, HV, K, V, use_h0, l2, kda=False, dtype=torch.bfloat16, seed=0):
    from cudnn.linear_attention.cutile.kernels.bwd import bwd_layout, chunked_bwd
    torch.manual_seed(seed)
    dev = "cuda"
    T, N, HO = sum(lens), len(lens), max(H, HV)
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device=dev)
    q = torch.randn(T, H, K, device=dev).to(dtype)
    k = torch.randn(T, H, K, device=dev)
    k = (k if l2 else F.normalize(k, dim=-1)).to(dtype)
    v = torch.randn(T, HV, V, device=dev).to(dtype)
    g = F.logsigmoid(torch.randn((T, HO, K) if kda else (T, HO), device=dev)) * 0.5
    beta = torch.sigmoid(torch.randn(T, HO, device=dev))
    h0 = torch.randn(N, HO, V, K, device=dev) * 0.1 if use_h0 else None
    d_out = torch.randn(T, HO, V, device=dev).to(dtype)
    dht = torch.randn(N, HO, V, K, device=dev) * 0.1
    scale = 1 / math.sqrt(K)
    lay = bwd_layout(T, N, H, HV, K, V, kda=kda, io_dtype=dtype, io_itemsize=2,
                     int32_dtype=torch.int32, float32_dtype=torch.float32)
    scratch = lay.carve(torch.empty(lay.size, dtype=torch.uint8, device=dev))
    nan = float("nan")
    dq, dk = (torch.full_like(q, nan) for _ in range(2))
    dv = torch.full_like(v, nan)
    dg, dbeta = torch.full_like(g, nan), torch.full_like(beta, nan)
    dh0 = torch.full((N, HO, V, K), nan, device=dev) if use_h0 else None
    chunked_bwd(q, k, v, g, beta, cu, d_out, dq, dk, dv, dg, dbeta, scratch, kda=kda,
                scale=scale, initial_state=h0, d_final_state=dht, d_initial_state=dh0,
                use_l2norm=l2)
    torch.cuda.synchronize()
    ref_fn = naive_chunk_kda_bwd if kda else naive_chunk_gdn_bwd
    d64 = lambda x: None if x is None else x.double()  # noqa: E731
    ref = ref_fn(d64(q), d64(k), d64(v), d64(g), d64(beta), cu.long(), d64(d_out),
                 d_final_state=d64(dht), scale=scale, initial_state=d64(h0), use_qk_l2norm=l2)
    errs = {"dq": rel(dq, ref.dq), "dk": rel(dk, ref.dk), "dv": rel(dv, ref.dv),
            "dg": rel(dg, ref.dg), "dbeta": rel(dbeta, ref.dbeta)}
    if use_h0:
        errs["dh0"] = rel(dh0, ref.d_initial_state)
    ok = all(e <= 1e-2 for e in errs.values())
    print(f"{'PASS' if ok else 'FAIL'} {'KDA' if kda else 'GDN'} bwd lens={lens} H={H} HV={HV} "
          f"K={K} V={V} h0={use_h0} l2={l2}: " + " ".join(f"{n}={e:.1e}" for n, e in errs.items()),
          flush=True)
    return ok


if __name__ == "__main__":
    results = []
    for kda in (False, True):
        results += [
            run_case([64], 1, 1, 64, 64, False, False, kda=kda),
            run_case([1, 63, 64, 65, 200], 2, 2, 64, 64, True, False, kda=kda),
            run_case([0, 130, 1, 77], 4, 4, 128, 128, True, True, kda=kda),
            run_case([100, 37], 2, 4, 128, 128, False, True, kda=kda),
        ]
    sys.exit(0 if all(results) else 1)
