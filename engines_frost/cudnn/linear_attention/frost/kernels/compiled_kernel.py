"""A compiled FROST forward kernel together with its host calling convention.

compile_kernel.compile_fwd and kernel_store return this; fwd.BoundLaunch and the benchmark
scripts launch through it, so no caller needs to know which convention a kernel has:
- "tvm" (CuTe DSL's TVM-FFI convention): the launch ABI's pointers are passed as plain
  ints (tensor.data_ptr(), 0 for an absent operand), T and N as ints, scale as a float
  and the stream as its raw handle; the FFI converts them in C.
- "cute" (the DSL's own convention): cute.Pointer / Int32 / Float32 / CUstream objects,
  built by launch_args.ArgPacker (which reuses the Pointer objects across calls).
Not keyed by the kernel store: how arguments are marshalled never changes a kernel.
"""
from __future__ import annotations

import dataclasses

from cudnn.linear_attention.frost.kernels.bwd_config import (
    BWD_OPERANDS,
    FrostBwdConfig,
    bwd_operand_alignment,
    bwd_operand_dtypes,
)
from cudnn.linear_attention.frost.kernels.config import (
    FrostFwdConfig,
    abi_operands,
    operand_alignment,
    operand_dtypes,
)
from cudnn.linear_attention.frost.kernels.decode_config import (
    DECODE_OPERANDS,
    FrostDecodeConfig,
    decode_operand_alignment,
    decode_operand_dtypes,
)


def abi_of(cfg) -> tuple[tuple[str, ...], dict[str, str], dict[str, int]]:
    """(operand names in launch order, their element dtypes, their byte alignments) of the
    argument list a config's kernels take: the forward's (launch_abi.py) or the
    backward's (bwd_abi.py)."""
    if isinstance(cfg, FrostBwdConfig):
        return BWD_OPERANDS, bwd_operand_dtypes(cfg), bwd_operand_alignment(cfg)
    if isinstance(cfg, FrostDecodeConfig):  # launched by decode.DecodeLaunch (T, N, S tail)
        return DECODE_OPERANDS, decode_operand_dtypes(cfg), decode_operand_alignment(cfg)
    return abi_operands(cfg), operand_dtypes(cfg), operand_alignment(cfg)


@dataclasses.dataclass(frozen=True)
class CompiledKernel:
    fn: object      # what cute.compile returned, or the function loaded from a store object
    ffi: str        # "tvm" or "cute" (compile_kernel.FFI_CONVENTIONS)
    cfg: FrostFwdConfig | FrostBwdConfig
    packer: object = dataclasses.field(default=None, compare=False, repr=False)
    # the CPU its host shim was built for: None for this machine's, else the LLVM target
    # (kernel_store.GENERIC_X86_64); the kernel store keys on it
    host_target: str | None = None
    #: the launch ABI's operand names, in order (abi_of, once: it costs 2-5 us of host time,
    #: and the backward's cached calls launch three kernels)
    names: tuple = dataclasses.field(default=(), init=False, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "names", tuple(abi_of(self.cfg)[0]))
        if self.ffi == "cute" and self.packer is None:
            from cudnn.linear_attention.frost.kernels.launch_args import ArgPacker

            object.__setattr__(self, "packer", ArgPacker(self.cfg))

    def args(self, tensors: dict, T: int, N: int, scale: float, stream) -> tuple:
        """The argument list for ``fn``: ``tensors`` by ABI name (None or no key for an
        absent operand), a torch.cuda.Stream."""
        if self.ffi == "tvm":
            ptrs = [0 if t is None else t.data_ptr() for t in map(tensors.get, self.names)]
            return (*ptrs, T, N, scale, stream.cuda_stream)
        return self.packer(tensors, T, N, scale, stream)

    def launch(self, tensors: dict, T: int, N: int, scale: float, stream) -> None:
        self.fn(*self.args(tensors, T, N, scale, stream))

    def __call__(self, *args):
        """Call the compiled function on a prebuilt argument list (self.args)."""
        return self.fn(*args)
