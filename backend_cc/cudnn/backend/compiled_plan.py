"""`BackendPlan`: one finalized cuDNN execution plan of a lowered graph, as the router's
CompiledPlan.

It is built once per (graph, plan index) and shared by every execute, so it holds no
per-call state: each `execute` turns the caller's `{uid: buffer}` pack into device
addresses, and runs the plan at its backend index with the caller's workspace on the
caller's handle (else the handle the graph was lowered with), i.e. on that handle's stream.
Buffers may be framework tensors (`data_ptr()`), `__cuda_array_interface__` /
`__array_interface__` objects (host arrays for pass-by-value scalars) or raw int addresses.
"""
from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cudnn.backend.handles import handle_address
from cudnn.engines.base import CompiledPlan, ExecutionContext

if TYPE_CHECKING:
    from cudnn import pygraph
    from cudnn.backend.lowered_graph import LoweredGraph


def buffer_address(buf: Any, what: str) -> int:
    """The address of `buf`'s first element."""
    if isinstance(buf, numbers.Integral) and not isinstance(buf, bool):
        return int(buf)
    data_ptr = getattr(buf, "data_ptr", None)
    if callable(data_ptr):
        return int(data_ptr())
    for attr in ("__cuda_array_interface__", "__array_interface__"):
        iface = getattr(buf, attr, None)
        if isinstance(iface, Mapping) and "data" in iface:
            return int(iface["data"][0])
    raise TypeError(f"{what}: expected a framework tensor, an object with "
                    f"__cuda_array_interface__ or an int address, got {type(buf).__name__}")


class BackendPlan(CompiledPlan):
    def __init__(self, lowered: LoweredGraph, index: int, name: str) -> None:
        self.lowered = lowered
        self.index = index
        self.name = name
        # the plan is finalized by now, so its workspace size is known and fixed
        self._workspace = int(lowered.backend.get_workspace_size_plan_at_index(index))

    def get_workspace_size(self) -> int:
        return self._workspace

    def execute(self, graph: pygraph, data: Mapping[int, Any], ctx: ExecutionContext) -> None:
        if ctx.has_overrides:
            raise ValueError(f"backend plan '{self.name}': cuDNN backend plans take no "
                             "execute-time shape overrides")
        pack = {int(uid): buffer_address(buf, f"execute: the buffer for uid {uid}")
                for uid, buf in data.items() if buf is not None}
        workspace = 0 if ctx.workspace is None else buffer_address(ctx.workspace,
                                                                   "execute: workspace")
        handle = handle_address(ctx.handle)
        if handle is None:
            handle = self.lowered.handle
        self.lowered.backend.execute_plan_at_index(pack, workspace, self.index, handle)

    def __repr__(self) -> str:
        return f"BackendPlan({self.name!r}, index={self.index})"
