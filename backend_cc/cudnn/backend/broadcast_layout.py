"""Rank alignment of broadcast operands for the backend.

The IR broadcasts pointwise and matmul operands numpy-style (right-aligned: a [N] bias
against an [M, N] tensor), but a cuDNN pointwise or matmul descriptor needs every operand
at the rank of the result. A graph *input* of lower rank is therefore described to the
backend with leading extent-1 dims (and matching strides); right-aligned broadcasting
makes that the same tensor, so the caller's buffer is unchanged. The IR tensor itself is
left as the caller built it.

What cannot be expressed is a decline, never a silent reshape: a tensor another op
produces at the lower rank (its descriptor is the producer's output), or one tensor
needed at two different ranks (it has one descriptor and one uid).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cudnn.ops.op_spec import OpGroup

if TYPE_CHECKING:
    from cudnn import Node, Tensor, pygraph

#: ops whose inputs broadcast against the output rank.
BROADCASTING_GROUPS = frozenset({OpGroup.POINTWISE, OpGroup.MATMUL})
#: the rank a pass-by-value scalar without dims is described with (as tensor_scalar does).
SCALAR_RANK = 4


@dataclass
class BroadcastLayouts:
    #: graph input -> (dims, strides) to describe it with in the backend.
    padded: dict[Tensor, tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=dict)
    #: why the backend cannot take the graph (empty: it can, as far as ranks go).
    reasons: list[str] = field(default_factory=list)


def natural_layout(tensor: Tensor) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The tensor's own dims/strides; [1, 1, 1, 1] for a dimensionless host scalar."""
    if not tensor.dim and tensor.is_pass_by_value:
        return (1,) * SCALAR_RANK, (1,) * SCALAR_RANK
    return tuple(tensor.dim), tuple(tensor.stride)


def padded_layout(dims: tuple[int, ...], strides: tuple[int, ...],
                  rank: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """`dims` with leading 1s up to `rank`; the new axes get the span of the old ones as
    stride, so the layout stays a valid (packed where it was packed) description."""
    extra = rank - len(dims)
    span = max((d * s for d, s in zip(dims, strides)), default=1) or 1
    return (1,) * extra + dims, (span,) * extra + strides


def _operand_rank(node: Node, tensor: Tensor) -> int:
    if node.spec.group in BROADCASTING_GROUPS:
        return len(node.outputs[node.spec.outputs[0].name].dim)
    return len(natural_layout(tensor)[0])


def broadcast_layouts(graph: pygraph) -> BroadcastLayouts:
    produced: dict[Tensor, Node] = {t: n for n in graph.nodes for t in n.outputs.values()}
    wanted: dict[Tensor, dict[int, str]] = {}
    for node in graph.nodes:
        for tensor in _distinct(node.inputs.values()):
            wanted.setdefault(tensor, {}).setdefault(_operand_rank(node, tensor), node.name)
    out = BroadcastLayouts()
    for tensor, ranks in wanted.items():
        dims, strides = natural_layout(tensor)
        where = f"tensor '{tensor.name}' (uid {tensor.uid})"
        if len(ranks) > 1:
            uses = ", ".join(f"rank {r} by '{n}'" for r, n in sorted(ranks.items()))
            out.reasons.append(f"{where} is needed at several ranks ({uses}); a backend tensor "
                               "has one rank")
            continue
        (rank,) = ranks
        if rank == len(dims):
            continue
        if tensor in produced or rank < len(dims):
            out.reasons.append(f"{where} has rank {len(dims)} but '{ranks[rank]}' broadcasts it "
                               f"at rank {rank}; the backend needs equal operand ranks and can "
                               f"only pad graph inputs")
            continue
        out.padded[tensor] = padded_layout(dims, strides, rank)
    return out


def _distinct(tensors: Iterable[Tensor]) -> list[Tensor]:
    seen: dict[int, Tensor] = {}
    for t in tensors:
        seen.setdefault(id(t), t)
    return list(seen.values())
