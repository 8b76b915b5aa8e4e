"""Checks of one op call, shared by the real kernels and the fake ones.

`check_call(op, family, spec, bound)` reads shapes, dtypes and devices only (never data),
so it runs unchanged on fake tensors while torch.compile traces. It returns the dims of
the call's results or raises, naming the op and the argument, what was expected and what
was given: TypeError (cudnn.OpTypeError) for a dtype, ValueError (cudnn.OpValueError)
for a rank, a size, a device or a flag combination.

What a valid gdn / kda / gdn2 node is, the op spec says (cudnn.ops): its port ranks and
dtypes, its shape check and its support rules run here on a view of the call
(`spec_call`), and their errors are re-raised in this op's names. What is checked here
alone is the torch op's own contract: every tensor on q's device, the dtypes of the
arguments relative to q and the state (the op never converts), checkpoint_dtype.
Engine-specific limits (head dims, dtypes a kernel lacks) are not checked: engines
decline those, and the no-engine error lists why.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from cudnn.linear_attention.ops._family import (GRAPH_ATTR_NAMES, NOT_GRAPH_ATTRS, OpFamily)
from cudnn.ops.data_types import to_data_type
from cudnn.ops.errors import OpArgumentError, OpTypeError, OpValueError, show
from cudnn.ops.op_spec import OpCall, OpSpec, PortView

#: graph attribute -> op argument, for messages (GRAPH_ATTR_NAMES the other way).
_OP_NAMES = {graph: op for op, graph in GRAPH_ATTR_NAMES.items()}
_GRAPH_WORD = re.compile(r"\b(" + "|".join(map(re.escape, _OP_NAMES)) + r")\b")


@dataclass(frozen=True)
class CheckedCall:
    """What a checked call's results look like."""
    #: dims of every output the spec's shape rules infer, by graph output port.
    dims: Mapping[str, tuple[Any, ...]]
    #: initial_state's dtype, float32 without one: final_state and d_final_state use it.
    state_dtype: torch.dtype


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _op_words(text: str) -> str:
    """`text` with graph attribute names spelled as the op's arguments."""
    return _GRAPH_WORD.sub(lambda m: _OP_NAMES[m.group(1)], text)


def spec_call(spec: OpSpec, bound: Mapping[str, Any]) -> OpCall:
    """The call as the op spec's rules read a node: tensor arguments as ports (dims and
    dtype), the other graph-describing arguments as attributes (graph spelling)."""
    ports = {p.name for p in spec.ports}
    inputs = {name: PortView(tuple(t.shape), to_data_type(t.dtype))
              for name, t in bound.items() if name in ports and isinstance(t, torch.Tensor)}
    attrs = {a.name for a in spec.attrs}
    params = {GRAPH_ATTR_NAMES.get(name, name): value for name, value in bound.items()
              if value is not None and name not in NOT_GRAPH_ATTRS
              and GRAPH_ATTR_NAMES.get(name, name) in attrs}
    return OpCall(spec=spec, inputs=inputs, params=params)


def check_call(op: str, family: OpFamily, spec: OpSpec, bound: Mapping[str, Any]) -> CheckedCall:
    q = bound["q"]
    initial = bound["initial_state"]
    state_dtype = torch.float32 if initial is None else initial.dtype
    _check_tensors(op, family, spec, bound, q, state_dtype)
    _refuse_unserved(op, bound)
    call = _spec_rules(op, spec, bound)
    _check_checkpoint_dtype(op, bound, q.dtype)
    dims = {out.name: tuple(out.infer(call)) for out in spec.outputs
            if out.infer is not None and out.infer(call) is not None}
    return CheckedCall(dims, state_dtype)


def _check_tensors(op: str, family: OpFamily, spec: OpSpec, bound: Mapping[str, Any],
                   q: torch.Tensor, state_dtype: torch.dtype) -> None:
    """Per tensor argument: the spec's rank and dtype rules, q's device, the op's dtype
    contract."""
    for port in spec.input_ports:
        t = bound.get(port.name)
        if not isinstance(t, torch.Tensor):
            continue
        try:
            view = PortView(tuple(t.shape), to_data_type(t.dtype))
        except TypeError:
            raise OpTypeError(op, port.name, "a real dtype", _dtype_name(t.dtype)) from None
        rank = port.rank_mismatch(view)
        if rank is not None:
            raise OpValueError(op, port.name, *rank)
        dtype = port.dtype_mismatch(view)
        if dtype is not None:
            raise OpTypeError(op, port.name, dtype[0], _dtype_name(t.dtype))
        if t.device != q.device:
            raise OpValueError(op, port.name, f"a tensor on q's device ({q.device})",
                               f"a tensor on {t.device}")
        rule = family.dtype_rule(port.name)
        if rule is not None and t.dtype not in rule.allowed(q.dtype, state_dtype):
            raise OpTypeError(op, port.name, rule.describe(q.dtype, state_dtype),
                              _dtype_name(t.dtype))


def _spec_rules(op: str, spec: OpSpec, bound: Mapping[str, Any]) -> OpCall:
    """The spec's attribute values, shape check and support rules, in this op's names."""
    for attr in spec.attrs:
        argument = _OP_NAMES.get(attr.name, attr.name)
        value = bound.get(argument)
        if value is not None:
            try:
                attr.normalize(op, value)
            except OpArgumentError as exc:
                raise type(exc)(op, argument, exc.expected, exc.given) from None
    call = spec_call(spec, bound)
    if spec.check is not None:
        try:
            spec.check(call)
        except OpArgumentError as exc:
            raise type(exc)(op, _OP_NAMES.get(exc.argument, exc.argument),
                            _op_words(exc.expected), exc.given) from None
    for rule in spec.broken_rules(call):
        argument = _OP_NAMES.get(rule.subject, rule.subject)
        value = bound.get(argument)
        given = "a tensor" if isinstance(value, torch.Tensor) else show(value)
        raise OpValueError(op, argument, "a value the other arguments allow ("
                           f"{_op_words(rule.reason(call))})", given)
    return call


def _refuse_unserved(op: str, bound: Mapping[str, Any]) -> None:
    """Arguments the op accepts (the graph IR and the op spec define them) that no shipped
    engine implements: refused here, by name, rather than planned and declined by every
    engine. GDN-2's beta_guard (docs/LINEAR_ATTENTION.md §3.4): FROST, its decode engine
    and cuTile all lack it, and the float64 reference does not model it."""
    if bound.get("beta_guard") is True:
        raise OpValueError(op, "beta_guard", "False (no engine implements GDN-2's erase-gate "
                           "safeguard, docs/LINEAR_ATTENTION.md §3.4; every other GDN-2 "
                           "argument is served)", "True")


def _check_checkpoint_dtype(op: str, bound: Mapping[str, Any], q_dtype: torch.dtype) -> None:
    dtype = bound.get("checkpoint_dtype")
    if dtype is not None and dtype not in (torch.float32, q_dtype):
        raise OpTypeError(op, "checkpoint_dtype", f"None, float32 or q's dtype "
                          f"({_dtype_name(q_dtype)})", _dtype_name(dtype))
