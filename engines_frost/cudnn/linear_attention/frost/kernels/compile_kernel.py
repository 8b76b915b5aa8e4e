"""Which CuTe DSL class implements a forward config, and compiling it for one config.

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


def product_algorithm(cfg: FrostFwdConfig, arch: str) -> str:
    """The forward kernel layer the product compiles for cfg on arch: "wgmma" (fwd_wgmma.py,
    the chain on warpgroup MMA: 11-17 % less kernel time than the pipelined layer on the
    H200, NOTES.md) for every forward on sm_90a, bf16 or fp16 io, plain or training (its
    launchers that also write the state checkpoints and U,
    fwd_wgmma.FrostFwdWgmmaCheckpoints / Values, passed every backward smoke case on the
    H200, fp16 ones included, and take 5 % off GDN's fwd+bwd); "pipelined"
    (fwd_pipelined.py, the wgmma layer's base class, mma.sync only) on other archs (warpgroup
    MMA is sm_90a's). A function of (cfg, arch) alone: the kernel store keys entries on
    both, so no switch may change the answer."""
    return "wgmma" if arch == "sm_90a" else "pipelined"


def version_class(version: str, cfg: FrostFwdConfig):
    """Forward layer "pipelined" (fwd_pipelined.py) or "wgmma" (fwd_wgmma.py)'s class for
    cfg: the plain forward, its launcher that also writes the state checkpoints when cfg asks
    for them, or the one that writes U too (each module has the three)."""
    if version == "wgmma":
        from cudnn.linear_attention.frost.kernels.fwd_wgmma import (
            FrostFwdWgmma as plain,
            FrostFwdWgmmaCheckpoints as checkpoints,
            FrostFwdWgmmaValues as values,
        )
    elif version == "pipelined":
        from cudnn.linear_attention.frost.kernels.fwd_pipelined import (
            FrostFwdPipelined as plain,
            FrostFwdPipelinedCheckpoints as checkpoints,
            FrostFwdPipelinedValues as values,
        )
    else:
        raise ValueError(f"version_class: version must be 'pipelined' or 'wgmma', got {version!r}")
    if cfg.write_values:
        return values
    return checkpoints if cfg.write_checkpoints else plain


def product_decay(cfg: FrostFwdConfig, arch: str) -> str:
    """Where the product's forward puts the gate decays for cfg on arch: FOUR_ROLE_DECAY where
    four_roles_apply (wgmma GDN, K = V = 128, an output, long sequences: the scaled chain's
    factors on the raw rows, warp-specialised, fwd_ws4.py), else "scaled" for wgmma with
    scalar gates and bf16 io (GDN; fwd_wgmma_scaled.ScaledDecayChain: per-token factors on the
    chain's fp32 results, no operand stage; GDN forward kernel -6 %, fwd+bwd -2 % on the
    H200, every backward smoke case within its float64 bound; it refuses fp16 io), "folded"
    into bf16 copies of q and k otherwise (vector gates, fp16 io, pipelined). A function of
    (cfg, arch) alone, as product_algorithm."""
    if product_algorithm(cfg, arch) != "wgmma" or cfg.gate_per_channel or cfg.io_dtype != "bfloat16":
        return "folded"
    return FOUR_ROLE_DECAY if four_roles_apply(cfg) else "scaled"


#: product_decay's name for the four-role forward (fwd_ws4.RawRingInChain; the test
#: tooling's knob decay of the same name builds it too)
FOUR_ROLE_DECAY = "wyc-ws4raw"


def four_roles_possible(cfg: FrostFwdConfig) -> bool:
    """The part of four_roles_apply that does not depend on the batch: bf16 scalar-gate
    (GDN) configs at K = V = 128 (its two chain warpgroups) with an output or U (without an
    output the math warpgroup builds M alone: the recompute path's states stage, so that it
    writes U and the checkpoints as the user's forward does; the span summaries, final
    state only, keep the scaled chain). Elsewhere `pipelined` selects nothing, and
    fwd.check_operands leaves it False so that long and short batches share one kernel."""
    return (cfg.io_dtype == "bfloat16" and not cfg.gate_per_channel and (cfg.K, cfg.V) == (128, 128)
            and (cfg.write_output or cfg.write_values))


def four_roles_apply(cfg: FrostFwdConfig) -> bool:
    """Whether a wgmma scalar-gate (GDN) config runs the four-role forward (fwd_ws4.py):
    four_roles_possible and cfg.pipelined (sequences of >= PIPELINE_MIN_TOKENS tokens on
    average). On the H100 at 8 x 4096 tokens, 16 heads: 0.29-0.30 against 0.34 ms kernel
    time; at 512 x 64, 13 % slower than the scaled chain (NOTES.md "Four roles per CTA:
    ... without W'")."""
    return four_roles_possible(cfg) and cfg.pipelined


def product_class(cfg: FrostFwdConfig, arch: str):
    """The product's forward kernel class for cfg on arch (product_algorithm, product_decay)."""
    cls = version_class(product_algorithm(cfg, arch), cfg)
    decay = product_decay(cfg, arch)
    if decay == "scaled":
        from cudnn.linear_attention.frost.kernels.fwd_wgmma_scaled import scaled_decay_class
        cls = scaled_decay_class(cls)
    elif decay == FOUR_ROLE_DECAY:
        from cudnn.linear_attention.frost.kernels.fwd_ws4 import four_role_class
        cls = four_role_class(cls)
    return cls


def kernel_class(cfg: FrostFwdConfig, arch: str):
    """The CuTe DSL class that compiles cfg for arch: product_class(cfg, arch), unless cfg
    names its own (``cfg.kernel_class()``: the test and bench tooling's experiment configs,
    engines_frost/tests/frost_fwd_experiments.py, which build the SIMT oracle, the mma layer
    on its own, a forced pipelined or wgmma layer, or a kernel with stages compiled out; the
    product never makes one)."""
    own = getattr(cfg, "kernel_class", None)
    return own() if own is not None else product_class(cfg, arch)


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
    cls = kernel_class(cfg, arch)
    if getattr(cls, "SM90A_ONLY", False) and arch != "sm_90a":
        raise ValueError(f"compile_fwd: {cls.__name__} uses warpgroup MMA, built for sm_90a only; "
                         f"got arch {arch!r}")
    kernel = cls(cfg)
    options = f"--gpu-arch {arch}" + (f" --host-target '{host_target}'" if host_target else "")
    if ffi == "tvm":
        options += " --enable-tvm-ffi"
    return CompiledKernel(cute.compile(kernel, *fake_args(cfg), options=options), ffi, cfg,
                          host_target=host_target)
