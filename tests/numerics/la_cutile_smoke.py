"""GPU smoke check of the cuTile GDN / KDA forward kernels against a float64 recurrence.

Run on the GPU machine from the repo root:
  PYTHONPATH=$(python3 tools/pythonpath.py) python3 tests/numerics/la_cutile_smoke.py
"""
import math
import sys

import torch
import torch.nn.functional as F


def ref_gdn(q, k, v, g, beta, cu, scale, h0, l2):
    """float64 token recurrence; state stored V-major [N, HO, V, K]."""
    q, k, v, g, beta = (x.double() for x in (q, k, v, g, beta))
    T, H, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    HO = max(H, HV)
    q = q.repeat_interleave(HO // H, 1)
    k = k.repeat_interleave(HO // H, 1)
    v = v.repeat_interleave(HO // HV, 1)
    if l2:
        q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    o = torch.zeros(T, HO, V, dtype=torch.float64, device=q.device)
    N = cu.numel() - 1
    ht = torch.zeros(N, HO, V, K, dtype=torch.float64, device=q.device)
    for n in range(N):
        X = h0[n].double().clone() if h0 is not None else torch.zeros(HO, V, K, dtype=torch.float64, device=q.device)
        for t in range(int(cu[n]), int(cu[n + 1])):
            gt = torch.exp(g[t])
            X = X * (gt[:, None, :] if gt.dim() == 2 else gt[:, None, None])
            kt, vt = k[t], v[t]
            u = beta[t][:, None] * (vt - torch.einsum("hvk,hk->hv", X, kt))
            X = X + u[:, :, None] * kt[:, None, :]
            o[t] = scale * torch.einsum("hvk,hk->hv", X, q[t])
        ht[n] = X
    return o, ht


def rel(a, b):
    return ((a.double() - b).norm() / b.norm().clamp_min(1e-30)).item()


def run_case(lens, H, HV, K, V, use_h0, l2, kda=False, extreme=False, dtype=torch.bfloat16, seed=0):
    from cudnn.linear_attention.cutile.kernels.fwd import chunked_fwd, fwd_layout
    torch.manual_seed(seed)
    dev = "cuda"
    T = sum(lens)
    HO = max(H, HV)
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device=dev)
    q = torch.randn(T, H, K, device=dev).to(dtype)
    k = torch.randn(T, H, K, device=dev)
    if not l2:
        k = F.normalize(k, dim=-1)
    k = k.to(dtype)
    v = torch.randn(T, HV, V, device=dev).to(dtype)
    g = F.logsigmoid(torch.randn((T, HO, K) if kda else (T, HO), device=dev)) * 0.5
    if extreme:   # some channels decay by e^-30 per token: exercises the exact fallback
        g[..., ::7] = -30.0
    beta = torch.sigmoid(torch.randn(T, HO, device=dev))
    h0 = torch.randn(len(lens), HO, V, K, device=dev) * 0.1 if use_h0 else None
    scale = 1 / math.sqrt(K)
    lay = fwd_layout(T, len(lens), HO, K, V, kda=kda, io_dtype=dtype, io_itemsize=2,
                     int32_dtype=torch.int32, float32_dtype=torch.float32)
    ws = torch.empty(lay.size, dtype=torch.uint8, device=dev)
    scratch = lay.carve(ws)
    o = torch.full((T, HO, V), float("nan"), dtype=dtype, device=dev)
    ht = torch.full((len(lens), HO, V, K), float("nan"), device=dev)
    chunked_fwd(q, k, v, g, beta, cu, o, scratch, kda=kda, scale=scale, initial_state=h0,
                final_state=ht, use_l2norm=l2)
    torch.cuda.synchronize()
    ro, rht = ref_gdn(q, k, v, g, beta, cu, scale, h0, l2)
    eo, eh = rel(o, ro), rel(ht, rht)
    ok = eo <= 1e-2 and eh <= 1e-2 and not torch.isnan(o).any() and not torch.isnan(ht).any()
    print(f"{'PASS' if ok else 'FAIL'} {'KDA' if kda else 'GDN'}{' extreme' if extreme else ''} lens={lens} H={H} HV={HV} K={K} V={V} h0={use_h0} "
          f"l2={l2}: rel_o={eo:.2e} rel_ht={eh:.2e}", flush=True)
    return ok


CASES = [  # (lens, H, HV, K, V, initial state, l2norm, family, extreme gates)
    ([64], 1, 1, 64, 64, False, False, "gdn", False),
    ([1, 63, 64, 65, 200], 2, 2, 64, 64, True, False, "gdn", False),
    ([0, 130, 1, 0, 77], 4, 4, 128, 128, True, True, "gdn", False),
    ([100, 37], 2, 4, 64, 128, False, True, "gdn", False),
    ([1000, 65, 1], 4, 8, 128, 64, True, False, "gdn", False),
    ([300, 65], 2, 2, 128, 128, True, True, "gdn", True),
    ([64], 1, 1, 64, 64, False, False, "kda", False),
    ([1, 63, 64, 65, 200], 2, 2, 64, 64, True, False, "kda", False),
    ([0, 130, 1, 0, 77], 4, 4, 128, 128, True, True, "kda", False),
    ([100, 37], 2, 4, 64, 128, False, True, "kda", False),
    ([300, 65], 2, 2, 128, 128, True, True, "kda", True),
]

if __name__ == "__main__":
    only = sys.argv[1] if len(sys.argv) > 1 else None   # "gdn" or "kda": one family
    results = [run_case(*c[:7], kda=c[7] == "kda", extreme=c[8])
               for c in CASES if only in (None, c[7])]
    sys.exit(0 if all(results) else 1)
