"""What the FROST kernels assume of each caller buffer, fixed at build, checked at execute.

The engine is pure pass-through: buffers reach the kernels as they are, so each wired
port's buffer must be a CUDA tensor on the device the plan was built for (docs/LINEAR_ATTENTION.md §4:
plans are per device), with the node's declared dims, a kernel-native dtype and a
stride-1 innermost dim (outer dims may be padded or strided). `PortBuffer` holds one
port's expectation; `check` raises ValueError naming the engine and the port.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cudnn.linear_attention.common.port_dtypes import IO, PortRule
from cudnn.ops.data_types import data_type, to_data_type


@dataclass(frozen=True)
class PortBuffer:
    direction: str                 # "input" or "output"
    port: str
    dims: tuple[int, ...]
    #: accepted dtypes; IO = whatever dtype the caller's q buffer has.
    dtypes: PortRule

    def check(self, engine: str, t: Any, device: Any, io: data_type | None) -> None:
        """ValueError when torch tensor `t` cannot be handed to the kernel as this port."""
        where = f"{engine}: {self.direction} '{self.port}'"
        if t.device != device:
            if t.device.type != "cuda":
                raise ValueError(f"{where} is on {t.device}; the kernels need CUDA buffers "
                                 f"(this plan was built for {device})")
            raise ValueError(f"{where} is on {t.device} but this plan was built for {device} "
                             "(plans are per device: build the graph's plans on that device)")
        if tuple(t.shape) != self.dims:
            raise ValueError(f"{where} has shape {list(t.shape)}; the graph declares "
                             f"{list(self.dims)}")
        allowed = (io,) if self.dtypes is IO else self.dtypes
        found = data_type_of(t)
        if found not in allowed:
            names = " or ".join(d.name for d in allowed)
            raise ValueError(f"{where} has dtype {found.name if found else t.dtype}; the "
                             f"kernel reads {names}")
        if t.dim() and t.shape[-1] > 1 and t.stride(-1) != 1:
            raise ValueError(f"{where} has innermost stride {t.stride(-1)}; the kernels need "
                             "a stride-1 innermost dim (outer dims may be strided)")


def data_type_of(t: Any) -> data_type | None:
    """The cuDNN data_type of torch tensor `t` (None when it has none)."""
    try:
        return to_data_type(t.dtype)
    except TypeError:       # a torch dtype cuDNN has no name for (complex, uint16, ...)
        return None


def checked_tensors(engine: str, ports, buffer_of, device: Any) -> dict:
    """{port: torch tensor (None where unwired)} for `ports`, each checked against its
    PortBuffer; q comes first, and its dtype is the io dtype of the others.
    buffer_of(port_buffer) returns the caller's buffer of that port."""
    from cudnn.linear_attention.common.torch_buffers import as_torch

    t = {p.port: as_torch(buffer_of(p), p.port) for p in ports}
    io = None
    for p in ports:
        if t[p.port] is not None:
            p.check(engine, t[p.port], device, io)
            if p.port == "q":
                io = data_type_of(t["q"])
    return t
