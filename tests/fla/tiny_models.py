"""Tiny random transformers models and layers for the FLA drop-in tests (no download).

`qwen3_next_config()` and `kimi_linear_config()` are configs small enough for a CPU test
(hidden 32, 2-4 linear-attention heads of dim 8) or, with `head_dim=128` and more
heads, sized for the GPU engines (K = V = 128). `gated_delta_net_layer()` and
`kda_layer()` build one linear-attention layer with its parameters drawn from a seeded
generator (transformers leaves some of them uninitialised until a model's init runs).
"""
from __future__ import annotations

import math

import torch


def qwen3_next_config(*, hidden: int = 32, key_heads: int = 2, value_heads: int = 4,
                      head_dim: int = 8, layers: int = 2, vocab: int = 64,
                      dense_mlp: bool = False):
    """Qwen3-Next's layer pattern at test size; its MLPs are mixtures of 2 experts (top 1)
    unless `dense_mlp` (config.mlp_only_layers: every layer a plain MLP)."""
    from transformers import Qwen3NextConfig
    # every layer linear attention except the last (a full-attention one, as in the model)
    layer_types = ["linear_attention"] * (layers - 1) + ["full_attention"]
    return Qwen3NextConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden,
        num_hidden_layers=layers, layer_types=layer_types, num_attention_heads=2,
        num_key_value_heads=1, head_dim=head_dim, linear_num_key_heads=key_heads,
        linear_num_value_heads=value_heads, linear_key_head_dim=head_dim,
        linear_value_head_dim=head_dim, linear_conv_kernel_dim=4, num_experts=2,
        num_experts_per_tok=1, moe_intermediate_size=hidden, shared_expert_intermediate_size=hidden,
        decoder_sparse_step=1, mlp_only_layers=list(range(layers)) if dense_mlp else [],
        max_position_embeddings=256)


def qwen3_next_lm(*, seed: int, dense_mlp: bool):
    """A tiny Qwen3-Next causal LM (2 layers: linear attention, full attention; K = V =
    128, float32 on the CPU), initialised after torch.manual_seed(seed).

    With dense_mlp=False each layer's MLP is a top-1 router over 2 experts. That model
    trains fine, but a greedy generation compared step by step with another path
    needs dense_mlp=True: where a token's two expert logits are nearly tied, a
    rounding-sized difference upstream picks the other expert and replaces that token's
    whole MLP output (a 0.5 relative logits error from a 5e-3 one), so the comparison
    would measure the router's tie, not the kernels.
    """
    from transformers import Qwen3NextForCausalLM
    config = qwen3_next_config(hidden=256, key_heads=2, value_heads=4, head_dim=128,
                               layers=2, vocab=512, dense_mlp=dense_mlp)
    torch.manual_seed(seed)
    return config, Qwen3NextForCausalLM(config)


def generation_lm():
    """The LM of gpu_test.py's greedy generation against the torch path (dense MLPs)."""
    return qwen3_next_lm(seed=2, dense_mlp=True)


def kimi_linear_config(*, hidden: int = 32, heads: int = 4, head_dim: int = 8):
    from transformers import KimiLinearConfig
    return KimiLinearConfig(
        vocab_size=64, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=1,
        layer_types=["linear_attention"], mlp_layer_types=["dense"], linear_head_dim=head_dim,
        linear_num_heads=heads, linear_conv_kernel_dim=4, num_attention_heads=2,
        num_key_value_heads=2, num_local_experts=2, num_experts_per_tok=1,
        moe_intermediate_size=hidden, pad_token_id=0, bos_token_id=1, eos_token_id=2)


def _seeded(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Draw every parameter (transformers leaves A_log / dt_bias uninitialised)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "A_log":  # decay rates exp(A_log) in [1, 16], as the models draw them
                p.copy_(torch.empty(p.shape).uniform_(1, 16, generator=gen).log())
            elif leaf == "dt_bias":
                p.copy_(torch.rand(p.shape, generator=gen) - 0.5)
            elif leaf == "weight" and p.dim() == 1:  # norms
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
            else:
                fan_in = p.shape[-1] if p.dim() > 1 else 1
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(fan_in))
    return module


def gated_delta_net_layer(config, seed: int = 0) -> torch.nn.Module:
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextGatedDeltaNet
    return _seeded(Qwen3NextGatedDeltaNet(config, layer_idx=0), seed)


def kda_layer(config, seed: int = 0) -> torch.nn.Module:
    from transformers.models.kimi_linear.modeling_kimi_linear import KimiLinearDeltaAttention
    return _seeded(KimiLinearDeltaAttention(config, layer_idx=0), seed)


def new_cache(config):
    from transformers import DynamicCache
    return DynamicCache(config=config)


def recurrent_state(cache, layer: int):
    """The recurrent state a DynamicCache holds for linear-attention layer `layer`, across
    transformers versions: `get_recurrent_state` where it exists (5.2x), else the state
    kept on the cache's layer object or on the cache itself (older 5.x, e.g. 5.17)."""
    get = getattr(cache, "get_recurrent_state", None)
    if get is not None:
        return get(layer)
    layers = getattr(cache, "layers", None)
    candidates = ([(layers[layer], 0)] if layers is not None else []) + [(cache, layer)]
    for holder, index in candidates:
        states = getattr(holder, "recurrent_states", None)
        if states is None:
            continue
        if isinstance(states, (dict, list, tuple)):
            return states[index]
        return states
    raise AttributeError(f"{type(cache).__name__}: no recurrent state found for layer {layer}")
