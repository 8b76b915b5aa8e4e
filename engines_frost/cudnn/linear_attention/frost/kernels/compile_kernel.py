"""Which CuTe DSL class implements an algorithm, and compiling it for one config.

Kept apart from fwd.py (the launcher: checks, caches, launch) because this file decides
what a compiled kernel contains: kernel_store.py keys stored kernels on its text, while
launcher-side edits in fwd.py leave the precompiled store valid. Imports cutlass lazily.
"""
from __future__ import annotations

import importlib.util
import os

from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

# Host calling conventions of a compiled kernel. "tvm": CuTe DSL's TVM-FFI convention
# (--enable-tvm-ffi; arguments are plain ints and floats, ~6 us per launch on the H200
# host); "cute": the DSL's own (cute.Pointer / Int32 / CUstream objects, ~21 us).
FFI_CONVENTIONS = ("tvm", "cute")
FFI_ENV = "FROST_FFI"
# Algorithms whose kernels use Hopper's warpgroup MMA (wgmma): sm_90a only.
WGMMA_ALGORITHMS = ("v3",)


def kernel_class(algorithm: str, write_checkpoints: bool = False, write_values: bool = False):
    """The CuTe DSL kernel class implementing an algorithm ("v0" oracle, "v1" tensor cores,
    "v2" v1 with prefetched rows and cheaper state-independent stages, "v3" v2 with the
    chain's state products on warpgroup MMA (sm_90a only); v2 writing the
    state checkpoints too: its launcher with the extra operand; and U as well: the launcher
    with both)."""
    if write_values:
        if not (write_checkpoints and algorithm == "v2"):
            raise ValueError("frost_fwd: U (values) is written by algorithm 'v2' with state checkpoints only, "
                             f"got algorithm {algorithm!r}, write_checkpoints={write_checkpoints}")
        from cudnn.linear_attention.frost.kernels.fwd_v2 import FrostFwdV2Values
        return FrostFwdV2Values
    if write_checkpoints:
        if algorithm != "v2":
            raise ValueError(f"frost_fwd: state checkpoints are written by algorithm 'v2' only, got {algorithm!r}")
        from cudnn.linear_attention.frost.kernels.fwd_v2 import FrostFwdV2Checkpoints
        return FrostFwdV2Checkpoints
    if algorithm == "v0":
        from cudnn.linear_attention.frost.kernels.fwd_v0 import FrostFwdV0
        return FrostFwdV0
    if algorithm == "v1":
        from cudnn.linear_attention.frost.kernels.fwd_v1 import FrostFwdV1
        return FrostFwdV1
    if algorithm == "v2":
        from cudnn.linear_attention.frost.kernels.fwd_v2 import FrostFwdV2
        return FrostFwdV2
    if algorithm == "v3":
        from cudnn.linear_attention.frost.kernels.fwd_v3 import FrostFwdV3
        return FrostFwdV3
    raise ValueError(f"frost_fwd: algorithm must be 'v0', 'v1', 'v2' or 'v3', got {algorithm!r}")


def preferred_ffi(host_target: str | None = None) -> str:
    """The calling convention to compile for: FROST_FFI when set, else "tvm" where the
    apache-tvm-ffi package is importable, else "cute". A kernel built for another host
    (host_target) is "cute": CuTe DSL 4.8 exports TVM-FFI kernels only for this host."""
    chosen = os.environ.get(FFI_ENV, "").strip()
    if chosen and chosen not in FFI_CONVENTIONS:
        raise ValueError(f"{FFI_ENV} must be one of {FFI_CONVENTIONS}, got {chosen!r}")
    if host_target:
        if chosen == "tvm":
            raise ValueError(f"{FFI_ENV}=tvm cannot be cross-compiled for another host "
                             f"(host_target={host_target!r}): build on the machine that runs it")
        return "cute"
    if chosen:
        return chosen
    return "tvm" if importlib.util.find_spec("tvm_ffi") is not None else "cute"


def compile_fwd(cfg: FrostFwdConfig, arch: str, host_target: str | None = None, ffi: str | None = None):
    """cute.compile the kernel for cfg and a target like "sm_90a" (works without a GPU),
    as a compiled_kernel.CompiledKernel. Uses launch_abi.fake_args, the one signature both
    calling conventions (ffi: "tvm" or "cute", default preferred_ffi) take. host_target
    (CuTe DSL's --host-target, e.g. kernel_store.GENERIC_X86_64) builds the host shim for
    another CPU: the result can then only be exported (kernel_store), not called here."""
    import cutlass.cute as cute

    from cudnn.linear_attention.frost.kernels.compiled_kernel import CompiledKernel
    from cudnn.linear_attention.frost.kernels.launch_abi import fake_args

    ffi = ffi or preferred_ffi(host_target)
    if ffi not in FFI_CONVENTIONS:
        raise ValueError(f"compile_fwd: ffi must be one of {FFI_CONVENTIONS}, got {ffi!r}")
    if cfg.algorithm in WGMMA_ALGORITHMS and arch != "sm_90a":
        raise ValueError(f"compile_fwd: algorithm {cfg.algorithm!r} uses warpgroup MMA, built for sm_90a only; "
                         f"got arch {arch!r} (use 'v2')")
    kernel = kernel_class(cfg.algorithm, cfg.write_checkpoints, cfg.write_values)(cfg)
    options = f"--gpu-arch {arch}" + (f" --host-target '{host_target}'" if host_target else "")
    if ffi == "tvm":
        options += " --enable-tvm-ffi"
    return CompiledKernel(cute.compile(kernel, *fake_args(cfg), options=options), ffi, cfg,
                          host_target=host_target)
