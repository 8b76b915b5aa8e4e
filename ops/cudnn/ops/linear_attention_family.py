"""The linear-attention families and kinds, and which op each node type is.

A `Family` says what distinguishes one family's nodes from another's (gate and beta
shapes, extra ports and attributes); a `Kind` says which of the four ops of a family a
node is. Every layer that needs to know "is this a KDA backward node, and what does a
KDA gate look like" reads it here: the OpSpecs (linear_attention.py), the facts record
the engines gate on, the FROST kernels' per-family switches and the torch ops.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from cudnn.ops.node_type import NodeType


class Kind(enum.Enum):
    FWD = "fwd"
    BWD = "bwd"
    SUMMARY = "summary"
    SUMMARY_BWD = "summary_bwd"

    @property
    def is_backward(self) -> bool:
        return self in (Kind.BWD, Kind.SUMMARY_BWD)

    @property
    def is_summary(self) -> bool:
        return self in (Kind.SUMMARY, Kind.SUMMARY_BWD)


@dataclass(frozen=True)
class Family:
    """What distinguishes one linear-attention family from another."""
    prefix: str
    per_channel_gate: bool = False   # g [T, HO, K] (KDA, GDN2) instead of [T, HO]
    per_channel_beta: bool = False   # beta [T, HO, K] (GDN2)
    has_w: bool = False              # write gate w (GDN2)
    householder: bool = False        # num_householder sub-tokens on k/v/beta (GDP)
    mamba: bool = False              # Mamba-2: a, d, z, O_pre; no beta
    lower_bound: bool = False        # gate_lower_bound attr (KDA, GDN2)
    beta_guard: bool = False         # beta_guard attr (GDN2)

    def __str__(self) -> str:
        return self.prefix

    @property
    def has_values(self) -> bool:
        """The forward can emit `values` (u_t, one delta-rule step per token) and the
        backward read them: GDN, KDA, GDN-2 (docs/LINEAR_ATTENTION.md §3.8)."""
        return not (self.mamba or self.householder)


GDN_FAMILY = Family("gdn")
KDA_FAMILY = Family("kda", per_channel_gate=True, lower_bound=True)
GDN2_FAMILY = Family("gdn2", per_channel_gate=True, per_channel_beta=True, has_w=True,
                     lower_bound=True, beta_guard=True)
GDP_FAMILY = Family("gdp", householder=True)
MAMBA2_FAMILY = Family("mamba2", mamba=True)
FAMILIES = (GDN_FAMILY, KDA_FAMILY, GDN2_FAMILY, GDP_FAMILY, MAMBA2_FAMILY)

#: spec name suffix and NodeType suffix of each kind (gdn_bwd, NodeType.GDN_BWD).
SUFFIX = {Kind.FWD: "", Kind.BWD: "_bwd", Kind.SUMMARY: "_summary",
          Kind.SUMMARY_BWD: "_summary_bwd"}

#: {node type: (family, kind)} of the 20 linear-attention ops.
_OPS: dict[NodeType, tuple[Family, Kind]] = {
    NodeType[(fam.prefix + SUFFIX[kind]).upper()]: (fam, kind)
    for fam in FAMILIES for kind in Kind
}


def node_type_of(fam: Family, kind: Kind) -> NodeType:
    return NodeType[(fam.prefix + SUFFIX[kind]).upper()]


def op_of(node_type: NodeType) -> tuple[Family, Kind] | None:
    """(family, kind) of a linear-attention node type; None for any other op."""
    return _OPS.get(node_type)
