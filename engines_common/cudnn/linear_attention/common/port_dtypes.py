"""Kernel-native dtype rules per port, checked against a linear-attention facts record.

Engines that hand the caller's buffers straight to their kernels accept only the dtypes
those kernels read. A `PortDtypes` table says, per port, which dtypes are accepted:
a tuple of `data_type`s, or `IO` for "the q/k/v dtype". q, k and v must share one dtype
from `io_dtypes`. An unset dtype (None: "the engine's native choice", docs/LINEAR_ATTENTION.md §1.2) is always
accepted. `reason(facts, engine)` returns the first violation as a message naming the
engine, the port and the dtype found, or None.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from cudnn.ops.data_types import data_type

if TYPE_CHECKING:
    from cudnn.linear_attention.common.facts import LinearAttentionFacts


class _IoDtype:
    """The marker type of `IO`: the port takes the q/k/v dtype."""

    def __repr__(self) -> str:
        return "IO"


IO = _IoDtype()

PortRule = tuple[data_type, ...] | _IoDtype


@dataclass(frozen=True)
class PortDtypes:
    io_dtypes: tuple[data_type, ...]
    ports: Mapping[str, PortRule] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ports", MappingProxyType(dict(self.ports)))

    def allowed(self, port: str, io: data_type | None) -> tuple[data_type, ...] | None:
        """The dtypes `port` accepts when q/k/v are `io` (None: the port has no rule)."""
        rule = self.ports.get(port)
        if rule is None:
            return None
        if rule is IO:
            return self.io_dtypes if io is None else (io,)
        return rule

    def reason(self, f: LinearAttentionFacts, engine: str) -> str | None:
        """Why the wired ports' dtypes are not the kernels' own, or None."""
        io = f.io_dtype
        if not f.uniform_io:
            return f"{engine}: q, k and v must share one dtype"
        if io is not None and io not in self.io_dtypes:
            return f"{engine}: q/k/v dtype must be {_names(self.io_dtypes)}, got {io.name}"
        for port in self.ports:
            dt = f.dtype(port)
            allowed = self.allowed(port, io)
            if dt is not None and allowed is not None and dt not in allowed:
                return f"{engine}: '{port}' dtype must be {_names(allowed)}, got {dt.name}"
        return None


def _names(dtypes: tuple[data_type, ...]) -> str:
    return " or ".join(d.name for d in dtypes)


__all__ = ["IO", "PortDtypes", "PortRule"]
