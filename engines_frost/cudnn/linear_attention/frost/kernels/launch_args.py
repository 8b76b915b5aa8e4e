"""The launch-time half of the FROST host ABI (launch_abi.py): the kernel's argument list
built from torch tensors and a torch.cuda.Stream, once per call (``real_args``) or with
the pointer objects reused across calls of one config (``ArgPacker``). Nothing here shapes
a compiled kernel, so the kernel store does not key on this file. Imports cutlass: load
lazily.
"""
from __future__ import annotations

from cutlass import Float32, Int32
from cutlass.cute import AddressSpace
from cutlass.cute.runtime import make_ptr

from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig, abi_operands
from cudnn.linear_attention.frost.kernels.launch_abi import abi_pointers, cutlass_dtype


def real_args(cfg: FrostFwdConfig, tensors: dict[str, object], T: int, N: int, scale: float, stream) -> tuple:
    """The launch arguments from torch tensors (None, or no key, for an absent optional operand) and a
    torch.cuda.Stream. Shapes, dtypes and alignment are checked by fwd.check_operands."""
    import cuda.bindings.driver as cuda

    ptrs = abi_pointers(cfg, {name: 0 if tensors.get(name) is None else tensors[name].data_ptr()
                           for name in abi_operands(cfg)})
    return (*ptrs, Int32(T), Int32(N), Float32(scale), cuda.CUstream(stream.cuda_stream))



class ArgPacker:
    """real_args for repeated launches of one config: dtypes and alignments resolved once,
    and the last Pointer (and stream handle) per operand reused while its address repeats,
    as it does for buffers the caching allocator hands back. Same list as real_args."""

    def __init__(self, cfg: FrostFwdConfig) -> None:
        from cudnn.linear_attention.frost.kernels.compiled_kernel import abi_of

        _, dtypes, align = abi_of(cfg)
        self._specs = tuple((name, cutlass_dtype(dt), align[name]) for name, dt in dtypes.items())
        self._last: dict[str, tuple[int, object]] = {}

    def __call__(self, tensors: dict[str, object], T: int, N: int, scale: float, stream) -> tuple:
        import cuda.bindings.driver as cuda

        last = self._last
        args = []
        for name, dtype, align in self._specs:
            t = tensors.get(name)  # an unwired optional operand may have no key at all
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
