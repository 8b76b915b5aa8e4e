"""Torch-side checks of one summary-op call, shared by the real kernels and the fake ones.

Reads shapes, dtypes and devices only (never data), so it runs on fake tensors while
torch.compile traces. Raises TypeError (cudnn.OpTypeError) for a dtype and ValueError
(cudnn.OpValueError) for a rank, size, device or flag combination, each naming the op,
the argument, what was expected and what was given.

States: summaries return their states in float32 (docs/CONTEXT_PARALLEL.md); a call whose k is float64
keeps float64 states instead, so float64 checks of context parallelism stay exact.
initial_state / d_final_state must already hold that dtype (the ops never convert).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from cudnn.linear_attention.ops._summary_family import SummaryFamily
from cudnn.ops.errors import OpTypeError, OpValueError

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
INDEX = (torch.int32, torch.int64)
GATE_DOMAINS = ("log", "linear")


@dataclass(frozen=True)
class SummaryGeometry:
    T: Any
    N: Any
    HO: Any
    K: Any
    V: Any
    state_dtype: torch.dtype


def state_dtype_for(io: torch.dtype) -> torch.dtype:
    return torch.float64 if io == torch.float64 else torch.float32


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _dims(t: torch.Tensor) -> str:
    return f"dims {list(t.shape)}"


def check_summary_call(op: str, family: SummaryFamily, bound: Mapping[str, Any],
                       backward: bool) -> SummaryGeometry:
    io_port = "q" if backward else "k"
    io = bound[io_port]
    if io.dtype not in FLOATS:
        raise OpTypeError(op, io_port, "a floating dtype", _name(io.dtype))
    g = bound["g"]
    if g.dim() not in (2, 3):
        raise OpValueError(op, "g", "a gate [T, HO] or [T, HO, K]", _dims(g))
    # sizes as far as the tensors have them; _check_tokens rejects any other rank
    T, HO = (io.shape[0] if io.dim() else 0), g.shape[1]
    K = bound["k"].shape[-1] if bound["k"].dim() else 0
    value = bound["dO"] if backward else bound["v"]
    V = value.shape[-1] if value.dim() else 0
    cu = bound["cu_seqlens"]
    if cu.dim() != 1 or cu.shape[0] < 1:
        raise OpValueError(op, "cu_seqlens", "a 1-D tensor [N + 1] of sequence boundaries",
                           _dims(cu))
    if cu.dtype not in INDEX:
        raise OpTypeError(op, "cu_seqlens", "int32 or int64", _name(cu.dtype))
    geo = SummaryGeometry(T=T, N=cu.shape[0] - 1, HO=HO, K=K, V=V,
                          state_dtype=state_dtype_for(io.dtype))
    tokens = ("q", "k", "dO") if backward else ("k", "v")
    for name in tokens:
        _check_tokens(op, name, bound[name], geo, io)
    for name, dims in family.gate_dims.items():
        if name in bound:
            rule = family.beta_rule if name == "beta" else ("io" if name == "w" else "float")
            _check(op, name, bound[name], dims, geo, _allowed(rule, io.dtype), io)
    state = "d_final_state" if backward else "initial_state"
    if bound[state] is not None:
        _check(op, state, bound[state], ("N", "HO", "V", "K"), geo, (geo.state_dtype,), io)
    for name, dims in (("a_log", ("HO",)), ("dt_bias", family.dt_bias_dims)):
        if bound[name] is not None:
            _check(op, name, bound[name], dims, geo, FLOATS, io)
    _check_flags(op, bound)
    return geo


def _allowed(rule: str, io: torch.dtype) -> tuple[torch.dtype, ...]:
    return {"float": FLOATS, "io": (io,), "fp32_or_io": (torch.float32, io)}[rule]


def _check_tokens(op: str, name: str, t: torch.Tensor, geo: SummaryGeometry,
                  io: torch.Tensor) -> None:
    """A THD activation [T, heads, dim] whose heads divide HO, in the io dtype."""
    symbols = {"q": "T, H, K", "k": "T, HK, K", "v": "T, HV, V", "dO": "T, HO, V"}[name]
    if t.dim() != 3:
        raise OpValueError(op, name, f"a THD tensor [{symbols}] (rank 3)",
                           f"{_dims(t)} (rank {t.dim()})")
    if t.shape[0] != geo.T:
        raise OpValueError(op, name, f"T = {geo.T} rows (the token count)", _dims(t))
    heads = t.shape[1]
    if heads < 1 or geo.HO % heads != 0 or (name == "dO" and heads != geo.HO):
        raise OpValueError(op, name, f"a head count dividing HO = {geo.HO} (g's heads)"
                           if name != "dO" else f"HO = {geo.HO} heads (g's)", _dims(t))
    dim = geo.V if name in ("v", "dO") else geo.K
    if t.shape[2] != dim:
        raise OpValueError(op, name, f"head dim {'V' if name in ('v', 'dO') else 'K'} = {dim}",
                           _dims(t))
    if t.dtype != io.dtype:
        raise OpTypeError(op, name, f"the io dtype ({_name(io.dtype)})", _name(t.dtype))
    if t.device != io.device:
        raise OpValueError(op, name, f"a tensor on {io.device}", f"a tensor on {t.device}")


def _check(op: str, name: str, t: torch.Tensor, dims: tuple[str, ...], geo: SummaryGeometry,
           dtypes: tuple[torch.dtype, ...], io: torch.Tensor) -> None:
    want = [getattr(geo, s) for s in dims]
    if t.dim() != len(dims) or list(t.shape) != want:
        raise OpValueError(op, name, f"dims [{', '.join(dims)}] = {want}", _dims(t))
    if t.dtype not in dtypes:
        raise OpTypeError(op, name, " or ".join(map(_name, dtypes)), _name(t.dtype))
    if t.device != io.device:
        raise OpValueError(op, name, f"a tensor on {io.device}", f"a tensor on {t.device}")


def _check_flags(op: str, bound: Mapping[str, Any]) -> None:
    domain, safe = bound["gate_domain"], bound["safe_gate"]
    if domain not in GATE_DOMAINS:
        raise OpValueError(op, "gate_domain", f"one of {list(GATE_DOMAINS)}", repr(domain))
    if domain == "linear" and safe:
        raise OpValueError(op, "gate_domain", "'log' when safe_gate=True", "'linear'")
    if bound["allow_neg_eigval"] and not bound["use_beta_sigmoid_in_kernel"]:
        raise OpValueError(op, "allow_neg_eigval", "False unless use_beta_sigmoid_in_kernel",
                           "True")
    for name in ("a_log", "dt_bias", "gate_lower_bound"):
        if bound.get(name) is not None and not safe:
            raise OpValueError(op, name, "None unless safe_gate=True", "a value")
