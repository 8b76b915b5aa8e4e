"""A drop-in for flash-linear-attention (FLA 0.6): its GDN, KDA and GDN-2 ops over this
library's kernels, and `install()`, which routes existing FLA callers and transformers
models (Qwen3-Next, Qwen3.5, Kimi Linear, ...) to them.

    chunk_gated_delta_rule, fused_recurrent_gated_delta_rule (aliases chunk_gdn,
    fused_recurrent_gdn), chunk_kda, fused_recurrent_kda, chunk_gdn2, fused_recurrent_gdn2

take FLA's arguments, layouts and defaults: [B, T, H, D] tensors, an optional
`cu_seqlens` [N + 1] (int32 or int64) with B = 1, gates in any float dtype, states
[N, HV, K, V] (or [N, HV, V, K] with `state_v_first=True`); they return (o, final_state)
with final_state float32 or None, raise FLA's errors for FLA's bad arguments, and are
differentiable (the recurrent forms too). They run `cudnn.linear_attention.ops`, so
whichever engine the planner picks runs the call. FLA need not be installed.

For a transformers model, one line before (or after) building it:

    import cudnn.linear_attention.fla; cudnn.linear_attention.fla.install()
"""
from __future__ import annotations

from cudnn.linear_attention.fla.gated_delta_rule import (chunk_gated_delta_rule, chunk_gdn,
                                                         fused_recurrent_gated_delta_rule,
                                                         fused_recurrent_gdn)
from cudnn.linear_attention.fla.gdn2 import chunk_gdn2, fused_recurrent_gdn2
from cudnn.linear_attention.fla.install import install, installed, is_installed, uninstall
from cudnn.linear_attention.fla.kda import chunk_kda, fused_recurrent_kda

__all__ = [
    "chunk_gated_delta_rule", "chunk_gdn", "chunk_gdn2", "chunk_kda",
    "fused_recurrent_gated_delta_rule", "fused_recurrent_gdn", "fused_recurrent_gdn2",
    "fused_recurrent_kda", "install", "installed", "is_installed", "uninstall",
]
