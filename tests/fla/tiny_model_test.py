"""A tiny Qwen3-Next causal LM (2 layers, random init) with the drop-in installed, on a
CPU (reference engines): its loss falls over 30 training steps, and greedy generation
(prefill, then one token per step through the recurrent function) gives per-step logits
equal, to float32 rounding, to transformers' torch path fed the same tokens. The GPU
version (real engines, bf16, K = V = 128) is gpu_test.py.
"""
from __future__ import annotations

import pytest
import torch

import cudnn.linear_attention.fla as cfla
from tests.fla import tiny_models as tiny
from tests.fla.transformers_reference import torch_path
from tests.reference.compare import rel_err
from tests.torch_ops.reference_engine import reference_engine, reference_engines_installed

BOUND = 1e-4  # as transformers_test.py: float64 engines vs float32 torch path


@pytest.fixture(scope="module", autouse=True)
def engines():
    with reference_engines_installed():
        yield


def tiny_lm(seed: int):
    from transformers import Qwen3NextForCausalLM
    config = tiny.qwen3_next_config(layers=2, vocab=64)
    torch.manual_seed(seed)
    return config, Qwen3NextForCausalLM(config)


def test_loss_falls_over_30_steps():
    config, model = tiny_lm(0)
    tokens = torch.randint(0, config.vocab_size, (2, 24), generator=torch.Generator().manual_seed(1))
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    losses = []
    calls = len(reference_engine("gdn").calls)
    with cfla.installed():
        for _ in range(30):
            loss = model(input_ids=tokens, labels=tokens).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    assert len(reference_engine("gdn").calls) - calls == 60  # a forward and a backward a step
    assert losses[-1] < 0.8 * losses[0], losses


def test_greedy_generation_matches_the_torch_path():
    config, model = tiny_lm(2)
    model.eval()
    prompt = torch.randint(0, config.vocab_size, (1, 9), generator=torch.Generator().manual_seed(3))
    cache, ref_cache = tiny.new_cache(config), tiny.new_cache(config)
    with torch.no_grad():
        with cfla.installed():
            logits = model(input_ids=prompt, past_key_values=cache, use_cache=True).logits[:, -1]
        with torch_path():
            ref = model(input_ids=prompt, past_key_values=ref_cache, use_cache=True).logits[:, -1]
        errors = [rel_err(logits, ref)]
        for _ in range(32):
            token = logits.argmax(-1, keepdim=True)  # the drop-in's choice, fed to both
            with cfla.installed():
                logits = model(input_ids=token, past_key_values=cache, use_cache=True).logits[:, -1]
            with torch_path():
                ref = model(input_ids=token, past_key_values=ref_cache,
                            use_cache=True).logits[:, -1]
            errors.append(rel_err(logits, ref))
    assert max(errors) <= BOUND, errors


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
