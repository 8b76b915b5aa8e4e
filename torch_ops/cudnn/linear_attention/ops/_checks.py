"""Torch-side checks of one op call, shared by the real kernels and the fake ones.

`check_call(op, family, bound, backward)` reads shapes, dtypes and devices only (never
data), so it runs unchanged on fake tensors while torch.compile traces. It returns the
call's `Geometry` or raises, naming the op and the argument, what was expected and what
was given: TypeError (cudnn.OpTypeError) for a dtype, ValueError (cudnn.OpValueError) for
a rank, a size, a device or a flag combination. Engine-specific limits (head dims, dtypes
a kernel lacks) are not checked here: engines decline those, and the error lists why.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from cudnn.linear_attention.ops._family import INDEX_DTYPES, DtypeRule, Family, PortRule
from cudnn.ops.errors import OpTypeError, OpValueError

GATE_DOMAINS = ("log", "linear")


@dataclass(frozen=True)
class Geometry:
    """Sizes of one call in the spec's symbols (ints, or SymInts while tracing)."""
    T: Any
    N: Any
    H: Any
    HK: Any
    HV: Any
    HO: Any
    K: Any
    V: Any
    state_dtype: torch.dtype

    def size(self, symbol: str) -> Any:
        return getattr(self, symbol)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _dims_text(t: torch.Tensor) -> str:
    return f"dims {list(t.shape)}"


def _require_thd(op: str, name: str, t: torch.Tensor, symbols: str) -> None:
    if t.dim() != 3:
        raise OpValueError(op, name, f"a THD tensor [{symbols}] (rank 3)",
                           f"{_dims_text(t)} (rank {t.dim()})")


def check_call(op: str, family: Family, bound: Mapping[str, Any], backward: bool) -> Geometry:
    q, k, v, cu = bound["q"], bound["k"], bound["v"], bound["cu_seqlens"]
    _require_thd(op, "q", q, "T, H, K")
    _require_thd(op, "k", k, "T, HK, K")
    _require_thd(op, "v", v, "T, HV, V")
    if cu.dim() != 1 or cu.shape[0] < 1:
        raise OpValueError(op, "cu_seqlens", "a 1-D tensor [N + 1] of sequence boundaries",
                           _dims_text(cu))
    if cu.dtype not in INDEX_DTYPES:
        raise OpTypeError(op, "cu_seqlens", DtypeRule.INDEX.value, _dtype_name(cu.dtype))
    T, H, K = q.shape
    HK, HV, V = k.shape[1], v.shape[1], v.shape[2]
    HO = max(H, HV)
    if HO % H != 0 or HO % HV != 0:
        raise OpValueError(op, "v", f"a head count HV that divides or is divided by H = {H}",
                           f"HV = {HV}")
    if HK != H and HK != HV:
        raise OpValueError(op, "k", f"a head count HK equal to H = {H} or HV = {HV}",
                           f"HK = {HK}")
    initial = bound["initial_state"]
    state_dtype = torch.float32 if initial is None else initial.dtype
    geo = Geometry(T=T, N=cu.shape[0] - 1, H=H, HK=HK, HV=HV, HO=HO, K=K, V=V,
                   state_dtype=state_dtype)
    for name in _checked_ports(family, backward):
        tensor = bound.get(name)
        if tensor is not None:
            _check_port(op, family.ports[name], tensor, geo, q)
    _check_flags(op, bound)
    _check_checkpoints(op, bound, q.dtype, backward)
    return geo


def _checked_ports(family: Family, backward: bool) -> tuple[str, ...]:
    ports = ("q", "k", "v", *family.gate_names, "initial_state", "a_log", "dt_bias")
    if backward:
        ports += ("dO", "d_final_state", "state_checkpoints")
    return ports


def _check_port(op: str, rule: PortRule, t: torch.Tensor, geo: Geometry,
                q: torch.Tensor) -> None:
    symbols = ", ".join(rule.dims)
    if t.dim() != len(rule.dims):
        raise OpValueError(op, rule.name, f"a tensor [{symbols}] (rank {len(rule.dims)})",
                           f"{_dims_text(t)} (rank {t.dim()})")
    for axis, symbol in enumerate(rule.dims):
        if symbol == "rows":  # checkpoint rows: any count (checked against the cadence)
            continue
        if t.shape[axis] != geo.size(symbol):
            want = [geo.size(s) if s != "rows" else "rows" for s in rule.dims]
            raise OpValueError(op, rule.name, f"dims [{symbols}] = {want}", _dims_text(t))
    allowed = rule.dtype.allowed(q.dtype, geo.state_dtype)
    if t.dtype not in allowed:
        raise OpTypeError(op, rule.name, rule.dtype.describe(q.dtype, geo.state_dtype),
                          _dtype_name(t.dtype))
    if t.device != q.device:
        raise OpValueError(op, rule.name, f"a tensor on q's device ({q.device})",
                           f"a tensor on {t.device}")


def _check_flags(op: str, bound: Mapping[str, Any]) -> None:
    domain = bound["gate_domain"]
    if domain not in GATE_DOMAINS:
        raise OpValueError(op, "gate_domain", f"one of {list(GATE_DOMAINS)}", repr(domain))
    safe = bound["safe_gate"]
    if domain == "linear" and safe:
        raise OpValueError(op, "gate_domain", "'log' when safe_gate=True (the safe gate "
                           "produces a log-domain decay)", "'linear'")
    if bound["allow_neg_eigval"] and not bound["use_beta_sigmoid_in_kernel"]:
        raise OpValueError(op, "allow_neg_eigval", "False unless use_beta_sigmoid_in_kernel "
                           "(beta_eff = 2 sigmoid(beta))", "True")
    for name in ("a_log", "dt_bias"):
        if bound[name] is not None and not safe:
            raise OpValueError(op, name, "None unless safe_gate=True", "a tensor")
    if bound.get("gate_lower_bound") is not None and not safe:
        raise OpValueError(op, "gate_lower_bound", "None unless safe_gate=True",
                           repr(bound["gate_lower_bound"]))


def _check_checkpoints(op: str, bound: Mapping[str, Any], q_dtype: torch.dtype,
                       backward: bool) -> None:
    every = bound["checkpoint_every_n_tokens"]
    if every < 0:
        raise OpValueError(op, "checkpoint_every_n_tokens", "an int >= 0", str(every))
    if backward:
        if bound["state_checkpoints"] is not None and every <= 0:
            raise OpValueError(op, "checkpoint_every_n_tokens",
                               "the cadence (> 0) of the state_checkpoints passed", str(every))
        return
    dtype = bound["checkpoint_dtype"]
    if dtype is not None and dtype not in (torch.float32, q_dtype):
        raise OpTypeError(op, "checkpoint_dtype", f"None, float32 or q's dtype "
                          f"({_dtype_name(q_dtype)})", _dtype_name(dtype))


def checkpoint_rows(geo: Geometry, every: int) -> Any:
    """Rows allocated for state_checkpoints at cadence `every` (spec §3.7 upper bound)."""
    return torch.sym_max(geo.T // every + geo.N, 1)
