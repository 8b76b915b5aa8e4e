"""The table of every op: `all_specs()` and per-group counts.

Each group module exports a typed `SPECS` tuple; this module only concatenates them, in
a fixed order, and rejects duplicate names. Nothing registers itself on import.
"""
from __future__ import annotations

from collections import Counter
from types import MappingProxyType
from typing import Mapping

from cudnn.ops import (block_scale, conv, linear_attention, matmul, moe, norm, pointwise,
                       reduction, sdpa, structural)
from cudnn.ops.op_spec import OpGroup, OpSpec

_MODULE_SPECS: tuple[tuple[OpSpec, ...], ...] = (
    pointwise.SPECS,
    matmul.SPECS,
    norm.SPECS,
    reduction.SPECS,
    block_scale.SPECS,
    moe.SPECS,
    conv.SPECS,
    structural.SPECS,
    sdpa.SPECS,
    linear_attention.SPECS,
)


def _build() -> Mapping[str, OpSpec]:
    table: dict[str, OpSpec] = {}
    for specs in _MODULE_SPECS:
        for spec in specs:
            if spec.name in table:
                raise ValueError(f"duplicate OpSpec name {spec.name!r}")
            table[spec.name] = spec
    return MappingProxyType(table)


_TABLE = _build()


def all_specs() -> dict[str, OpSpec]:
    """Every OpSpec by op name (a fresh dict; the specs themselves are immutable)."""
    return dict(_TABLE)


def counts_by_group() -> dict[OpGroup, int]:
    counts = Counter(spec.group for spec in _TABLE.values())
    return {group: counts[group] for group in OpGroup if counts[group]}
