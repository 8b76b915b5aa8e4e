"""Named regions of a FROST launcher's scratch: the one layout rule and the one carve that
the backward's workspace (bwd.workspace_layout) and the span summaries' (summary.
summary_workspace_layout) share.

A layout is a list of (name, shape, dtype) packed in order, each region starting on an
ALIGN-byte boundary; dtype "uint8" marks raw bytes that a launcher hands on whole (the
summary's sink and the backward workspace it nests). Carving makes typed torch views of
a uint8 workspace and never allocates.
"""
from __future__ import annotations

import dataclasses

ALIGN = 256  # bytes between regions
ITEM_BYTES = {"uint8": 1, "bfloat16": 2, "float16": 2, "float32": 4}


@dataclasses.dataclass(frozen=True)
class Region:
    name: str
    offset: int
    shape: tuple[int, ...]
    dtype: str  # a key of ITEM_BYTES

    @property
    def nbytes(self) -> int:
        count = 1
        for extent in self.shape:
            count *= extent
        return count * ITEM_BYTES[self.dtype]


def pack(want) -> tuple[tuple[Region, ...], int]:
    """The regions of `want` ((name, shape, dtype) in order) and the total bytes."""
    regions, offset = [], 0
    for name, shape, dtype in want:
        region = Region(name, offset, tuple(shape), dtype)
        regions.append(region)
        offset += -(-region.nbytes // ALIGN) * ALIGN
    return tuple(regions), offset


def carve(workspace, regions) -> dict:
    """Typed views of the regions in a uint8 torch tensor, by name (raw uint8 regions as
    flat byte views)."""
    import torch

    dtypes = {"uint8": torch.uint8, "bfloat16": torch.bfloat16, "float16": torch.float16,
              "float32": torch.float32}
    out = {}
    for r in regions:
        view = workspace[r.offset:r.offset + r.nbytes]
        out[r.name] = view if r.dtype == "uint8" else view.view(dtypes[r.dtype]).view(r.shape)
    return out
