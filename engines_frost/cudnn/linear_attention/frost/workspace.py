"""Scratch carved from the caller's explicit workspace (docs/LINEAR_ATTENTION.md §4).

The kernel launcher reports its exact scratch size at build (`frost_workspace_size`);
at execute `carve_scratch` checks the caller's buffer once (present, on the plan's
device, contiguous, large enough, 128-byte aligned) and returns a uint8 view of the
first `size` bytes. Carving never allocates: pointers stay caller-owned, so plans can be
captured in CUDA graphs.
"""
from __future__ import annotations

from typing import Any

from cudnn.linear_attention.common.torch_buffers import as_torch

ALIGN = 128    # bytes; TMA descriptors and vectorised stores need 128-byte aligned bases


def carve_scratch(engine: str, workspace: Any, size: int, device: Any) -> Any:
    """A uint8 torch view of `size` bytes of `workspace` (None when `size` is 0)."""
    if size <= 0:
        return None
    if workspace is None:
        raise ValueError(f"{engine}: this plan needs a workspace of {size} bytes; none was "
                         "passed")
    ws = as_torch(workspace, "workspace")
    if ws.device != device:
        raise ValueError(f"{engine}: the workspace is on {ws.device}; this plan was built for "
                         f"{device}")
    if not ws.is_contiguous():
        raise ValueError(f"{engine}: the workspace must be contiguous")
    nbytes = ws.numel() * ws.element_size()
    if nbytes < size:
        raise ValueError(f"{engine}: workspace too small: {nbytes} bytes given, {size} needed")
    if ws.data_ptr() % ALIGN:
        raise ValueError(f"{engine}: the workspace must be {ALIGN}-byte aligned "
                         f"(address {ws.data_ptr():#x})")
    import torch
    return ws.reshape(-1).view(torch.uint8)[:size]
