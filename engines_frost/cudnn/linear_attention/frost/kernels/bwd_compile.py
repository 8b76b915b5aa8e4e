"""Which CuTe DSL class implements each backward stage, and compiling it for one config.

Kept apart from bwd.py (the launcher) for the same reason as compile_kernel.py: this file
decides what a compiled kernel contains. Imports cutlass lazily.
"""
from __future__ import annotations

from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
from cudnn.linear_attention.frost.kernels.compile_kernel import FFI_CONVENTIONS, preferred_ffi


def bwd_kernel_class(stage: str, vector_gates: bool = False):
    if stage == "states":
        from cudnn.linear_attention.frost.kernels.bwd_states import FrostBwdStates
        return FrostBwdStates
    if stage == "values":
        from cudnn.linear_attention.frost.kernels.bwd_values import FrostBwdValues
        return FrostBwdValues
    if stage == "chain":
        from cudnn.linear_attention.frost.kernels.bwd_chain import FrostBwdChain
        return FrostBwdChain
    if stage == "grads" and vector_gates:
        from cudnn.linear_attention.frost.kernels.bwd_grads_vec import FrostBwdGradsVec
        return FrostBwdGradsVec
    if stage == "grads":
        from cudnn.linear_attention.frost.kernels.bwd_grads import FrostBwdGrads
        return FrostBwdGrads
    raise ValueError(f"frost_bwd: stage must be 'states', 'values', 'chain' or 'grads', got {stage!r}")


def bwd_kernel_for(cfg: FrostBwdConfig):
    """The kernel class that serves cfg (its stage, gate kind, the chain and grads variants)."""
    if cfg.stage == "chain" and cfg.chain_pipeline:
        from cudnn.linear_attention.frost.kernels.bwd_chain_pipelined import FrostBwdChainPipelined
        return FrostBwdChainPipelined
    if cfg.stage == "chain" and cfg.chain_raw_rows and cfg.chain_a_in_chain:
        from cudnn.linear_attention.frost.kernels.bwd_chain_ws4 import FrostBwdChainWs4RawInChain
        return FrostBwdChainWs4RawInChain
    if cfg.stage == "chain" and cfg.chain_raw_rows:
        from cudnn.linear_attention.frost.kernels.bwd_chain_ws4 import FrostBwdChainWs4Raw
        return FrostBwdChainWs4Raw
    if cfg.stage == "chain" and cfg.chain_a_in_chain:
        from cudnn.linear_attention.frost.kernels.bwd_chain_ws4 import FrostBwdChainWs4InChain
        return FrostBwdChainWs4InChain
    if cfg.stage == "chain" and cfg.chain_ws4:
        from cudnn.linear_attention.frost.kernels.bwd_chain_ws4 import FrostBwdChainWs4
        return FrostBwdChainWs4
    if cfg.stage == "chain" and cfg.chain_wy:
        from cudnn.linear_attention.frost.kernels.bwd_chain_ws_wy import FrostBwdChainWsWy
        return FrostBwdChainWsWy
    if cfg.stage == "chain" and cfg.chain_ws:
        from cudnn.linear_attention.frost.kernels.bwd_chain_ws import FrostBwdChainWs
        return FrostBwdChainWs
    if cfg.stage == "chain" and cfg.chain_scaled:
        from cudnn.linear_attention.frost.kernels.bwd_chain_scaled import FrostBwdChainScaled
        return FrostBwdChainScaled
    if cfg.stage == "chain" and cfg.chain_wgmma:
        from cudnn.linear_attention.frost.kernels.bwd_chain_wgmma import FrostBwdChainWgmma
        return FrostBwdChainWgmma
    if cfg.stage == "grads" and cfg.grads_wgmma and cfg.fwd.gate_per_channel:
        from cudnn.linear_attention.frost.kernels.bwd_grads_vec import FrostBwdGradsVecWgmma
        return FrostBwdGradsVecWgmma
    if cfg.stage == "grads" and cfg.grads_wgmma:
        from cudnn.linear_attention.frost.kernels.bwd_grads_wgmma import FrostBwdGradsWgmma
        return FrostBwdGradsWgmma
    return bwd_kernel_class(cfg.stage, cfg.fwd.gate_per_channel)


def compile_bwd(cfg: FrostBwdConfig, arch: str, host_target: str | None = None, ffi: str | None = None):
    """cute.compile the kernel of cfg.stage for a target like "sm_90a" (no GPU needed), as
    a compiled_kernel.CompiledKernel over bwd_abi's argument list."""
    import cutlass.cute as cute

    from cudnn.linear_attention.frost.kernels.bwd_abi import bwd_fake_args
    from cudnn.linear_attention.frost.kernels.compiled_kernel import CompiledKernel

    ffi = ffi or preferred_ffi(host_target)
    if ffi not in FFI_CONVENTIONS:
        raise ValueError(f"compile_bwd: ffi must be one of {FFI_CONVENTIONS}, got {ffi!r}")
    kernel = bwd_kernel_for(cfg)(cfg)
    options = f"--gpu-arch {arch}" + (f" --host-target '{host_target}'" if host_target else "")
    if ffi == "tvm":
        options += " --enable-tvm-ffi"
    return CompiledKernel(cute.compile(kernel, *bwd_fake_args(cfg), options=options), ffi, cfg,
                          host_target=host_target)
