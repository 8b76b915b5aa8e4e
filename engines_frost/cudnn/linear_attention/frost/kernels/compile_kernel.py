"""Which CuTe DSL class implements an algorithm, and compiling it for one config.

Kept apart from fwd.py (the launcher: checks, caches, launch) because this file decides
what a compiled kernel contains: kernel_store.py keys stored kernels on its text, while
launcher-side edits in fwd.py leave the precompiled store valid. Imports cutlass lazily.
"""
from __future__ import annotations

from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig


def kernel_class(algorithm: str):
    """The CuTe DSL kernel class implementing an algorithm ("v0" oracle, "v1" tensor cores,
    "v2" v1 with prefetched rows and cheaper state-independent stages)."""
    if algorithm == "v0":
        from cudnn.linear_attention.frost.kernels.fwd_v0 import FrostFwdV0
        return FrostFwdV0
    if algorithm == "v1":
        from cudnn.linear_attention.frost.kernels.fwd_v1 import FrostFwdV1
        return FrostFwdV1
    if algorithm == "v2":
        from cudnn.linear_attention.frost.kernels.fwd_v2 import FrostFwdV2
        return FrostFwdV2
    raise ValueError(f"frost_fwd: algorithm must be 'v0', 'v1' or 'v2', got {algorithm!r}")


def compile_fwd(cfg: FrostFwdConfig, arch: str, host_target: str | None = None):
    """cute.compile the kernel for cfg and a target like "sm_90a" (works without a GPU).
    Uses launch_abi.fake_args, the same signature real_args fills at launch. host_target
    (CuTe DSL's --host-target, e.g. kernel_store.GENERIC_X86_64) builds the host shim for
    another CPU: the result can then only be exported (kernel_store), not called here."""
    import cutlass.cute as cute

    from cudnn.linear_attention.frost.kernels.launch_abi import fake_args

    kernel = kernel_class(cfg.algorithm)(cfg)
    options = f"--gpu-arch {arch}" + (f" --host-target '{host_target}'" if host_target else "")
    return cute.compile(kernel, *fake_args(cfg), options=options)
