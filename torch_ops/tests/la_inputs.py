"""Argument sets for the torch_ops unit tests: THD tensors of one family on any device.

`make_args("kda", device="meta", H=2, HV=4)` returns the public function's tensor
arguments (q, k, v, g, beta[, w], cu_seqlens) by name, shaped per the spec's THD layout;
values are random on real devices (the unit tests only look at shapes, dtypes and errors).
"""
from __future__ import annotations

from typing import Any

import torch

from cudnn.linear_attention import ops

FUNCTIONS = {"gdn": ops.gated_delta_net, "kda": ops.kimi_delta_attention,
             "gdn2": ops.gated_delta_net_v2}
FORWARD_OPS = {"gdn": "gated_delta_net_fwd", "kda": "kimi_delta_attention_fwd",
               "gdn2": "gated_delta_net_v2_fwd"}
BACKWARD_OPS = {"gdn": "gated_delta_net_bwd", "kda": "kimi_delta_attention_bwd",
                "gdn2": "gated_delta_net_v2_bwd"}


def make_args(family: str, *, device: str = "meta", T: int = 12, N: int = 2, H: int = 2,
              HK: int | None = None, HV: int | None = None, K: int = 16, V: int = 8,
              dtype: torch.dtype = torch.bfloat16, gate_dtype: torch.dtype = torch.float32,
              requires_grad: bool = False) -> dict[str, Any]:
    HK = H if HK is None else HK
    HV = H if HV is None else HV
    HO = max(H, HV)

    def rand(*shape: int, dt: torch.dtype = dtype) -> torch.Tensor:
        t = torch.randn(*shape, device=device, dtype=dt)
        return t.requires_grad_(requires_grad)

    args = dict(q=rand(T, H, K), k=rand(T, HK, K), v=rand(T, HV, V))
    if family == "gdn":
        args.update(g=rand(T, HO, dt=gate_dtype), beta=rand(T, HO, dt=gate_dtype))
    elif family == "kda":
        args.update(g=rand(T, HO, K, dt=gate_dtype), beta=rand(T, HO, dt=gate_dtype))
    else:
        args.update(g=rand(T, HO, K, dt=gate_dtype), beta=rand(T, HO, K), w=rand(T, HO, V))
    bounds = [round(i * T / N) for i in range(N + 1)]
    args["cu_seqlens"] = torch.tensor(bounds, dtype=torch.int32).to(device)
    return args


def state(args: dict[str, Any], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """An initial_state [N, HO, V, K] matching `args`."""
    q, v = args["q"], args["v"]
    n = args["cu_seqlens"].shape[0] - 1
    return torch.zeros(n, max(q.shape[1], v.shape[1]), v.shape[2], q.shape[2],
                       dtype=dtype, device=q.device)
