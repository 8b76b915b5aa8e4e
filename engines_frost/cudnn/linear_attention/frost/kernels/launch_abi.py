"""The host ABI of the compiled FROST forward kernels: one argument list, built two ways.

Every kernel variant's @cute.jit launcher takes exactly

    (q, k, v, g, beta, w, cu_seqlens, out, initial_state, final_state : cute.Pointer,
     T, N : Int32, scale : Float32, stream)

Pointers carry the element type and the assumed alignment of config.operand_alignment; shapes are rebuilt inside the launcher from FrostFwdConfig plus T and N,
so a compiled kernel serves any token and sequence count. Absent optional operands (w,
initial_state, final_state) are null pointers the kernel never dereferences (compile-time
flags in the config). ``fake_args`` (cross-compilation, no GPU) and ``real_args``
(torch tensors at launch) build the same list, so what the CPU compile test compiles is
the signature the GPU launch calls. Imports cutlass: load lazily.
"""
from __future__ import annotations

import cutlass
from cutlass import Float32, Int32
from cutlass.cute import AddressSpace
from cutlass.cute.runtime import make_fake_stream, make_ptr

from cudnn.linear_attention.frost.kernels.config import OPERANDS, FrostFwdConfig, operand_alignment, operand_dtypes


def cutlass_dtype(name: str):
    return {"bfloat16": cutlass.BFloat16, "float16": cutlass.Float16, "float32": Float32, "int32": Int32}[name]


def _pointers(cfg: FrostFwdConfig, addresses: dict[str, int]) -> list:
    align = operand_alignment(cfg)
    return [
        make_ptr(cutlass_dtype(dt), addresses[name], AddressSpace.gmem, assumed_align=align[name])
        for name, dt in operand_dtypes(cfg).items()
    ]


def fake_args(cfg: FrostFwdConfig) -> tuple:
    """Representative arguments for cute.compile without a GPU (null pointers, T = N = 1)."""
    ptrs = _pointers(cfg, dict.fromkeys(OPERANDS, 0))
    return (*ptrs, Int32(1), Int32(1), Float32(1.0), make_fake_stream())


def real_args(cfg: FrostFwdConfig, tensors: dict[str, object], T: int, N: int, scale: float, stream) -> tuple:
    """The launch arguments from torch tensors (None for an absent optional operand) and a
    torch.cuda.Stream. Shapes, dtypes and alignment are checked by fwd.check_operands."""
    import cuda.bindings.driver as cuda

    ptrs = _pointers(cfg, {name: 0 if t is None else t.data_ptr() for name, t in tensors.items()})
    return (*ptrs, Int32(T), Int32(N), Float32(scale), cuda.CUstream(stream.cuda_stream))



class ArgPacker:
    """real_args for repeated launches of one config: dtypes and alignments resolved once,
    and the last Pointer (and stream handle) per operand reused while its address repeats,
    as it does for buffers the caching allocator hands back. Same list as real_args."""

    def __init__(self, cfg: FrostFwdConfig) -> None:
        align = operand_alignment(cfg)
        self._specs = tuple((name, cutlass_dtype(dt), align[name]) for name, dt in operand_dtypes(cfg).items())
        self._last: dict[str, tuple[int, object]] = {}

    def __call__(self, tensors: dict[str, object], T: int, N: int, scale: float, stream) -> tuple:
        import cuda.bindings.driver as cuda

        last = self._last
        args = []
        for name, dtype, align in self._specs:
            t = tensors[name]
            address = 0 if t is None else t.data_ptr()
            cached = last.get(name)
            if cached is None or cached[0] != address:
                cached = (address, make_ptr(dtype, address, AddressSpace.gmem, assumed_align=align))
                last[name] = cached  # one dict store: a racing thread at worst rebuilds it
            args.append(cached[1])
        handle = stream.cuda_stream
        cached = last.get("stream")
        if cached is None or cached[0] != handle:
            cached = (handle, cuda.CUstream(handle))
            last["stream"] = cached
        return (*args, Int32(T), Int32(N), Float32(scale), cached[1])
