"""What the cuTile linear-attention kernels can serve, read off the graph's facts record.

`decline_reason(facts, family)` returns None when the kernels in kernels/ can run the
node exactly as described, else a message naming the engine, the property that fails
and its value.  Pure and cheap: no cuda.tile import, no device query (those are
`runtime_reason`).  A valid facts record already guarantees what the op spec says
(THD, HK in {H, HV}, gates at HO heads and K channels, output presence); these gates add
what the kernels lack: q/k heads shared by a power of two of output heads (HK == H) or
v heads likewise, K, V <= 256, forward and backward without summaries, checkpoints,
state pools, overwrite, beta sigmoid or safe gates, kernel-native dtypes.
"""
from __future__ import annotations

import importlib.util

from cudnn import data_type
from cudnn.linear_attention.common.facts import LinearAttentionFacts
from cudnn.linear_attention.common.feature_gates import unsupported_feature_reason
from cudnn.linear_attention.common.port_dtypes import IO, PortDtypes
from cudnn.ops.linear_attention_family import Family

IO_DTYPES = (data_type.HALF, data_type.BFLOAT16)
FP32 = data_type.FLOAT
MAX_HEAD_DIM = 256          # register budget of the [64, K] / [K, V] fp32 tiles

# kernel-native dtypes per port; unset (None) is always accepted
PORT_DTYPES = PortDtypes(IO_DTYPES, {
    "g": (FP32,), "beta": (FP32,), "cu_seqlens": (data_type.INT32,),
    "initial_state": (FP32,), "final_state": (FP32,), "d_final_state": (FP32,),
    "d_initial_state": (FP32,), "dG": (FP32,), "dBeta": (FP32,),
    "O": IO, "dO": IO, "dQ": IO, "dK": IO, "dV": IO,
})
_UNSUPPORTED_INPUTS = ("state_indices", "state_checkpoints", "a_log", "dt_bias")
_UNSUPPORTED_FLAGS = ("use_beta_sigmoid", "allow_neg_eigval", "safe_gate",
                      "overwrite_initial_state")


def _pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


def decline_reason(f: LinearAttentionFacts, family: Family, engine: str) -> str | None:
    """Why `engine` cannot serve the graph described by facts `f`, or None."""
    if not f.valid:
        return f"{engine}: {f.invalid_reason}"
    if f.family != family:
        return f"{engine}: serves {family} nodes, not {f.family}"
    if f.is_summary:
        return f"{engine}: summary nodes are not implemented (kind {f.kind.name})"
    if f.h_k != f.h_q:
        return f"{engine}: k heads ({f.h_k}) must equal q heads ({f.h_q})"
    for what, heads in (("q/k", f.h_q), ("v", f.h_v)):
        if f.h_o % heads or not _pow2(f.h_o // heads):
            return (f"{engine}: each {what} head must serve a power-of-two number of output "
                    f"heads (HO = {f.h_o}, {what} heads = {heads})")
    for what, dim in (("K", f.d_qk), ("V", f.d_v)):
        if not dim or dim > MAX_HEAD_DIM:
            return f"{engine}: head dim {what} = {dim} is outside 1..{MAX_HEAD_DIM}"
    return (unsupported_feature_reason(f, engine, flags=_UNSUPPORTED_FLAGS,
                                       inputs=_UNSUPPORTED_INPUTS)
            or PORT_DTYPES.reason(f, engine))


def runtime_reason(engine: str) -> str | None:
    """Why this process cannot run cuTile kernels (no cuda.tile, no compiler, no GPU)."""
    if importlib.util.find_spec("cuda") is None or importlib.util.find_spec("cuda.tile") is None:
        return f"{engine}: cuda.tile (cuda-tile) is not installed"
    from .kernel_cache import tileiras_path
    if tileiras_path() is None:
        return (f"{engine}: cuTile's compiler 'tileiras' is not installed (pip install "
                "'cudnn-pygraph[cutile]', or a CUDA >= 13.3 toolkit on PATH)")
    try:
        import torch
    except ImportError:
        return f"{engine}: torch is not installed (the engine launches on torch streams)"
    if not torch.cuda.is_available():
        return f"{engine}: no CUDA device is visible"
    return None
