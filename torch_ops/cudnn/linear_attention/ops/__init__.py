"""Torch custom ops for linear attention (`cudnn.linear_attention.ops`); needs torch.

Public functions: `gated_delta_net`, `kimi_delta_attention`, `gated_delta_net_v2`, and
their span summaries `<function>_summary` / `<function>_summary_bwd` (summary.py).
Importing this package registers the custom ops `cudnn::<function>_fwd` and
`cudnn::<function>_bwd` (torch.library), with fake kernels and autograd. Each op call runs
a cached single-node graph through the graph API; whichever engine the planner ranks
first runs it. `graph_caches()`, `clear_graph_caches()` and `set_graph_cache_size()`
inspect and manage the per-op graph caches; `set_autotune(True)` (or `CUDNN_AUTOTUNE=1`)
times every plan of a new call signature once and keeps the fastest (recorded winners are
used without it); `set_training_checkpoints(True)` makes training forwards keep state
checkpoints for the backward (opt-in; torch_ops/README.md).
"""
from __future__ import annotations

from cudnn.linear_attention.ops._graph_cache import CacheInfo, GraphCache
from cudnn.linear_attention.ops._graph_runner import set_autotune
from cudnn.linear_attention.ops._op_factory import set_training_checkpoints
from cudnn.linear_attention.ops.gdn import gated_delta_net
from cudnn.linear_attention.ops.gdn import OPS as _GDN_OPS
from cudnn.linear_attention.ops.gdn2 import gated_delta_net_v2
from cudnn.linear_attention.ops.gdn2 import OPS as _GDN2_OPS
from cudnn.linear_attention.ops.kda import kimi_delta_attention
from cudnn.linear_attention.ops.kda import OPS as _KDA_OPS
from cudnn.linear_attention.ops.summary import SUMMARY_OPS as _SUMMARY_OPS
from cudnn.linear_attention.ops.summary import (gated_delta_net_summary,
                                                gated_delta_net_summary_bwd,
                                                gated_delta_net_v2_summary,
                                                gated_delta_net_v2_summary_bwd,
                                                kimi_delta_attention_summary,
                                                kimi_delta_attention_summary_bwd)

FAMILY_OPS = (_GDN_OPS, _KDA_OPS, _GDN2_OPS)


def graph_caches() -> tuple[GraphCache, ...]:
    """The graph cache of every registered op (forward, backward and the summaries)."""
    return tuple(cache for ops in (*FAMILY_OPS, *_SUMMARY_OPS) for cache in ops.caches())


def graph_cache_info() -> dict[str, CacheInfo]:
    return {cache.name: cache.info() for cache in graph_caches()}


def clear_graph_caches() -> None:
    """Forget every cached graph (after installing an engine, or in tests), and the
    training-checkpoint decisions made with them."""
    for cache in graph_caches():
        cache.clear()
    for ops in FAMILY_OPS:
        ops.checkpoint_decisions.clear()


def set_graph_cache_size(maxsize: int) -> None:
    """Bound every op's graph cache to `maxsize` entries (evicting the oldest now)."""
    for cache in graph_caches():
        cache.maxsize = maxsize


__all__ = [
    "CacheInfo", "FAMILY_OPS", "clear_graph_caches", "gated_delta_net", "gated_delta_net_v2",
    "graph_cache_info", "graph_caches", "kimi_delta_attention", "set_autotune",
    "set_graph_cache_size",
    "gated_delta_net_summary", "gated_delta_net_summary_bwd", "kimi_delta_attention_summary",
    "kimi_delta_attention_summary_bwd", "gated_delta_net_v2_summary",
    "gated_delta_net_v2_summary_bwd",
]
