"""The torch side of autotuning (router/cudnn/engines/autotune.py reaches it by module path).

- `device_identity(handle)`: (device name, SM as major * 10 + minor) of the handle's torch
  device (`handle.device`), else of the current CUDA device, else ("cpu", 0);
- `make_timer(graph, ctx)`: CUDA events on the context's stream for a CUDA device
  (`CudaEventTimer`), else the router's host-clock timer;
- `generated_buffers(graph, uids, ctx)`: buffers for the tensors a caller did not pass,
  with the graph's dims, strides and dtypes on the graph's device. Floats are small normal
  values; integers zero; a linear-attention graph (its facts record is valid) gets valid
  `cu_seqlens` (the tokens split evenly over the sequences), log-decay gates in (-1, 0)
  and beta in (0, 1), so the kernels run the work the shapes describe;
- `workspace(nbytes, graph, ctx)`: a uint8 scratch buffer on that device.
torch is imported on first use.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from cudnn import pygraph
    from cudnn.engines.base import ExecutionContext

_TORCH_DTYPES = {"FLOAT": "float32", "DOUBLE": "float64", "HALF": "float16",
                 "BFLOAT16": "bfloat16", "INT8": "int8", "UINT8": "uint8", "INT32": "int32",
                 "INT64": "int64", "BOOLEAN": "bool", "FP8_E4M3": "float8_e4m3fn",
                 "FP8_E5M2": "float8_e5m2"}


def _device(handle: Any) -> torch.device:
    import torch
    named = getattr(handle, "device", None)
    if isinstance(named, torch.device):
        if named.type == "cuda" and named.index is None:
            return torch.device("cuda", torch.cuda.current_device())
        return named
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def device_identity(handle: Any) -> tuple[str, int]:
    import torch
    device = _device(handle)
    if device.type != "cuda":
        return (device.type, 0)
    major, minor = torch.cuda.get_device_capability(device)
    return (torch.cuda.get_device_name(device), major * 10 + minor)


class CudaEventTimer:
    """Warm-up runs, then one event pair around each timed run on `stream`; one
    synchronisation at the end. Seconds per run."""

    def __init__(self, device: torch.device, stream: Any = None) -> None:
        self.device = device
        self.stream = stream

    def time(self, run: Any, warmup: int, reps: int) -> list[float]:
        import torch
        stream = self.stream if self.stream is not None else torch.cuda.current_stream(
            self.device)
        for _ in range(warmup):
            run()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(reps)]
        for start, end in events:
            start.record(stream)
            run()
            end.record(stream)
        events[-1][1].synchronize()
        return [start.elapsed_time(end) * 1e-3 for start, end in events]


def make_timer(graph: pygraph, ctx: ExecutionContext) -> Any:
    import torch
    device = _device(ctx.handle if ctx.handle is not None else graph.handle)
    if device.type == "cuda":
        stream = ctx.stream
        if isinstance(stream, int) and not isinstance(stream, bool):
            stream = torch.cuda.ExternalStream(stream, device=device)
        return CudaEventTimer(device, stream)
    from cudnn.engines.autotune import ClockTimer
    return ClockTimer()


def _dtype(dt: Any) -> torch.dtype:
    import torch
    name = _TORCH_DTYPES.get(getattr(dt, "name", ""), "float32")
    return getattr(torch, name)


def generated_buffers(graph: pygraph, uids: list[int], ctx: ExecutionContext) -> dict[int, Any]:
    import torch
    device = _device(ctx.handle if ctx.handle is not None else graph.handle)
    gen = torch.Generator(device=device).manual_seed(0)
    special = _linear_attention_fills(graph)
    out = {}
    for uid in uids:
        t = graph.find_tensor(uid)
        dims, strides = tuple(t.dim), tuple(t.stride) or None
        dtype = _dtype(t.data_type)
        fill = special.get(uid)
        if fill is not None:
            out[uid] = fill(dims, strides, dtype, device, gen)
            continue
        buf = _empty(dims, strides, dtype, device)
        if dtype.is_floating_point and buf.numel():
            buf.copy_(torch.randn(dims, generator=gen, device=device) * 0.1)
        elif buf.numel():
            buf.zero_()
        out[uid] = buf
    return out


def workspace(nbytes: int, graph: pygraph, ctx: ExecutionContext) -> Any:
    import torch
    device = _device(ctx.handle if ctx.handle is not None else graph.handle)
    return torch.empty(max(int(nbytes), 1), dtype=torch.uint8, device=device)


def _empty(dims: tuple[int, ...], strides: tuple[int, ...] | None, dtype: torch.dtype,
           device: torch.device) -> torch.Tensor:
    import torch
    if strides is not None and len(strides) == len(dims):
        return torch.empty_strided(dims, strides, dtype=dtype, device=device)
    return torch.empty(dims, dtype=dtype, device=device)


def _linear_attention_fills(graph: pygraph) -> dict[int, Any]:
    """{uid: fill(dims, strides, dtype, device, generator)} for the ports whose values a
    linear-attention kernel needs in range (none for other graphs)."""
    if not any(n.spec.name.startswith(("gdn", "kda")) for n in graph.nodes):
        return {}
    from cudnn.linear_attention.common.facts import linear_attention_facts
    facts = linear_attention_facts(graph)
    if not facts.valid:
        return {}
    import torch
    node = facts.node
    total, seqs = int(facts.total_t or 0), max(int(facts.n_seq or 1), 1)

    def offsets(dims, strides, dtype, device, gen):
        bounds = [total * i // seqs for i in range(seqs + 1)]
        buf = _empty(dims, strides, dtype, device)
        buf.copy_(torch.tensor(bounds, dtype=dtype, device=device).reshape(dims))
        return buf

    def decay(dims, strides, dtype, device, gen):
        buf = _empty(dims, strides, dtype, device)
        buf.copy_(-torch.rand(dims, generator=gen, device=device) * 0.9 - 0.05)
        return buf

    def unit(dims, strides, dtype, device, gen):
        buf = _empty(dims, strides, dtype, device)
        buf.copy_(torch.rand(dims, generator=gen, device=device) * 0.9 + 0.05)
        return buf

    fills = {"cu_seqlens": offsets, "g": decay, "beta": unit}
    return {t.uid: fills[port] for port, t in node.inputs.items() if port in fills}


__all__ = ["CudaEventTimer", "device_identity", "generated_buffers", "make_timer",
           "workspace"]
