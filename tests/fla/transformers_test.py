"""The FLA drop-in against transformers' own torch path, on a CPU (reference engines).

- functions: chunk_gated_delta_rule / fused_recurrent_gated_delta_rule against Qwen3-Next's
  torch_chunk_gated_delta_rule / torch_recurrent_gated_delta_rule, chunk_kda /
  fused_recurrent_kda against Kimi Linear's torch functions: outputs, final states and
  every gradient (q, k, v, g, beta, initial_state), called as the models call them
  (fp32 g, beta in the model dtype, use_qk_l2norm_in_kernel=True, grouped value heads);
  packed sequences (cu_seqlens, which the torch path cannot take) against each sequence
  alone;
- layers, with install(): a Qwen3-Next GatedDeltaNet layer and a Kimi Linear KDA layer,
  training (output, input and parameter gradients) and inference (prefill then token by
  token through the recurrent function, outputs and the cached recurrent state), against
  the same layer on transformers' torch path.

States are [B, H, K, V] on both sides with K == V, so a missing transpose would not be
caught by a shape (test_state_layout_is_not_guessable_from_the_shape proves it is caught
by the numbers).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import cudnn.linear_attention.fla as cfla
from tests.fla import transformers_reference as tf_ref
from tests.fla.tiny_models import (gated_delta_net_layer, kda_layer, kimi_linear_config,
                                   new_cache, qwen3_next_config, recurrent_state)
from tests.reference.compare import assert_rel_close
from tests.torch_ops.reference_engine import reference_engine, reference_engines_installed

# The reference engines compute in float64 and round once to float32; transformers' torch
# path is float32 throughout (its chunked form solves a triangular system per chunk): ~1e-6
# relative apart on these sizes, 100x margin.
BOUND = 1e-4


@pytest.fixture(scope="module", autouse=True)
def engines():
    with reference_engines_installed():
        yield


def make(kind: str, B: int = 2, T: int = 13, H: int = 2, HV: int = 4, K: int = 8,
         seed: int = 0, with_state: bool = True) -> dict[str, torch.Tensor]:
    """Inputs as the models pass them: q, k [B, T, H, K], v [B, T, HV, K] (K == V), fp32
    log-decay g, beta after its sigmoid, an initial state [B, HV, K, V]."""
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen)

    gate = (B, T, HV) if kind == "gdn" else (B, T, HV, K)
    x = dict(q=randn(B, T, H, K), k=randn(B, T, H, K), v=randn(B, T, HV, K),
             g=F.logsigmoid(randn(*gate) + 2), beta=torch.sigmoid(randn(B, T, HV)))
    if with_state:
        x["initial_state"] = 0.5 * randn(B, HV, K, K)
    return {n: t.requires_grad_(True) for n, t in x.items()}


def clone(x: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {n: t.detach().clone().requires_grad_(True) for n, t in x.items()}


def backward(o: torch.Tensor, final: torch.Tensor, seed: int = 9) -> None:
    gen = torch.Generator().manual_seed(seed)
    (o * torch.randn(o.shape, generator=gen)).sum().backward(retain_graph=True)
    (final * torch.randn(final.shape, generator=gen)).sum().backward()


def compare(mine: dict, theirs: dict, o, o_ref, final, final_ref) -> None:
    assert o.dtype == o_ref.dtype and final.dtype == torch.float32
    assert_rel_close("o", o, o_ref, BOUND)
    assert_rel_close("final_state", final, final_ref, BOUND)
    for name in mine:
        assert mine[name].grad is not None, name
        assert mine[name].grad.dtype == mine[name].dtype, name
        assert_rel_close(f"d{name}", mine[name].grad, theirs[name].grad, BOUND)


FUNCTIONS = {
    "chunk_gdn": ("gdn", cfla.chunk_gated_delta_rule, tf_ref.torch_chunk_gdn),
    "recurrent_gdn": ("gdn", cfla.fused_recurrent_gated_delta_rule, tf_ref.torch_recurrent_gdn),
    "chunk_kda": ("kda", cfla.chunk_kda, tf_ref.torch_chunk_kda),
    "recurrent_kda": ("kda", cfla.fused_recurrent_kda, tf_ref.torch_recurrent_kda),
}


def call_as_models_do(fn, x: dict[str, torch.Tensor], **extra):
    return fn(x["q"], x["k"], x["v"], g=x["g"], beta=x["beta"],
              initial_state=x.get("initial_state"), output_final_state=True,
              use_qk_l2norm_in_kernel=True, **extra)


def torch_reference(kind: str, ref, x: dict[str, torch.Tensor]):
    q, k = x["q"], x["k"]
    if kind == "kda":  # Kimi's torch functions take q/k at the value heads
        r = x["v"].shape[2] // q.shape[2]
        q, k = q.repeat_interleave(r, dim=2), k.repeat_interleave(r, dim=2)
    return ref(q, k, x["v"], g=x["g"], beta=x["beta"], initial_state=x.get("initial_state"),
               output_final_state=True, use_qk_l2norm_in_kernel=True)


@pytest.mark.parametrize("case", sorted(FUNCTIONS))
def test_function_matches_transformers_torch_path(case):
    kind, fn, ref = FUNCTIONS[case]
    mine = make(kind, seed=1)
    theirs = clone(mine)
    o, final = call_as_models_do(fn, mine)
    o_ref, final_ref = torch_reference(kind, ref, theirs)
    backward(o, final)
    backward(o_ref, final_ref)
    compare(mine, theirs, o, o_ref, final, final_ref)


@pytest.mark.parametrize("case", ["chunk_gdn", "chunk_kda"])
def test_packed_sequences_match_each_sequence_alone(case):
    """cu_seqlens (int64, as transformers passes cu_seq_lens_q): outputs, final states and
    gradients of each packed sequence equal those of the sequence run alone."""
    kind, fn, ref = FUNCTIONS[case]
    lengths = (5, 1, 9)
    parts = [make(kind, B=1, T=n, seed=10 + i) for i, n in enumerate(lengths)]
    packed = {n: torch.cat([p[n].detach() for p in parts], dim=0 if n == "initial_state"
                           else 1).requires_grad_(True) for n in parts[0]}
    cu = torch.tensor([0, 5, 6, 15])
    o, final = call_as_models_do(fn, packed, cu_seqlens=cu)
    gen = torch.Generator().manual_seed(12)
    w_o, w_final = torch.randn(o.shape, generator=gen), torch.randn(final.shape, generator=gen)
    ((o * w_o).sum() + (final * w_final).sum()).backward()
    for i, part in enumerate(parts):
        span = slice(int(cu[i]), int(cu[i + 1]))
        o_ref, final_ref = torch_reference(kind, ref, part)
        ((o_ref * w_o[:, span]).sum() + (final_ref * w_final[i:i + 1]).sum()).backward()
        assert_rel_close(f"o[{i}]", o[:, span], o_ref, BOUND)
        assert_rel_close(f"final_state[{i}]", final[i:i + 1], final_ref, BOUND)
        for name, t in part.items():
            grad = packed[name].grad[i:i + 1] if name == "initial_state" \
                else packed[name].grad[:, span]
            assert_rel_close(f"d{name}[{i}]", grad, t.grad, BOUND)


def test_state_layout_is_not_guessable_from_the_shape():
    """K == V: FLA's [K, V] state and the ops' [V, K] have one shape. The drop-in
    transposes; passing the state as if it were V-first gives other numbers."""
    x = make("gdn", seed=2)
    o_ref, final_ref = torch_reference("gdn", tf_ref.torch_recurrent_gdn, clone(x))
    o, final = call_as_models_do(cfla.fused_recurrent_gated_delta_rule, clone(x))
    assert_rel_close("o", o, o_ref, BOUND)
    wrong, _ = call_as_models_do(cfla.fused_recurrent_gated_delta_rule, clone(x),
                                 state_v_first=True)
    assert (wrong - o_ref).norm() > 1e-2 * o_ref.norm()
    v_first = clone(x)
    v_first["initial_state"] = v_first["initial_state"].detach().transpose(-1, -2).contiguous()
    o_vf, final_vf = call_as_models_do(cfla.fused_recurrent_gated_delta_rule, v_first,
                                       state_v_first=True)
    assert_rel_close("o (state_v_first)", o_vf, o_ref, BOUND)
    assert_rel_close("final (state_v_first)", final_vf.transpose(-1, -2), final_ref, BOUND)


# -- layers ---------------------------------------------------------------------------

LAYERS = {
    "qwen3_next_gated_delta_net": (qwen3_next_config, gated_delta_net_layer, "gdn"),
    "kimi_linear_kda": (kimi_linear_config, kda_layer, "kda"),
}


def layer_pair(case: str):
    config_fn, layer_fn, family = LAYERS[case]
    config = config_fn()
    return config, layer_fn(config, seed=3), layer_fn(config, seed=3), family


def grads(layer: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad for n, p in layer.named_parameters()}


@pytest.mark.parametrize("case", sorted(LAYERS))
def test_layer_training_step_matches_the_torch_path(case):
    config, torch_layer, drop_in_layer, family = layer_pair(case)
    x = torch.randn(2, 11, config.hidden_size, generator=torch.Generator().manual_seed(4))
    x_ref, x_mine = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    weight = torch.randn(x.shape, generator=torch.Generator().manual_seed(5))
    with tf_ref.torch_path():
        y_ref = torch_layer(x_ref)
        (y_ref * weight).sum().backward()
    calls = len(reference_engine(family).calls)
    with cfla.installed():
        y = drop_in_layer(x_mine)
        (y * weight).sum().backward()
    assert [c[0] for c in reference_engine(family).calls[calls:]] == ["fwd", "bwd"]
    assert_rel_close("layer output", y, y_ref, BOUND)
    assert_rel_close("d hidden_states", x_mine.grad, x_ref.grad, BOUND)
    theirs = grads(torch_layer)
    for name, grad in grads(drop_in_layer).items():
        assert_rel_close(f"d {name}", grad, theirs[name], BOUND)


@pytest.mark.parametrize("case", sorted(LAYERS))
def test_layer_prefill_then_decode_matches_the_torch_path(case):
    config, torch_layer, drop_in_layer, family = layer_pair(case)
    tokens = torch.randn(2, 10, config.hidden_size, generator=torch.Generator().manual_seed(6))
    prefill, steps = tokens[:, :7], tokens[:, 7:]
    ref_cache, cache = new_cache(config), new_cache(config)
    with torch.no_grad():
        with tf_ref.torch_path():
            outs_ref = [torch_layer(prefill, cache_params=ref_cache)]
            outs_ref += [torch_layer(steps[:, i:i + 1], cache_params=ref_cache)
                         for i in range(steps.shape[1])]
        with cfla.installed():
            outs = [drop_in_layer(prefill, cache_params=cache)]
            # decode: one token per call, through the recurrent function
            outs += [drop_in_layer(steps[:, i:i + 1], cache_params=cache)
                     for i in range(steps.shape[1])]
    for i, (out, ref) in enumerate(zip(outs, outs_ref)):
        assert_rel_close(f"output of call {i}", out, ref, BOUND)
    state, state_ref = recurrent_state(cache, 0), recurrent_state(ref_cache, 0)
    assert state.shape == state_ref.shape and state.dtype == state_ref.dtype
    assert_rel_close("cached recurrent state", state, state_ref, BOUND)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
