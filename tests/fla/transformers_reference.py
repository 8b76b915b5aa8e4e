"""transformers' own torch references for the FLA ops, captured unwrapped at import.

Qwen3-Next's `torch_chunk_gated_delta_rule` / `torch_recurrent_gated_delta_rule` and Kimi
Linear's `chunk_kimi_delta_attention` / `recurrent_kimi_delta_attention` are what those
models run without FLA. Their module attributes are transformers' kernel-lookup wrappers
(which refuse cu_seqlens without FLA, and which install() replaces); the functions here
are the plain torch functions under them, taken before any test installs the drop-in.
"""
from __future__ import annotations

import inspect

from transformers.models.kimi_linear import modeling_kimi_linear as kimi
from transformers.models.qwen3_next import modeling_qwen3_next as qwen3_next

torch_chunk_gdn = inspect.unwrap(qwen3_next.torch_chunk_gated_delta_rule)
torch_recurrent_gdn = inspect.unwrap(qwen3_next.torch_recurrent_gated_delta_rule)
torch_chunk_kda = inspect.unwrap(kimi.chunk_kimi_delta_attention)
torch_recurrent_kda = inspect.unwrap(kimi.recurrent_kimi_delta_attention)
