"""Caller buffers, streams and devices as torch objects, for engines that launch on torch.

Python engines whose kernels take torch tensors (cuTile, FROST) share these three steps:
- `as_torch(buf, port)`: a zero-copy torch view of a caller buffer (torch tensors pass
  through, DLPack and `__cuda_array_interface__` exporters are wrapped). Anything else is
  a TypeError naming the port: copying would leave the caller's output buffer unwritten.
- `torch_stream(stream, device)`: the context's stream as a torch stream (None = torch's
  current stream on `device`, an int = an external CUDA stream handle).
- `handle_device_reason(graph, engine)`: the decline message for a graph whose handle
  names a device that is not CUDA (None when there is no handle or it is CUDA).
torch is imported on first use only: importing this module needs no torch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from cudnn import pygraph


def as_torch(buf: Any, port: str = "buffer") -> torch.Tensor | None:
    """A torch view of `buf` sharing its memory (None stays None)."""
    if buf is None:
        return None
    import torch
    if isinstance(buf, torch.Tensor):
        return buf
    if hasattr(buf, "__dlpack__"):
        return torch.from_dlpack(buf)
    if hasattr(buf, "__cuda_array_interface__"):
        return torch.as_tensor(buf, device="cuda")
    raise TypeError(f"'{port}': expected a torch tensor or a DLPack / "
                    f"__cuda_array_interface__ buffer, got {type(buf).__name__}")


def torch_stream(stream: Any, device: Any = None) -> Any:
    """`stream` as a torch CUDA stream; None means torch's current stream on `device`."""
    import torch
    if stream is None:
        return torch.cuda.current_stream(device)
    if isinstance(stream, int) and not isinstance(stream, bool):
        return torch.cuda.ExternalStream(stream, device=device)
    return stream


def handle_device_reason(graph: pygraph, engine: str) -> str | None:
    """Why `engine` (which runs on CUDA devices) declines a graph whose handle is elsewhere."""
    device = getattr(getattr(graph, "handle", None), "device", None)
    kind = getattr(device, "type", None)
    if kind is not None and kind != "cuda":
        return f"{engine}: runs on CUDA devices; the graph's handle is on {device}"
    return None


__all__ = ["as_torch", "handle_device_reason", "torch_stream"]
