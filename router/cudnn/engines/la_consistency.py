"""Consistency rules of a linear-attention node (../spec/linear_attention.md section 2.7).

A node that breaks any of them is served by no linear-attention engine: the facts record
carries the joined reasons as `invalid_reason`. Most rules are also enforced when the
graph is built or validated; they are checked again here because engines trust the facts
record alone, and a Node can be assembled without the builders.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from cudnn.ops.linear_attention import (GDN2_FAMILY, GDN_FAMILY, GDP_FAMILY, KDA_FAMILY,
                                        MAMBA2_FAMILY)
from cudnn.ops.linear_attention_rules import Family, Kind
from cudnn.ops.node_type import NodeType

if TYPE_CHECKING:
    from cudnn import Node

_SUFFIX = {Kind.FWD: "", Kind.BWD: "_BWD", Kind.SUMMARY: "_SUMMARY",
           Kind.SUMMARY_BWD: "_SUMMARY_BWD"}

#: {node type: (family, kind)} of the 20 linear-attention ops.
LA_OPS: dict[NodeType, tuple[Family, Kind]] = {
    NodeType[f"{fam.prefix.upper()}{_SUFFIX[kind]}"]: (fam, kind)
    for fam in (GDN_FAMILY, KDA_FAMILY, GDN2_FAMILY, GDP_FAMILY, MAMBA2_FAMILY)
    for kind in Kind
}

# Values of attributes an op does not declare (the spec's defaults).
_ABSENT_ATTR_DEFAULTS: dict[str, Any] = {
    "safe_gate": False, "gate_domain": "log", "gate_lower_bound": None,
    "checkpoint_every_n_tokens": 0, "overwrite_initial_state": False,
    "allow_neg_eigval": False, "use_beta_sigmoid": False, "num_householder": 1,
    "output_pre_gate": False, "dt_min": 0.0, "dt_max": float("inf"),
}


def la_op_of(node_type: NodeType) -> tuple[Family, Kind] | None:
    return LA_OPS.get(node_type)


def _param(node: Node, attr: str) -> Any:
    if attr in node.params:
        return node.params[attr]
    if any(a.name == attr for a in node.spec.attrs):
        return node.spec.attr(attr).default
    return _ABSENT_ATTR_DEFAULTS[attr]


def rule_violations(node: Node, fam: Family, kind: Kind, n_seq: int | None,
                    total_t: int | None) -> list[str]:
    """Every consistency rule `node` breaks, as readable reasons (empty: consistent)."""
    return list(_violations(node, fam, kind, n_seq, total_t))


def _violations(node: Node, fam: Family, kind: Kind, n_seq: int | None,
                total_t: int | None) -> Iterator[str]:
    ins, outs = node.inputs, node.outputs
    p = lambda attr: _param(node, attr)  # noqa: E731 - local shorthand
    fwd_like = kind in (Kind.FWD, Kind.SUMMARY)
    for port in node.spec.input_ports:
        if port.required and port.name not in ins:
            yield f"required input '{port.name}' is not wired"
    if kind in (Kind.FWD, Kind.BWD) and "d_initial_state" in outs and "initial_state" not in ins:
        yield "d_initial_state is requested without initial_state"
    yield from _state_index_rules(ins, kind, n_seq)
    if not fam.mamba:
        yield from _gate_rules(ins, p, fam)
    if fwd_like:
        grads = sorted({"d_a_log", "d_dt_bias"} & set(outs))
        if grads:
            yield f"parameter gradients {grads} on a forward node"
    if kind is Kind.BWD:
        for param, grad in (("a_log", "d_a_log"), ("dt_bias", "d_dt_bias"), ("d", "dD")):
            if (param in ins) != (grad in outs):
                yield f"{grad} must be present exactly when {param} is (got {param} " \
                      f"{'wired' if param in ins else 'absent'}, {grad} " \
                      f"{'present' if grad in outs else 'absent'})"
            elif param in ins and tuple(ins[param].dim) != tuple(outs[grad].dim):
                yield f"{grad} dims {list(outs[grad].dim)} differ from {param} dims " \
                      f"{list(ins[param].dim)}"
    yield from _checkpoint_rules(ins, outs, p, kind)
    yield from _overwrite_rules(ins, outs, p, kind)
    if fam.householder:
        yield from _householder_rules(node, p, total_t)
    if fam.mamba:
        yield from _mamba_rules(node, p, kind)


def _state_index_rules(ins: Any, kind: Kind, n_seq: int | None) -> Iterator[str]:
    if "state_indices" not in ins:
        return
    if kind is not Kind.FWD:
        yield "state_indices is a forward-only input"
    if "initial_state" not in ins:
        yield "state_indices requires initial_state"
    dims = tuple(ins["state_indices"].dim)
    if n_seq is not None and dims != (n_seq,):
        yield f"state_indices must be [N] = [{n_seq}], got {list(dims)}"


def _gate_rules(ins: Any, p: Any, fam: Family) -> Iterator[str]:
    for port in ("a_log", "dt_bias"):
        if port in ins and not p("safe_gate"):
            yield f"{port} requires safe_gate=True"
    domain = p("gate_domain")
    domain = "log" if domain is None else domain
    if domain not in ("log", "linear"):
        yield f"gate_domain must be 'log' or 'linear', got {domain!r}"
    elif domain == "linear" and p("safe_gate"):
        yield "gate_domain='linear' is incompatible with safe_gate=True"
    if fam.lower_bound and p("gate_lower_bound") is not None and not p("safe_gate"):
        yield "gate_lower_bound requires safe_gate=True"
    if p("allow_neg_eigval") and not p("use_beta_sigmoid"):
        yield "allow_neg_eigval requires use_beta_sigmoid=True"


def _checkpoint_rules(ins: Any, outs: Any, p: Any, kind: Kind) -> Iterator[str]:
    every = p("checkpoint_every_n_tokens") or 0
    if every < 0:
        yield f"checkpoint_every_n_tokens must be >= 0, got {every}"
    if kind is Kind.FWD and (every > 0) != ("state_checkpoints" in outs):
        yield "state_checkpoints must be an output exactly when checkpoint_every_n_tokens > 0 " \
              f"(got {every}, output {'present' if 'state_checkpoints' in outs else 'absent'})"
    if kind is Kind.BWD and every > 0 and "state_checkpoints" not in ins:
        yield "checkpoint_every_n_tokens > 0 requires the state_checkpoints input"


def _overwrite_rules(ins: Any, outs: Any, p: Any, kind: Kind) -> Iterator[str]:
    if not p("overwrite_initial_state"):
        return
    if kind is Kind.FWD and not ("initial_state" in ins and "final_state" in outs):
        yield "overwrite_initial_state requires initial_state and the final_state output"
    if kind is Kind.BWD and not ("d_final_state" in ins and "d_initial_state" in outs):
        yield "overwrite_initial_state requires d_final_state and the d_initial_state output"


def _householder_rules(node: Node, p: Any, total_t: int | None) -> Iterator[str]:
    n = p("num_householder")
    if n is None or n < 1:
        yield f"num_householder must be >= 1, got {n}"
        return
    if total_t is None:
        return
    for port, expanded_rank in (("k", 3), ("v", 3), ("beta", 2)):
        t = node.inputs.get(port)
        if t is None:
            continue
        dims = tuple(t.dim)
        ok = (dims[:1] == (total_t * n,) if len(dims) == expanded_rank
              else dims[:2] == (total_t, n))
        if not ok:
            yield f"{port} must have T*n = {total_t * n} rows or lead with [T, n] = " \
                  f"[{total_t}, {n}] (num_householder {n}), got {list(dims)}"


def _mamba_rules(node: Node, p: Any, kind: Kind) -> Iterator[str]:
    ins, outs = node.inputs, node.outputs
    if "beta" in ins:
        yield "Mamba-2 has no beta input"
    if "d" in ins and len(ins["d"].dim) not in (1, 2):
        yield f"d must be [H] or [H, V], got rank {len(ins['d'].dim)}"
    if "O_pre" in outs and "z" not in ins:
        yield "the O_pre output requires the z gate input"
    if kind is Kind.FWD and p("output_pre_gate") and "O_pre" not in outs:
        yield "output_pre_gate=True requires the O_pre output"
    if kind is Kind.BWD and "z" in ins and "O_pre" not in ins:
        yield "the z-gate backward requires the O_pre input"
    if p("dt_min") > p("dt_max"):
        yield f"dt_min ({p('dt_min')}) must be <= dt_max ({p('dt_max')})"
