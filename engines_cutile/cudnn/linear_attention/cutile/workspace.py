"""Scratch carved from the caller's explicit workspace.

A `WorkspaceLayout` is computed at build time from the graph's shapes: named regions
appended in order, each starting on a 128-byte boundary; `size` is the exact number of
bytes the plan reports.  At execute time `carve(buffer)` checks the caller's buffer once
(present, large enough, 128-byte aligned) and returns typed views by recorded offset.
Carving never allocates, so pointers stay caller-owned and plans can be captured in
CUDA graphs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

ALIGN = 128


@dataclass(frozen=True)
class Region:
    name: str
    offset: int
    shape: tuple[int, ...]
    dtype: object          # a torch.dtype
    itemsize: int

    @property
    def nbytes(self) -> int:
        n = self.itemsize
        for d in self.shape:
            n *= d
        return n


@dataclass
class WorkspaceLayout:
    regions: dict[str, Region] = field(default_factory=dict)
    size: int = 0

    def add(self, name: str, shape, dtype, itemsize: int) -> "WorkspaceLayout":
        if name in self.regions:
            raise ValueError(f"workspace region '{name}' declared twice")
        offset = (self.size + ALIGN - 1) // ALIGN * ALIGN
        region = Region(name, offset, tuple(int(d) for d in shape), dtype, itemsize)
        self.regions[name] = region
        self.size = offset + region.nbytes
        return self

    def carve(self, buffer) -> dict[str, object]:
        """Typed torch views of every region inside `buffer` (a uint8 torch tensor)."""
        if buffer is None:
            raise ValueError(f"this plan needs a workspace of {self.size} bytes; none was passed")
        nbytes = buffer.numel() * buffer.element_size()
        if nbytes < self.size:
            raise ValueError(f"workspace too small: {nbytes} bytes given, {self.size} needed")
        if buffer.data_ptr() % ALIGN:
            raise ValueError(f"workspace must be {ALIGN}-byte aligned "
                             f"(address {buffer.data_ptr():#x})")
        flat = buffer.reshape(-1).view(dtype=_uint8(buffer))
        views = {}
        for r in self.regions.values():
            chunk = flat[r.offset:r.offset + r.nbytes]
            views[r.name] = chunk.view(r.dtype).view(r.shape)
        return views


def _uint8(buffer):
    import torch
    return torch.uint8
