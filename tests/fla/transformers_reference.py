"""transformers' own torch references for the FLA ops, captured unwrapped at import.

Qwen3-Next's `torch_chunk_gated_delta_rule` / `torch_recurrent_gated_delta_rule` and Kimi
Linear's `chunk_kimi_delta_attention` / `recurrent_kimi_delta_attention` are what those
models run without FLA. Their module attributes are transformers' kernel-lookup wrappers
(which refuse cu_seqlens without FLA, and which install() replaces); the functions here
are the plain torch functions under them, taken before any test installs the drop-in.
`torch_path()` puts them back in the modules for a reference run of a whole layer or model.
"""
from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator

from transformers.models.kimi_linear import modeling_kimi_linear as kimi
from transformers.models.qwen3_next import modeling_qwen3_next as qwen3_next

torch_chunk_gdn = inspect.unwrap(qwen3_next.torch_chunk_gated_delta_rule)
torch_recurrent_gdn = inspect.unwrap(qwen3_next.torch_recurrent_gated_delta_rule)
torch_chunk_kda = inspect.unwrap(kimi.chunk_kimi_delta_attention)
torch_recurrent_kda = inspect.unwrap(kimi.recurrent_kimi_delta_attention)


_MODULE_FUNCTIONS = (
    (qwen3_next, "torch_chunk_gated_delta_rule", torch_chunk_gdn),
    (qwen3_next, "torch_recurrent_gated_delta_rule", torch_recurrent_gdn),
    (kimi, "chunk_kimi_delta_attention", torch_chunk_kda),
    (kimi, "recurrent_kimi_delta_attention", torch_recurrent_kda),
)


@contextlib.contextmanager
def torch_path() -> Iterator[None]:
    """The models' layers on transformers' torch functions, even where FLA is installed
    (transformers then calls FLA's kernels, whose gated backward refuses Hopper with
    Triton < 3.7.1)."""
    saved = [(module, name, getattr(module, name)) for module, name, _ in _MODULE_FUNCTIONS]
    for module, name, function in _MODULE_FUNCTIONS:
        setattr(module, name, function)
    try:
        yield
    finally:
        for module, name, function in saved:
            setattr(module, name, function)
