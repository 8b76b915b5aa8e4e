"""The FLA drop-in on the GPU with the real engines (tag gpu; skipped without a GPU).

- functions: bf16 inputs at K = V = 128 (the FROST tile shapes), fp32 g, bf16 beta,
  int64 cu_seqlens, as transformers passes them, against transformers' own torch
  functions (fp32 math on the same values): outputs, final states, gradients;
- layers: a Qwen3-Next GatedDeltaNet layer and a Kimi Linear KDA layer in bf16 through
  install() against the same layer on transformers' torch path: training step (output,
  gradients) and prefill + token-by-token decode (outputs, cached state);
- a tiny Qwen3-Next causal LM (2 layers, random init) with the kernels installed: its
  loss falls over 30 training steps, and (with dense MLPs, see tiny_models.qwen3_next_lm)
  it generates 32 tokens greedily (prefill, then one token per step through the
  recurrent path) with every step's o and final state within 1e-2 of float64 on that
  step's inputs and per-step logits within 2e-2 (relative) of transformers' torch path fed
  the same tokens; a failure lists the steps with each tensor's error
  (generation_trace.py; tests/fla/greedy_diagnose.py shows every step).

Run on the GPU machine, with the package installed from the carried wheels (FROST from
the `frost` extra) and transformers among the test-only wheels (stage setup):
    OUT=/tmp/out bash tools/gpu/gpu_suite.sh wheels install setup frostcache fla
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.gpu

# bf16 inputs and outputs against fp32 math: the output is rounded once to bf16 (2^-9
# relative) and the kernels accumulate in fp32; gradients pass through bf16 q/k/v twice.
# Measured bounds are in the note that reports the GPU run.
OUT_BOUND, GRAD_BOUND = 1e-2, 3e-2
LOGITS_BOUND = 2e-2  # the bound for per-step generation logits


@pytest.fixture(scope="module")
def tf():
    from tests.fla import tiny_models, transformers_reference
    return tiny_models, transformers_reference


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double(), b.detach().double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def inputs(kind: str, B=2, T=200, H=2, HV=4, K=128, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)

    def randn(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape, generator=gen, device="cuda").to(dtype)

    gate = (B, T, HV) if kind == "gdn" else (B, T, HV, K)
    x = dict(q=randn(B, T, H, K), k=randn(B, T, H, K), v=randn(B, T, HV, K),
             g=F.logsigmoid(randn(*gate, dtype=torch.float32) + 3),
             beta=torch.sigmoid(randn(B, T, HV)),
             initial_state=0.1 * randn(B, HV, K, K, dtype=torch.float32))
    return {n: t.requires_grad_(True) for n, t in x.items()}


def fp32_leaves(x):
    return {n: t.detach().float().requires_grad_(True) for n, t in x.items()}


@pytest.mark.parametrize("case", ["chunk_gdn", "recurrent_gdn", "chunk_kda", "recurrent_kda"])
def test_function_matches_transformers_on_the_engines(tf, case):
    import cudnn.linear_attention.fla as cfla
    _, ref = tf
    kind = case.split("_")[1]
    fn = {"chunk_gdn": cfla.chunk_gated_delta_rule,
          "recurrent_gdn": cfla.fused_recurrent_gated_delta_rule,
          "chunk_kda": cfla.chunk_kda, "recurrent_kda": cfla.fused_recurrent_kda}[case]
    torch_fn = {"chunk_gdn": ref.torch_chunk_gdn, "recurrent_gdn": ref.torch_recurrent_gdn,
                "chunk_kda": ref.torch_chunk_kda, "recurrent_kda": ref.torch_recurrent_kda}[case]
    x = inputs(kind, T=64 if "recurrent" in case else 200)
    y = fp32_leaves(x)
    o, final = fn(x["q"], x["k"], x["v"], g=x["g"], beta=x["beta"],
                  initial_state=x["initial_state"], output_final_state=True,
                  use_qk_l2norm_in_kernel=True)
    # transformers' torch functions take q/k already repeated to the value heads (its
    # models repeat before calling; 5.17 does not broadcast grouped heads itself)
    q, k = (t.repeat_interleave(y["v"].shape[2] // t.shape[2], dim=2) for t in (y["q"], y["k"]))
    o_ref, final_ref = torch_fn(q, k, y["v"], g=y["g"], beta=y["beta"],
                                initial_state=y["initial_state"], output_final_state=True,
                                use_qk_l2norm_in_kernel=True)
    assert o.dtype == torch.bfloat16 and final.dtype == torch.float32
    errors = {"o": rel(o, o_ref), "final_state": rel(final, final_ref)}
    w = torch.randn_like(o_ref)
    ((o.float() * w).sum() + final.sum()).backward()
    ((o_ref * w).sum() + final_ref.sum()).backward()
    grads = {f"d{n}": rel(x[n].grad, y[n].grad) for n in x}
    print(case, {**errors, **grads})
    assert max(errors.values()) <= OUT_BOUND, errors
    assert max(grads.values()) <= GRAD_BOUND, grads


def _layer_pair(tf, case):
    tiny, _ = tf
    if case == "qwen3_next":
        config = tiny.qwen3_next_config(hidden=256, key_heads=2, value_heads=4, head_dim=128)
        make = tiny.gated_delta_net_layer
    else:
        config = tiny.kimi_linear_config(hidden=256, heads=2, head_dim=128)
        make = tiny.kda_layer
    return (tiny, config, make(config, 3).cuda().bfloat16(), make(config, 3).cuda().bfloat16())


@pytest.mark.parametrize("case", ["qwen3_next", "kimi_linear"])
def test_layer_on_the_engines_matches_the_torch_path(tf, case):
    import cudnn.linear_attention.fla as cfla
    from cudnn.linear_attention import ops
    tiny, config, torch_layer, layer = _layer_pair(tf, case)
    x = torch.randn(2, 160, config.hidden_size, device="cuda", dtype=torch.bfloat16)
    x_ref, x_mine = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    with tf[1].torch_path():
        y_ref = torch_layer(x_ref)
        y_ref.float().square().mean().backward()
    before = sum(i.misses + i.hits for i in ops.graph_cache_info().values())
    with cfla.installed():
        y = layer(x_mine)
        y.float().square().mean().backward()
    assert sum(i.misses + i.hits for i in ops.graph_cache_info().values()) > before
    errors = {"output": rel(y, y_ref), "d hidden": rel(x_mine.grad, x_ref.grad)}
    theirs = dict(torch_layer.named_parameters())
    errors.update({f"d {n}": rel(p.grad, theirs[n].grad) for n, p in layer.named_parameters()})
    print(case, errors)
    assert errors["output"] <= OUT_BOUND, errors
    assert max(errors.values()) <= GRAD_BOUND, errors
    # inference: prefill, then one token per call through the recurrent function
    cache, ref_cache = tiny.new_cache(config), tiny.new_cache(config)
    steps = torch.randn(2, 70, config.hidden_size, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        with tf[1].torch_path():
            outs_ref = [torch_layer(steps[:, :64], cache_params=ref_cache)]
            outs_ref += [torch_layer(steps[:, i:i + 1], cache_params=ref_cache)
                         for i in range(64, 70)]
        with cfla.installed():
            outs = [layer(steps[:, :64], cache_params=cache)]
            outs += [layer(steps[:, i:i + 1], cache_params=cache) for i in range(64, 70)]
    decode = [rel(a, b) for a, b in zip(outs, outs_ref)]
    state = rel(tiny.recurrent_state(cache, 0), tiny.recurrent_state(ref_cache, 0))
    print(case, "decode", decode, "state", state)
    assert max(decode) <= OUT_BOUND and state <= OUT_BOUND


def _on_gpu(lm):
    config, model = lm
    return config, model.cuda().bfloat16()


def test_tiny_qwen3_next_trains_with_the_kernels_installed(tf):
    import cudnn.linear_attention.fla as cfla
    config, model = _on_gpu(tf[0].qwen3_next_lm(seed=0, dense_mlp=False))
    gen = torch.Generator(device="cuda").manual_seed(1)
    tokens = torch.randint(0, config.vocab_size, (4, 128), device="cuda", generator=gen)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    losses = []
    with cfla.installed():
        for _ in range(30):
            loss = model(input_ids=tokens, labels=tokens).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    print("losses", [round(v, 3) for v in losses])
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < 0.8 * losses[0], losses


def test_greedy_generation_logits_match_the_torch_path(tf):
    # dense MLPs: a top-1 expert router turns a near-tie into a whole-MLP swap for one
    # token (tiny_models.qwen3_next_lm); greedy_diagnose.py replays the 2-expert model
    from tests.fla import generation_trace as trace
    tiny, _ = tf
    config, model = _on_gpu(tiny.generation_lm())
    model.eval()
    prompt = torch.randint(0, config.vocab_size, (1, 24), device="cuda",
                           generator=torch.Generator(device="cuda").manual_seed(3))
    pairs = trace.replay(model, prompt, 32, lambda: tiny.new_cache(config))
    reports = [trace.compare(p) for p in pairs]
    for r in reports:
        print(r.line())
    # each step on its own: every call's o and final state against float64 on that
    # call's inputs (what the kernels owe), then the model's logits (the bound)
    kernel = [r for r in reports if r.worst_kernel_error() > OUT_BOUND or not r.calls
              or any(c["runs"] == "-" for c in r.calls)]  # "-": no op of ours ran
    assert not kernel, "drop-in o / final state off float64:\n" + \
        "\n".join(r.line() for r in kernel)
    logits = [r for r in reports if not r.logits <= LOGITS_BOUND]
    assert not logits, "per-step logits off the torch path:\n" + \
        "\n".join(r.line() for r in logits)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q", "-s"]))
