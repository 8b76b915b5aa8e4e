"""`GraphContext`: the graph-wide data types (io, intermediate, compute).

intermediate and compute default to io when not given. Writes go through the owning
graph (refused once frozen; otherwise they drop a previous validation, since validate()
fills unset tensor dtypes from these values).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cudnn.ops.data_types import data_type, to_data_type
from cudnn.ops.errors import OpTypeError, show

_NOT_SET = data_type.NOT_SET
_FIELDS = ("io_data_type", "intermediate_data_type", "compute_data_type")


def normalize_dtype(value: Any, where: str, argument: str) -> data_type | None:
    if type(value) is data_type and value is not _NOT_SET:  # the common case, no call
        return value
    try:
        return to_data_type(value)
    except TypeError:
        raise OpTypeError(where, argument, "a cudnn.data_type, a torch dtype or None",
                          show(value)) from None


class GraphContext:
    __slots__ = ("_io", "_intermediate", "_compute", "_before_mutation")

    def __init__(self, io_data_type: Any = None, intermediate_data_type: Any = None,
                 compute_data_type: Any = None,
                 before_mutation: Callable[[str], None] | None = None) -> None:
        io = normalize_dtype(io_data_type, "pygraph", "io_data_type")
        inter = normalize_dtype(intermediate_data_type, "pygraph", "intermediate_data_type")
        comp = normalize_dtype(compute_data_type, "pygraph", "compute_data_type")
        init = object.__setattr__
        init(self, "_io", io)
        init(self, "_intermediate", io if inter is None else inter)
        init(self, "_compute", io if comp is None else comp)
        init(self, "_before_mutation", before_mutation)

    @property
    def io_data_type(self) -> data_type | None:
        return self._io

    @property
    def intermediate_data_type(self) -> data_type | None:
        return self._intermediate

    @property
    def compute_data_type(self) -> data_type | None:
        return self._compute

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in _FIELDS:
            raise AttributeError(f"GraphContext has no attribute '{name}'")
        dt = normalize_dtype(value, "GraphContext", name)
        if self._before_mutation is not None:
            self._before_mutation(f"set the graph's {name}")
        slot = {"io_data_type": "_io", "intermediate_data_type": "_intermediate",
                "compute_data_type": "_compute"}[name]
        object.__setattr__(self, slot, dt)

    def __repr__(self) -> str:
        def text(dt: data_type | None) -> str:
            return "None" if dt is None else dt.name
        return (f"GraphContext(io_data_type={text(self._io)}, intermediate_data_type="
                f"{text(self._intermediate)}, compute_data_type={text(self._compute)})")
