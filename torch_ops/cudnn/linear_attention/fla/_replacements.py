"""Which objects `install()` replaces with the drop-in functions, and with which.

A module attribute is replaced when it is one of FLA's public ops (a function defined in
an `fla.*` module under one of the names below) or one of the functions transformers
models call for them (defined in a `transformers.models.*` module: the torch fallbacks
that transformers' kernel lookup decorates, or the FLA function that lookup found).
Objects are recognised by the module and name they were defined with (`__module__`,
`__name__`, which functools.wraps keeps), so aliases and `from ... import` copies in any
loaded module are replaced too, and nothing else is.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cudnn.linear_attention.fla import gated_delta_rule, gdn2, kda

#: FLA's public op names -> the drop-in.
FLA_OPS: Mapping[str, Callable[..., Any]] = {
    "chunk_gated_delta_rule": gated_delta_rule.chunk_gated_delta_rule,
    "fused_recurrent_gated_delta_rule": gated_delta_rule.fused_recurrent_gated_delta_rule,
    "chunk_kda": kda.chunk_kda,
    "fused_recurrent_kda": kda.fused_recurrent_kda,
    "chunk_gdn2": gdn2.chunk_gdn2,
    "fused_recurrent_gdn2": gdn2.fused_recurrent_gdn2,
}
#: transformers' torch fallbacks (Qwen3-Next, Qwen3.5, OLMo-Hybrid, ...: GDN; Kimi
#: Linear, Bailing-Hybrid, GLM-5-Next: KDA) -> the FLA op they stand for.
TRANSFORMERS_FALLBACKS: Mapping[str, str] = {
    "torch_chunk_gated_delta_rule": "chunk_gated_delta_rule",
    "torch_recurrent_gated_delta_rule": "fused_recurrent_gated_delta_rule",
    "chunk_kimi_delta_attention": "chunk_kda",
    "recurrent_kimi_delta_attention": "fused_recurrent_kda",
}
#: module name prefixes whose later imports the import hook patches.
WATCHED_PREFIXES = ("fla.", "transformers.models.")


def _defined_in(obj: Any, prefix: str) -> bool:
    module = getattr(obj, "__module__", None)
    return isinstance(module, str) and (module.startswith(prefix) or module == prefix[:-1])


def replacement_for(obj: Any) -> Callable[..., Any] | None:
    """The drop-in function that stands for `obj`, or None."""
    if not callable(obj):
        return None
    name = getattr(obj, "__name__", None)
    if not isinstance(name, str):
        return None
    if _defined_in(obj, "fla."):
        return FLA_OPS.get(name)
    if _defined_in(obj, "transformers.models."):
        op = TRANSFORMERS_FALLBACKS.get(name) or (name if name in FLA_OPS else None)
        return None if op is None else FLA_OPS[op]
    return None


def watched(module_name: str) -> bool:
    return module_name == "fla" or module_name.startswith(WATCHED_PREFIXES)
