"""Global-memory tensor views of the FROST forward operands, shared by every kernel layer.

The launch ABI (launch_abi.py) passes bare pointers; ``operand_views`` rebuilds the packed
THD views from FrostFwdConfig plus the runtime token count T and sequence count N (row-major, innermost stride 1):
q [T,H,K], k [T,HK,K], v [T,HV,V], g [T,HO,Kg] (Kg = K or 1), beta [T,HO,Kb], w/out
[T,HO,V], cu_seqlens [N+1], initial/final state [N,HO,V,K]. Imports cutlass.
"""
from __future__ import annotations

from types import SimpleNamespace

import cutlass.cute as cute

from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig


def _packed(ptr, shape):
    stride, acc = [], 1
    for extent in reversed(shape):
        stride.append(acc)
        acc = acc * extent
    return cute.make_tensor(ptr, cute.make_layout(tuple(shape), stride=tuple(reversed(stride))))


def operand_views(c: FrostFwdConfig, p_q, p_k, p_v, p_g, p_beta, p_w, p_cu, p_out, p_h0, p_ht, T, N):
    """Called while a @cute.jit launcher is traced (plain Python around cute ops)."""
    gk = c.K if c.gate_per_channel else 1
    bk = c.K if c.beta_per_channel else 1
    return SimpleNamespace(
        q=_packed(p_q, (T, c.H, c.K)), k=_packed(p_k, (T, c.HK, c.K)), v=_packed(p_v, (T, c.HV, c.V)),
        g=_packed(p_g, (T, c.HO, gk)), beta=_packed(p_beta, (T, c.HO, bk)), w=_packed(p_w, (T, c.HO, c.V)),
        cu=_packed(p_cu, (N + 1,)), out=_packed(p_out, (T, c.HO, c.V)),
        h0=_packed(p_h0, (N, c.HO, c.V, c.K)), ht=_packed(p_ht, (N, c.HO, c.V, c.K)),
    )
