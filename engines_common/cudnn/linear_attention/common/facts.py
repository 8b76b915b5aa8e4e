"""The linear-attention graph analyzer: one frozen facts record per graph.

`linear_attention_facts(graph)` reads a single-node linear-attention graph once and is
memoized on the graph (from validation on; any later mutation drops the memo). Every
linear-attention engine gates on this record instead of re-reading the graph:
- `invalid_reason`: why the graph is not one valid linear-attention node: several nodes,
  another op, or a node that breaks its OpSpec (ir's `node_violations`: the op's ports,
  attributes, outputs, shape checks and support rules, all stated in ops/). Not None
  means every linear-attention engine declines with it (`facts.require_valid`). A valid
  record therefore guarantees everything the op spec says (THD ranks, HK in {H, HV},
  gates at HO heads and K channels, state dims, flag combinations): engines gate only on
  what their kernels add.
- geometry in the spec's notation: head counts h_q/h_k/h_v/h_o (HO = max(H, HV);
  summaries take it from g), head dims d_qk (K) / d_v (V), total_t (T), n_seq
  (N = len(cu_seqlens) - 1);
- dtypes of every wired port (None = unset, "the engine's native choice"), uniform_io,
  state_pair_match;
- which optional inputs/outputs are wired, and `flags`: every attribute with its effective
  value (scale None -> 1/sqrt(K); gate_lower_bound None -> -5.0 under safe_gate).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from cudnn.conformance import node_violations
from cudnn.engines.planning_state import facts_for
from cudnn.ops.data_types import data_type
from cudnn.ops.linear_attention_family import Family, Kind, op_of
from cudnn.ops.node_type import NodeType

if TYPE_CHECKING:
    from cudnn import Node, pygraph

#: the safe-gate lower bound engines use when gate_lower_bound is None (docs/LINEAR_ATTENTION.md §1.3).
DEFAULT_GATE_LOWER_BOUND = -5.0


@dataclass(frozen=True)
class LinearAttentionFlags:
    """Every linear-attention attribute with its effective value (the defaults of docs/LINEAR_ATTENTION.md §1.3 for
    attributes the op does not have)."""
    scale: float | None = None
    scale_is_default: bool = True
    output_final_state: bool = False
    output_transition: bool = False
    use_qk_l2norm: bool = False
    checkpoint_every_n_tokens: int = 0
    use_beta_sigmoid: bool = False
    allow_neg_eigval: bool = False
    beta_guard: bool = False
    safe_gate: bool = False
    gate_domain: str = "log"
    gate_lower_bound: float | None = None
    batch_invariant: bool = False
    overwrite_initial_state: bool = False
    num_householder: int = 1
    dt_softplus: bool = True
    dt_min: float = 0.0
    dt_max: float = math.inf
    output_pre_gate: bool = False
    output_values: bool = False


_FLAG_NAMES = frozenset(f.name for f in fields(LinearAttentionFlags)) - {"scale_is_default"}


@dataclass(frozen=True)
class LinearAttentionFacts:
    invalid_reason: str | None
    node: Node | None = field(default=None, compare=False, repr=False)
    node_name: str | None = None
    node_type: NodeType | None = None
    family: Family | None = None         # GDN_FAMILY, ... (cudnn.ops.linear_attention_family)
    kind: Kind | None = None             # FWD, BWD, SUMMARY, SUMMARY_BWD
    h_q: int | None = None
    h_k: int | None = None
    h_v: int | None = None
    h_o: int | None = None
    d_qk: int | None = None
    d_v: int | None = None
    total_t: int | None = None
    n_seq: int | None = None
    #: rows of initial_state: n_seq, or the pool size when state_indices is wired.
    state_rows: int | None = None
    #: GDP only: "expanded" ([T*n, ...]) or "token_major" ([T, n, ...]) k/v/beta.
    householder_layout: str | None = None
    dtypes: Mapping[str, data_type | None] = field(default_factory=lambda: MappingProxyType({}))
    io_dtype: data_type | None = None
    uniform_io: bool = False
    state_pair_match: bool = False
    inputs: frozenset[str] = frozenset()
    outputs: frozenset[str] = frozenset()
    flags: LinearAttentionFlags = field(default_factory=LinearAttentionFlags)

    @property
    def valid(self) -> bool:
        return self.invalid_reason is None

    @property
    def is_backward(self) -> bool:
        return self.kind is not None and self.kind.is_backward

    @property
    def is_summary(self) -> bool:
        return self.kind is not None and self.kind.is_summary

    @property
    def uses_state_pool(self) -> bool:
        return "state_indices" in self.inputs

    def has_input(self, port: str) -> bool:
        return port in self.inputs

    def has_output(self, port: str) -> bool:
        return port in self.outputs

    def dtype(self, port: str) -> data_type | None:
        """dtype of a wired port (None when unset or not wired)."""
        return self.dtypes.get(port)

    def require_valid(self, engine: str) -> None:
        """Decline (NotImplementedError) for an invalid graph, naming the engine."""
        if self.invalid_reason is not None:
            raise NotImplementedError(f"{engine}: {self.invalid_reason}")


def linear_attention_facts(graph: pygraph) -> LinearAttentionFacts:
    """The facts record of `graph`, memoized on the graph once it is validated."""
    return facts_for(graph, analyze_linear_attention)


def analyze_linear_attention(graph: Any) -> LinearAttentionFacts:
    """Read the facts of a graph (anything with `.nodes`); see the module docstring."""
    nodes = list(graph.nodes)
    la_nodes = [n for n in nodes if op_of(n.node_type) is not None]
    if not la_nodes:
        kinds = ", ".join(sorted({n.node_type.name for n in nodes})) or "none"
        return LinearAttentionFacts(f"the graph has no linear-attention node (node types: "
                                    f"{kinds})")
    if len(nodes) != 1:
        names = ", ".join(f"'{n.name}' ({n.node_type.name})" for n in nodes)
        return LinearAttentionFacts(f"linear-attention engines serve single-node graphs; this "
                                    f"graph has {len(nodes)} nodes: {names}")
    return _node_facts(nodes[0])


def _node_facts(node: Node) -> LinearAttentionFacts:
    fam, kind = op_of(node.node_type)
    reasons = node_violations(node)
    if reasons:  # geometry and flags of a malformed node would mean nothing
        return LinearAttentionFacts("; ".join(reasons), node=node, node_name=node.name,
                                    node_type=node.node_type, family=fam, kind=kind)
    geo = _geometry(node, fam, kind)
    dtypes = {port: t.data_type for port, t in (*node.inputs.items(), *node.outputs.items())}
    io = [dtypes[p] for p in ("q", "k", "v") if p in dtypes]
    flags = _flags(node, fam, geo.get("d_qk"))
    return LinearAttentionFacts(
        invalid_reason=None,
        node=node, node_name=node.name, node_type=node.node_type, family=fam,
        kind=kind, dtypes=MappingProxyType(dtypes), io_dtype=io[0] if io else None,
        uniform_io=len(set(io)) == 1, state_pair_match=_state_pairs_match(dtypes),
        inputs=frozenset(node.inputs), outputs=frozenset(node.outputs), flags=flags, **geo)


def _dims(node: Node, port: str) -> tuple[int, ...] | None:
    t = node.inputs.get(port) or node.outputs.get(port)
    return None if t is None else tuple(t.dim)


def _axis(dims: tuple[int, ...] | None, axis: int) -> int | None:
    if dims is None or not -len(dims) <= axis < len(dims):
        return None
    return dims[axis]


def _first(*values: int | None) -> int | None:
    return next((v for v in values if v is not None), None)


def _geometry(node: Node, fam: Family, kind: Kind) -> dict[str, Any]:
    d = {p: _dims(node, p) for p in ("q", "k", "v", "g", "beta", "w", "dO", "O",
                                     "cu_seqlens", "initial_state")}
    h_q, h_k, h_v = (_axis(d[p], -2) for p in ("q", "k", "v"))
    gate_heads = _first(_axis(d["g"], 1), _axis(d["dO"], 1))
    if fam.mamba:
        h_o = _first(h_v, gate_heads)
    elif kind in (Kind.SUMMARY, Kind.SUMMARY_BWD) or h_q is None or h_v is None:
        h_o = gate_heads
    else:
        h_o = max(h_q, h_v)
    cu = d["cu_seqlens"]
    token_ports = ("q", "g", "dO") if fam.householder else ("q", "k", "v", "g", "dO")
    return {
        "h_q": h_q, "h_k": h_k, "h_v": h_v, "h_o": h_o,
        "d_qk": _first(_axis(d["q"], -1), _axis(d["k"], -1)),
        "d_v": _first(_axis(d["v"], -1), _axis(d["dO"], -1), _axis(d["w"], -1)),
        "total_t": _first(*(_axis(d[p], 0) for p in token_ports)),
        "n_seq": cu[0] - 1,
        "state_rows": _axis(d["initial_state"], 0),
        "householder_layout": _householder_layout(d["k"], fam),
    }


def _householder_layout(k: tuple[int, ...] | None, fam: Family) -> str | None:
    if not fam.householder or k is None:
        return None
    return "token_major" if len(k) == 4 else "expanded"


def _state_pairs_match(dtypes: Mapping[str, data_type | None]) -> bool:
    """No state pair has two set, different dtypes (unset is the engine's choice)."""
    for a, b in (("initial_state", "final_state"), ("d_final_state", "d_initial_state")):
        da, db = dtypes.get(a), dtypes.get(b)
        if da is not None and db is not None and da != db:
            return False
    return True


def _flags(node: Node, fam: Family, d_qk: int | None) -> LinearAttentionFlags:
    values = {a.name: node.param(a.name) for a in node.spec.attrs if a.name in _FLAG_NAMES}
    scale = values.get("scale")
    values["scale_is_default"] = scale is None
    if scale is None and d_qk and not fam.mamba:
        values["scale"] = 1.0 / math.sqrt(d_qk)
    if fam.lower_bound and values.get("safe_gate") and values.get("gate_lower_bound") is None:
        values["gate_lower_bound"] = DEFAULT_GATE_LOWER_BOUND
    return LinearAttentionFlags(**values)


__all__ = ["DEFAULT_GATE_LOWER_BOUND", "LinearAttentionFacts", "LinearAttentionFlags",
           "analyze_linear_attention", "linear_attention_facts"]
