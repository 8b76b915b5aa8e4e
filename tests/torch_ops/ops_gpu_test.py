"""The torch ops on the GPU with the installed engines (tag gpu; skipped without a GPU).

Numerics and gradients against the float64 recurrent references, torch.compile, graph
cache reuse, the current-stream contract, a two-layer GDN model that trains, and the
errors for GDN-2 (no engine yet) and for CPU tensors. Run on the GPU machine from the
repository root:
  python -m pytest -q tests/torch_ops/ops_gpu_test.py
"""
from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

import cudnn
from cudnn.linear_attention import ops
from cudnn.linear_attention.ops._graph_runner import TorchDeviceHandle
from tests.reference.compare import assert_rel_close, rel_err
from tests.reference.families import reference_backward, reference_forward
from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs
from tests.reference.preprocess import Family
from tests.torch_ops.op_calls import call_op, grads_of, leaves, train_step

pytestmark = pytest.mark.gpu

# Relative-error bounds per io dtype. bf16: the bound the engine-level numerics test
# (tests/numerics/test_la_cutile_engines.py) holds the cuTile kernels to on the H200; the
# op adds no arithmetic. fp16 (eps 2^-11 vs 2^-8): a first estimate, half the bf16 bound;
# confirm on the H200 and record the measured errors (printed with -s).
BOUNDS = {
    torch.bfloat16: {"o": 1e-2, "final_state": 1e-2, "grad": 1e-2},
    torch.float16: {"o": 5e-3, "final_state": 5e-3, "grad": 5e-3},
}


def _gpu(family: Family, seq_lens: tuple[int, ...], **kw) -> InputConfig:
    # g and beta fp32, K = V = 128: what both cuTile engines serve forward and backward.
    base = dict(family=family, seq_lens=seq_lens, H=4, K=128, V=128, dtype=torch.bfloat16,
                device="cuda")
    base.update(kw)
    return InputConfig(**base)


CASES = {
    "gdn_T63_T65": _gpu(Family.GDN, (63, 65)),
    "gdn_gva_h0_l2norm": _gpu(Family.GDN, (100, 37), H=2, HV=4, with_initial_state=True,
                              use_qk_l2norm=True),
    "gdn_empty_T1_T64": _gpu(Family.GDN, (0, 1, 64), with_initial_state=True),
    "gdn_fp16_T200": _gpu(Family.GDN, (200,), dtype=torch.float16),
    "kda_T63_T65": _gpu(Family.KDA, (63, 65)),
    "kda_gva_h0": _gpu(Family.KDA, (100, 37), H=2, HV=4, with_initial_state=True),
    "kda_many_short": _gpu(Family.KDA, (1, 3, 5, 7, 16, 17, 31, 2)),
    "kda_fp16_T200": _gpu(Family.KDA, (200,), dtype=torch.float16),
}


@pytest.fixture
def fresh_caches():
    ops.clear_graph_caches()
    yield
    ops.clear_graph_caches()


@pytest.mark.parametrize("case", sorted(CASES))
def test_forward_matches_the_float64_reference(case):
    inputs = make_inputs(CASES[case], seed=1)
    o, final = call_op(inputs)
    ref_o, ref_final = reference_forward(inputs)
    bounds = BOUNDS[inputs.config.dtype]
    print(f"{case}: o {rel_err(o, ref_o):.2e}, final_state {rel_err(final, ref_final):.2e}")
    assert o.dtype == inputs.config.dtype and final.dtype == torch.float32
    assert_rel_close("o", o, ref_o, bounds["o"])
    assert_rel_close("final_state", final, ref_final, bounds["final_state"])


@pytest.mark.parametrize("case", sorted(CASES))
def test_gradients_match_the_float64_reference(case):
    config = CASES[case]
    inputs = leaves(make_inputs(config, seed=2))
    dO, d_final = make_grad_outputs(config, seed=3)
    o, final = call_op(inputs)
    torch.autograd.backward([o, final], [dO, d_final])
    expected = reference_backward(inputs, dO, d_final)
    errors = {name: rel_err(grad, getattr(expected, name))
              for name, grad in grads_of(inputs).items()}
    print(f"{case}: " + ", ".join(f"{n} {e:.2e}" for n, e in errors.items()))
    for name, grad in grads_of(inputs).items():
        assert_rel_close(name, grad, getattr(expected, name), BOUNDS[config.dtype]["grad"])


class _Layer(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, q, k, v, g, beta, cu, h0):
        return self.fn(q, k, v, g, beta, cu, initial_state=h0, output_final_state=True)


COMPILE_CASES = ("gdn_gva_h0_l2norm", "kda_gva_h0")  # called without in-kernel l2norm


@pytest.mark.parametrize("case", COMPILE_CASES)
def test_compile_fullgraph_matches_eager(case):
    config = CASES[case]
    fn = ops.gated_delta_net if config.family is Family.GDN else ops.kimi_delta_attention
    eager_in = leaves(make_inputs(config, seed=4))
    compiled_in = leaves(make_inputs(config, seed=4))
    layer = _Layer(fn)
    compiled = torch.compile(layer, fullgraph=True)
    expected = layer(*eager_in.args(), eager_in.initial_state)
    got = compiled(*compiled_in.args(), compiled_in.initial_state)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    dO, d_final = make_grad_outputs(config, seed=5)
    torch.autograd.backward(expected, [dO, d_final])
    torch.autograd.backward(got, [dO, d_final])
    for name, grad in grads_of(compiled_in).items():
        assert_rel_close(f"compiled {name}", grad, grads_of(eager_in)[name], 1e-3)


@pytest.mark.parametrize("case", ["gdn_gva_h0_l2norm", "kda_many_short", "gdn_empty_T1_T64"])
def test_training_keeps_forward_checkpoints_for_the_backward(case, fresh_caches):
    """bf16 training on FROST: the forward graph writes state checkpoints every 64 tokens,
    the backward graph reads them (torch_ops/README.md, "Training checkpoints"), and the
    gradients still match the reference; the caller gets (o, final_state). Where the
    chunked forward serves the call (not the recurrent one, ranked first for many short
    sequences) it writes the values too and the backward reads both (FROST v1.3)."""
    config = CASES[case]
    inputs = leaves(make_inputs(config, seed=21))
    dO, d_final = make_grad_outputs(config, seed=22)
    previous = ops.set_training_checkpoints(True)  # opt-in
    try:
        results = call_op(inputs)
    finally:
        ops.set_training_checkpoints(previous)
    assert len(results) == 2
    torch.autograd.backward(list(results), [dO, d_final])

    def cadences(cache):
        return {(e.graph.nodes[0].params.get("checkpoint_every_n_tokens") or 0, e.plan) for e in cache.values()}

    # by name: the list also holds the serving and summary caches, in registration order
    prefix = "cudnn::gated_delta_net" if config.family is Family.GDN else "cudnn::kimi_delta_attention"
    by_name = {c.name: c for c in ops.graph_caches()}
    caches = [by_name[f"{prefix}_fwd"], by_name[f"{prefix}_bwd"]]
    forward, backward = (cadences(c) for c in caches)
    print(f"{case}: forward graphs {sorted(forward)}, backward graphs {sorted(backward)}")
    assert any(every == 64 and "frost" in plan for every, plan in forward)
    assert any(every == 64 and "frost" in plan for every, plan in backward)
    reads_values = any("values" in e.graph.nodes[0].inputs for e in caches[1].values())
    # the call's engine is the plain forward's; a graph of another engine with values is the
    # first call's probe that was not taken (_op_factory._with_training_checkpoints)
    engine = lambda plan: plan.split("[")[0]  # noqa: E731
    plain = {engine(e.plan) for e in caches[0].values()
             if not e.graph.nodes[0].params.get("checkpoint_every_n_tokens")}
    chunked = any(engine(e.plan).endswith("_frost") and engine(e.plan) in plain
                  and e.graph.nodes[0].params.get("output_values") for e in caches[0].values())
    print(f"{case}: forward writes values {chunked}, backward reads them {reads_values}")
    assert reads_values == chunked
    if case == "gdn_gva_h0_l2norm":  # long sequences: the chunked forward, so the v1.3 path
        assert reads_values
    expected = reference_backward(inputs, dO, d_final)
    for name, grad in grads_of(inputs).items():
        assert_rel_close(name, grad, getattr(expected, name), BOUNDS[config.dtype]["grad"])


def test_cached_call_reuses_its_graph(fresh_caches):
    inputs = make_inputs(CASES["gdn_T63_T65"], seed=6)
    first, _ = call_op(inputs)
    second, _ = call_op(inputs)
    stats = ops.graph_cache_info()["cudnn::gated_delta_net_fwd"]
    assert (stats.builds, stats.hits, stats.size) == (1, 1, 1)
    torch.testing.assert_close(second, first, rtol=0, atol=0)
    entry = ops.graph_caches()[0].values()[0]
    print(f"plan used: {entry.plan}, workspace {entry.workspace_size} bytes")


def test_cached_calls_take_the_launch_lane_where_the_plan_offers_one(fresh_caches):
    """FROST's forward offers a DirectLaunch (TVM-FFI kernels): from the third call on, a
    cached call goes straight to the kernel; on a side stream, with fresh inputs each time
    (same layout), and a misaligned input falls back to the checked path."""
    config = CASES["gdn_T63_T65"]  # a case FROST serves
    call_op(make_inputs(config, seed=8))
    entry = ops.graph_caches()[0].values()[0]
    if not entry.plan.startswith("gdn_frost"):
        pytest.skip(f"the planned engine is {entry.plan}: only FROST offers a direct launch")
    call_op(make_inputs(config, seed=9))  # the bound executor asks the plan for a lane
    if entry.lane is None:
        pytest.skip("the FROST kernels here use CuTe DSL's own call convention (no TVM-FFI)")
    lane, launches = entry.lane, []
    inner = lane.launch
    lane.launch = lambda *args: (launches.append(1), inner(*args))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for seed in (10, 11):
            inputs = make_inputs(config, seed=seed)
            o, final = call_op(inputs)
            ref_o, ref_final = reference_forward(inputs)
            side.synchronize()
            assert_rel_close("lane o", o, ref_o, BOUNDS[torch.bfloat16]["o"])
            assert_rel_close("lane final_state", final, ref_final,
                             BOUNDS[torch.bfloat16]["final_state"])
    assert len(launches) == 2
    # g 4 bytes past a 16-byte boundary (FROST takes fp32 gates at 4-byte alignment): the
    # lane was made for 16-byte aligned g, so the checked path runs this call
    inputs = make_inputs(config, seed=12)
    storage = torch.empty(inputs.g.numel() + 1, dtype=inputs.g.dtype, device="cuda")
    shifted = storage[1:].view(inputs.g.shape)
    shifted.copy_(inputs.g)
    o, _ = call_op(dataclasses.replace(inputs, g=shifted))
    assert len(launches) == 2
    assert_rel_close("shifted g o", o, reference_forward(inputs)[0],
                     BOUNDS[torch.bfloat16]["o"])


def test_the_ops_run_on_the_current_stream():
    handle = TorchDeviceHandle(torch.device("cuda", torch.cuda.current_device()))
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        assert handle.get_stream() == side
        inputs = make_inputs(CASES["kda_T63_T65"], seed=7)
        o, _ = call_op(inputs)
    side.synchronize()
    assert_rel_close("o", o, reference_forward(inputs)[0], BOUNDS[torch.bfloat16]["o"])


class _GdnBlock(torch.nn.Module):
    def __init__(self, d_model: int, heads: int, head_dim: int) -> None:
        super().__init__()
        self.h, self.d = heads, head_dim
        self.norm = torch.nn.RMSNorm(d_model)
        self.qkv = torch.nn.Linear(d_model, 3 * heads * head_dim, bias=False)
        self.gates = torch.nn.Linear(d_model, 2 * heads)
        self.out = torch.nn.Linear(heads * head_dim, d_model, bias=False)

    def forward(self, x: torch.Tensor, cu: torch.Tensor) -> torch.Tensor:
        T = x.shape[0]
        y = self.norm(x)
        q, k, v = (t.reshape(T, self.h, self.d).contiguous()
                   for t in self.qkv(y).chunk(3, dim=-1))
        a, b = self.gates(y).float().chunk(2, dim=-1)
        o, _ = ops.gated_delta_net(q, k, v, F.logsigmoid(a).contiguous(),
                                   torch.sigmoid(b).contiguous(), cu,
                                   use_qk_l2norm_in_kernel=True)
        return x + self.out(o.reshape(T, self.h * self.d))


def _walk(successor: torch.Tensor, n: int) -> torch.Tensor:
    out = [int(torch.randint(len(successor), ()))]
    for _ in range(n - 1):
        out.append(int(successor[out[-1]]))
    return torch.tensor(out)


def test_two_layer_gdn_model_trains():
    torch.manual_seed(0)
    vocab, d_model = 64, 256
    embed = torch.nn.Embedding(vocab, d_model).cuda()
    blocks = torch.nn.ModuleList([_GdnBlock(d_model, 2, 128) for _ in range(2)]).cuda()
    head = torch.nn.Linear(d_model, vocab).cuda()
    params = [*embed.parameters(), *blocks.parameters(), *head.parameters()]
    optimizer = torch.optim.AdamW(params, lr=3e-3)
    # tokens follow a fixed random successor table from a random start: learnable within
    # 50 steps, so a loss that does not fall means broken gradients, not a hard task
    successor = torch.randperm(vocab)
    lens = (128, 200, 64, 120)
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32,
                      device="cuda")
    losses = []
    for _ in range(50):
        tokens = torch.cat([_walk(successor, n) for n in lens]).cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            x = embed(tokens)
            for block in blocks:
                x = block(x, cu)
            logits = head(x).float()
        targets = torch.cat([tokens[s + 1:e] for s, e in zip(cu[:-1].tolist(), cu[1:].tolist())])
        keep = torch.cat([torch.arange(s, e - 1) for s, e in zip(cu[:-1].tolist(), cu[1:].tolist())])
        loss = F.cross_entropy(logits[keep.cuda()], targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    print("losses:", " ".join(f"{v:.3f}" for v in losses[::5]), f"last {losses[-1]:.3f}")
    assert all(torch.isfinite(torch.tensor(losses)))
    assert blocks[0].qkv.weight.grad is not None and blocks[0].qkv.weight.grad.abs().sum() > 0
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < 0.5 * first, (first, last)


def _frost_reason() -> str | None:
    """Why the FROST engines cannot run here (no CuTe DSL, another SM), or None."""
    from cudnn.linear_attention.frost import runtime_probe
    return runtime_probe.runtime_reason("gdn2_frost", None)


def test_gdn2_forward_runs_on_frost_or_explains_why():
    """GDN-2's only engine is FROST: where it can run, the op matches the float64
    reference; where it cannot, the error names FROST's reason."""
    inputs = make_inputs(_gpu(Family.GDN2, (33, 31, 64, 1), H=2, HV=4,
                              with_initial_state=True, use_qk_l2norm=True), seed=8)
    reason = _frost_reason()
    if reason is not None:
        with pytest.raises(cudnn.cudnnGraphNotSupportedError) as info:
            call_op(inputs)
        message = str(info.value)
        print(message)
        assert message.startswith("cudnn::gated_delta_net_v2_fwd: no engine can run this call")
        assert "  - gdn2_frost (20300): " in message
        return
    o, final = call_op(inputs)
    ref_o, ref_final = reference_forward(inputs)
    print(f"gdn2 on FROST: o {rel_err(o, ref_o):.2e}, final_state {rel_err(final, ref_final):.2e}")
    assert_rel_close("o", o, ref_o, BOUNDS[torch.bfloat16]["o"])
    assert_rel_close("final_state", final, ref_final, BOUNDS[torch.bfloat16]["final_state"])
    cache = next(c for c in ops.graph_caches() if c.name == "cudnn::gated_delta_net_v2_fwd")
    plans = [entry.plan for entry in cache.values()]
    assert any("gdn2_frost" in plan for plan in plans), plans


def test_gdn2_trains_through_the_frost_backward():
    """GDN-2's autograd runs the FROST backward (the only gdn2_bwd engine): every gradient,
    dw included, against the float64 reference."""
    if _frost_reason() is not None:
        pytest.skip(f"the GDN-2 backward needs FROST here: {_frost_reason()}")
    config = _gpu(Family.GDN2, (33, 31))
    inputs = leaves(make_inputs(config, seed=10))
    dO, d_final = make_grad_outputs(config, seed=11)
    o, final = call_op(inputs)
    torch.autograd.backward([o, final], [dO, d_final])
    expected = reference_backward(inputs, dO, d_final)
    for name, grad in grads_of(inputs).items():
        print(f"gdn2 {name} {rel_err(grad, getattr(expected, name)):.2e}")
        assert_rel_close(name, grad, getattr(expected, name), BOUNDS[torch.bfloat16]["grad"])
    cache = next(c for c in ops.graph_caches() if c.name == "cudnn::gated_delta_net_v2_bwd")
    assert any("gdn2_frost" in entry.plan for entry in cache.values())


#: grouped heads (2 q/k heads for 4 v heads: the fp32 partials and their head-group sums)
#: with an initial state, GDN, KDA and GDN-2
LANE_CASES = {
    "gdn_gva_h0_l2norm": CASES["gdn_gva_h0_l2norm"],
    "kda_gva_h0": CASES["kda_gva_h0"],
    "gdn2_gva_h0": _gpu(Family.GDN2, (100, 37), H=2, HV=4, with_initial_state=True,
                        use_qk_l2norm=True),
}
_BACKWARD_CACHES = {Family.GDN: "cudnn::gated_delta_net_bwd",
                    Family.KDA: "cudnn::kimi_delta_attention_bwd",
                    Family.GDN2: "cudnn::gated_delta_net_v2_bwd"}


@pytest.mark.parametrize("training", [False, True], ids=["recompute", "checkpoints"])
@pytest.mark.parametrize("case", sorted(LANE_CASES))
def test_backward_launch_lane_is_bitwise_the_checked_path(case, training, monkeypatch,
                                                          fresh_caches):
    """The FROST backward plan's direct launch (CUDNN_FROST_BWD_LANE=1, bwd_plan.py): fwd+bwd
    three times with the lane off, then three times with it on (a fresh graph cache each
    way); with it on, the first backward runs the checked execute and the next two take
    the launch lane; every gradient is bitwise the lane-off path's and within the float64
    bound. `training`: the opt-in training checkpoints, so the backward reads the
    forward's checkpoints (and values) instead of recomputing them."""
    reason = _frost_reason()
    if reason is not None:
        pytest.skip(f"the backward lane is FROST's: {reason}")
    config = LANE_CASES[case]
    base = make_inputs(config, seed=31)
    dO, d_final = make_grad_outputs(config, seed=32)

    def fwd_bwd() -> dict[str, torch.Tensor]:
        inputs = leaves(base)
        train_step(inputs, dO, d_final, training)
        return grads_of(inputs)

    runs = {}
    for switch in ("0", "1"):
        monkeypatch.setenv("CUDNN_FROST_BWD_LANE", switch)
        ops.clear_graph_caches()
        grads = [fwd_bwd()]
        cache = next(c for c in ops.graph_caches() if c.name == _BACKWARD_CACHES[config.family])
        # the entry that ran (training also builds, without running, the backward graph
        # its checkpoint decision plans)
        (entry,) = [e for e in cache.values() if e.executor is not None]
        launches: list[int] = []
        if entry.lane is not None:
            inner = entry.lane.launch
            entry.lane.launch = lambda *args: (launches.append(1), inner(*args))
        grads += [fwd_bwd() for _ in range(2)]
        runs[switch] = grads, entry, launches
    (off, off_entry, _), (on, on_entry, launches) = runs["0"], runs["1"]
    print(f"{case} {'checkpoints' if training else 'recompute'}: plan {on_entry.plan}, "
          f"backward inputs {sorted(on_entry.graph.nodes[0].inputs)}")
    assert "frost" in on_entry.plan
    assert off_entry.lane is None and off_entry.checked_calls == 3
    assert on_entry.lane is not None and on_entry.checked_calls == 1 and len(launches) == 2
    if training:
        assert "state_checkpoints" in on_entry.graph.nodes[0].inputs
    for grads in (*off[1:], *on):
        for name, grad in grads.items():
            assert torch.equal(grad, off[0][name]), name
    expected = reference_backward(base, dO, d_final)
    for name, grad in on[-1].items():
        print(f"{case} lane {name} {rel_err(grad, getattr(expected, name)):.2e}")
        assert_rel_close(name, grad, getattr(expected, name), BOUNDS[torch.bfloat16]["grad"])


def test_cpu_tensors_are_refused_with_reasons():
    inputs = make_inputs(dataclasses.replace(CASES["gdn_T63_T65"], device="cpu"), seed=9)
    with pytest.raises(cudnn.cudnnGraphNotSupportedError) as info:
        call_op(inputs)
    message = str(info.value)
    print(message)
    assert "on cpu" in message.splitlines()[0]
    assert "  - gdn_cutile (20101): " in message


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q", "-s"]))
