"""What a GPU engine's kernels need of each caller buffer, fixed at build, checked before
any launch.

The linear-attention engines hand the caller's buffers straight to their kernels, so a
buffer that contradicts the graph (another length, another dtype, a strided innermost
dim, another device) would be read or written out of bounds. `port_buffers(facts, dtypes,
inputs, outputs, ...)` states, per wired port, what its buffer must be: the node's
declared dims, a kernel-native dtype (`PortDtypes`; `IO` = q's), a layout ("inner": a
stride-1 innermost dim, outer dims free; "packed": contiguous row-major) and the byte
alignment of its base address. `check_buffers(engine, ports, tensors, device)` checks
the caller's torch tensors against them, in order: the first bound port (q; k for a
node without q) gives the io dtype of the others; and raises ValueError naming the
engine and the port; `checked_tensors` turns
the caller's buffers into torch tensors and checks them in one step. One home for every
engine that launches on torch buffers (FROST forward, backward and summaries, cuTile).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cudnn.linear_attention.common.port_dtypes import IO, PortDtypes, PortRule
from cudnn.ops.data_types import data_type, to_data_type

if TYPE_CHECKING:
    from cudnn.linear_attention.common.facts import LinearAttentionFacts

INNER, PACKED = "inner", "packed"


@dataclass(frozen=True)
class PortBuffer:
    direction: str                 # "input" or "output"
    port: str
    dims: tuple[int, ...]
    #: accepted dtypes; IO = whatever dtype the caller's q buffer has.
    dtypes: PortRule
    layout: str = INNER
    #: (element size, bytes the base address must be a multiple of) pairs; an element
    #: size not listed needs only element alignment.
    alignment: tuple[tuple[int, int], ...] = ()

    def check(self, engine: str, t: Any, device: Any, io: data_type | None) -> None:
        """ValueError when torch tensor `t` cannot be handed to the kernel as this port."""
        where = f"{engine}: {self.direction} '{self.port}'"
        if t.device != device:
            if t.device.type != "cuda":
                raise ValueError(f"{where} is on {t.device}; the kernels need CUDA buffers "
                                 f"on {device}")
            raise ValueError(f"{where} is on {t.device} but this plan runs on {device} "
                             "(plans are per device: build the graph's plans on that device)")
        if tuple(t.shape) != self.dims:
            raise ValueError(f"{where} has shape {list(t.shape)}; the graph declares "
                             f"{list(self.dims)}")
        allowed = (io,) if self.dtypes is IO else self.dtypes
        found = data_type_of(t)
        if found not in allowed:
            names = " or ".join(d.name for d in allowed if d is not None)
            raise ValueError(f"{where} has dtype {found.name if found else t.dtype}; the "
                             f"kernel reads {names}")
        if self.layout == PACKED:
            if not t.is_contiguous():
                raise ValueError(f"{where} has strides {list(t.stride())}; the kernels read "
                                 "packed row-major rows (a contiguous tensor)")
        elif t.dim() and t.shape[-1] > 1 and t.stride(-1) != 1:
            raise ValueError(f"{where} has innermost stride {t.stride(-1)}; the kernels need "
                             "a stride-1 innermost dim (outer dims may be strided)")
        need = dict(self.alignment).get(t.element_size(), 1)
        if need > 1 and t.numel() and t.data_ptr() % need:
            raise ValueError(f"{where} starts at {t.data_ptr():#x}; the kernels need "
                             f"{need}-byte aligned {t.dtype} buffers")


def data_type_of(t: Any) -> data_type | None:
    """The cuDNN data_type of torch tensor `t` (None when it has none)."""
    try:
        return to_data_type(t.dtype)
    except TypeError:       # a torch dtype cuDNN has no name for (complex, uint16, ...)
        return None


def port_buffers(f: LinearAttentionFacts, rules: PortDtypes, inputs: Sequence[str],
                 outputs: Sequence[str], layout: str = INNER,
                 alignment: Mapping[int, int] | None = None) -> tuple[PortBuffer, ...]:
    """What each wired port's buffer must be, in `inputs` then `outputs` order (list q
    first: its dtype is the io dtype of the others). q takes its declared dtype (else any
    io dtype), k and v and ports without a rule take q's, the others their declared
    dtype (else the rule's). `alignment` maps an element size in bytes to the base
    alignment the kernels need for buffers of that element size."""
    out = []
    for direction, names, wired in (("input", inputs, f.node.inputs),
                                    ("output", outputs, f.node.outputs)):
        for port in names:
            tensor = wired.get(port)
            if tensor is None:
                continue
            declared = tensor.data_type
            if port == "q":
                dtypes: PortRule = (declared,) if declared else rules.io_dtypes
            elif port in ("k", "v") or rules.ports.get(port) is None:
                dtypes = IO
            else:
                rule = rules.ports[port]
                dtypes = IO if rule is IO else ((declared,) if declared else rule)
            out.append(PortBuffer(direction, port, tuple(tensor.dim), dtypes, layout,
                                  tuple(sorted((alignment or {}).items()))))
    return tuple(out)


def check_buffers(engine: str, ports: Sequence[PortBuffer], tensors: Mapping[str, Any],
                  device: Any) -> None:
    """Check every bound port's torch tensor (absent ports are skipped), in order: the
    first one checked (q, or k where there is no q) gives the io dtype of the rest."""
    io = None
    for p in ports:
        t = tensors.get(p.port)
        if t is None:
            continue
        p.check(engine, t, device, io)
        if io is None:
            io = data_type_of(t)


def checked_tensors(engine: str, ports: Sequence[PortBuffer], buffer_of: Callable[[PortBuffer], Any],
                    device: Any) -> dict[str, Any]:
    """{port: torch tensor (None where unwired)} for `ports`, checked by check_buffers;
    buffer_of(port_buffer) returns the caller's buffer of that port."""
    from cudnn.linear_attention.common.torch_buffers import as_torch

    t = {p.port: as_torch(buffer_of(p), p.port) for p in ports}
    check_buffers(engine, ports, t, device)
    return t


__all__ = ["INNER", "PACKED", "PortBuffer", "check_buffers", "checked_tensors", "data_type_of",
           "port_buffers"]
