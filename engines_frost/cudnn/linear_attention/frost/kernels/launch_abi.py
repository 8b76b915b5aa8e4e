"""The host ABI of the compiled FROST forward kernels: one argument list, built two ways.

Every kernel variant's @cute.jit launcher takes exactly

    (q, k, v, g, beta, w, cu_seqlens, out, initial_state, final_state : cute.Pointer,
     [state_checkpoints : cute.Pointer,]  T, N : Int32, scale : Float32, stream)

(state_checkpoints only in kernels compiled with write_checkpoints: config.abi_operands).

Pointers carry the element type and the assumed alignment of config.operand_alignment;
shapes are rebuilt inside the launcher from FrostFwdConfig plus T and N,
so a compiled kernel serves any token and sequence count. Absent optional operands (w,
initial_state, final_state) are null pointers the kernel never dereferences (compile-time
flags in the config). ``fake_args`` (cross-compilation, no GPU) builds the list a kernel is
compiled for; launch_args.py builds the same list from torch tensors at launch. This file
shapes every compiled object (the kernel store keys on it); launch_args.py does not, so a
fix to launch-time marshalling never invalidates precompiled kernels. Imports cutlass:
load lazily.
"""
from __future__ import annotations

import cutlass
from cutlass import Float32, Int32
from cutlass.cute import AddressSpace
from cutlass.cute.runtime import make_fake_stream, make_ptr

from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig, abi_operands, operand_alignment, operand_dtypes


def cutlass_dtype(name: str):
    return {"bfloat16": cutlass.BFloat16, "float16": cutlass.Float16, "float32": Float32, "int32": Int32}[name]


def abi_pointers(cfg: FrostFwdConfig, addresses: dict[str, int]) -> list:
    align = operand_alignment(cfg)
    return [
        make_ptr(cutlass_dtype(dt), addresses.get(name, 0), AddressSpace.gmem, assumed_align=align[name])
        for name, dt in operand_dtypes(cfg).items()
    ]


def fake_args(cfg: FrostFwdConfig) -> tuple:
    """Representative arguments for cute.compile without a GPU (null pointers, T = N = 1)."""
    ptrs = abi_pointers(cfg, dict.fromkeys(abi_operands(cfg), 0))
    return (*ptrs, Int32(1), Int32(1), Float32(1.0), make_fake_stream())
