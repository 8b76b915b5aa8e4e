"""FLA's fused gate arguments, computed with torch ops before the kernel.

FLA can fuse the decay and beta activations into its kernels (`use_gate_in_kernel`,
`A_log`, `dt_bias`, `lower_bound`, `use_beta_sigmoid_in_kernel`, `allow_neg_eigval`).
The engines here read the activated values (log-decay g, beta after its sigmoid), so
the drop-in applies the same functions first, in float32 as FLA's kernels do; autograd
differentiates them, so g, A_log, dt_bias and beta receive their gradients in their own
dtypes. Same math, one more elementwise pass.

    GDN:        g = -exp(A_log) * softplus(g + dt_bias)            A_log, dt_bias [HV]
    KDA, GDN-2: g = -exp(A_log) * softplus(g + dt_bias)            dt_bias [HV * K]
                g = lower_bound * sigmoid(exp(A_log) * (g + dt_bias))  when lower_bound
    beta:       sigmoid(beta), times 2 when allow_neg_eigval
softplus has FLA's threshold (x above 20 passes through), which is torch's default.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def _biased(g: torch.Tensor, dt_bias: torch.Tensor | None, channels: int | None) -> torch.Tensor:
    x = g.float()
    if dt_bias is None:
        return x
    # FLA's kernels index the bias flat, per head ([HV]) or per head and channel
    # ([HV * K]): any shape holding those values in that order is read the same way
    bias = dt_bias.float().reshape(-1) if channels is None else \
        dt_bias.float().reshape(-1, channels)
    return x + bias


def gdn_gate(g: torch.Tensor, A_log: torch.Tensor, dt_bias: torch.Tensor | None) -> torch.Tensor:
    """The GDN decay from raw g [B, T, HV]."""
    return -A_log.float().reshape(-1).exp() * F.softplus(_biased(g, dt_bias, None))


def channel_gate(g: torch.Tensor, A_log: torch.Tensor | None, dt_bias: torch.Tensor | None,
                 lower_bound: float | None) -> torch.Tensor:
    """The KDA / GDN-2 decay from raw g [B, T, HV, K]."""
    x = _biased(g, dt_bias, g.shape[-1])
    rate = None if A_log is None else A_log.float().reshape(-1, 1).exp()  # [HV, 1]
    if lower_bound is not None:
        return lower_bound * torch.sigmoid(x if rate is None else rate * x)
    if rate is None:
        # FLA's fused recurrent kernels read a missing A_log as A_log = 1 (the chunked
        # ones refuse it): -e * softplus(...)
        return -math.e * F.softplus(x)
    return -rate * F.softplus(x)


def beta_activation(beta: torch.Tensor, use_sigmoid: bool, allow_neg_eigval: bool) -> torch.Tensor:
    """beta as the kernels read it (post-activation)."""
    if not use_sigmoid:
        return beta
    beta = torch.sigmoid(beta.float())
    return 2.0 * beta if allow_neg_eigval else beta
