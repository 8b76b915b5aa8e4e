"""Compiling the FROST recurrent (decode) kernel for one config, and its fake arguments.

Kept apart from decode.py (the launcher: checks, caches, launch) for the same reason as
compile_kernel.py: this file decides what a compiled kernel contains, so the kernel store
keys on its text (KEYED_SOURCES) while launcher edits keep stored kernels valid. Imports
cutlass lazily.
"""
from __future__ import annotations

from cudnn.linear_attention.frost.kernels.compile_kernel import FFI_CONVENTIONS, preferred_ffi
from cudnn.linear_attention.frost.kernels.decode_config import (DECODE_OPERANDS,
                                                                FrostDecodeConfig,
                                                                decode_operand_alignment,
                                                                decode_operand_dtypes)


def decode_fake_args(cfg: FrostDecodeConfig) -> tuple:
    """Arguments for cute.compile without a GPU (null pointers, T = N = S = 1)."""
    from cutlass import Float32, Int32
    from cutlass.cute.runtime import make_fake_stream

    return (*decode_pointers(cfg, dict.fromkeys(DECODE_OPERANDS, 0)), Int32(1), Int32(1), Int32(1),
            Float32(1.0), make_fake_stream())


def decode_pointers(cfg: FrostDecodeConfig, addresses: dict) -> list:
    """cute.Pointer per operand (ABI order) at `addresses` (by name), typed and aligned."""
    from cutlass.cute import AddressSpace
    from cutlass.cute.runtime import make_ptr

    from cudnn.linear_attention.frost.kernels.launch_abi import cutlass_dtype

    align = decode_operand_alignment(cfg)
    return [make_ptr(cutlass_dtype(dt), addresses[name], AddressSpace.gmem,
                     assumed_align=align[name])
            for name, dt in decode_operand_dtypes(cfg).items()]


def compile_decode(cfg: FrostDecodeConfig, arch: str, host_target: str | None = None,
                   ffi: str | None = None):
    """cute.compile the recurrent kernel for cfg and a target like "sm_90a" (no GPU needed)
    as a compiled_kernel.CompiledKernel (host_target and ffi as compile_kernel.compile_fwd)."""
    import cutlass.cute as cute

    from cudnn.linear_attention.frost.kernels.compiled_kernel import CompiledKernel
    from cudnn.linear_attention.frost.kernels.decode_kernel import FrostDecode

    ffi = ffi or preferred_ffi(host_target)
    if ffi not in FFI_CONVENTIONS:
        raise ValueError(f"compile_decode: ffi must be one of {FFI_CONVENTIONS}, got {ffi!r}")
    options = f"--gpu-arch {arch}" + (f" --host-target '{host_target}'" if host_target else "")
    if ffi == "tvm":
        options += " --enable-tvm-ffi"
    # host_target goes with the kernel: the store keys an entry on the CPU its host code
    # is for (an entry for any x86-64 CPU must not be filed under this machine's)
    return CompiledKernel(cute.compile(FrostDecode(cfg), *decode_fake_args(cfg), options=options),
                          ffi, cfg, host_target=host_target)
