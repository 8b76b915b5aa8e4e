"""The span-split forward (ops/_span_split.py) on the GPU with the installed engines
(tag gpu; skipped without a GPU): GDN, KDA and GDN-2 split into spans (forced lengths,
chunk-aligned and not, and the automatic rule on one long sequence) against the float64
recurrent references, and the split's gradients (the unsplit backward's). Run on the GPU
machine from the repository root:
  python -m pytest -q -s tests/torch_ops/span_split_gpu_test.py
"""
from __future__ import annotations

import pytest
import torch

from cudnn.linear_attention.ops import _span_maps as sm
from cudnn.linear_attention.ops import _span_split as ss
from tests.reference.compare import assert_rel_close, rel_err
from tests.reference.families import reference_backward, reference_forward
from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs
from tests.reference.preprocess import Family
from tests.torch_ops.op_calls import call_op, grads_of, leaves
from tests.torch_ops.serving_steps import Step, run_steps

pytestmark = pytest.mark.gpu
BOUND = 1e-2  # bf16: the bound ops_gpu_test.py holds the unsplit op to


@pytest.fixture(autouse=True)
def gpu():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")


@pytest.fixture
def splits(monkeypatch):
    """Counts the calls that did split."""
    ran = []
    real = ss.SpanSplit.run

    def run(self, args, span, *rest):
        results = real(self, args, span, *rest)
        ran.append((span, results is not None))
        return results

    monkeypatch.setattr(ss.SpanSplit, "run", run)
    return ran


def _config(family, seq_lens, **kw):
    base = dict(family=family, seq_lens=seq_lens, H=4, K=128, V=128, dtype=torch.bfloat16,
                device="cuda", with_initial_state=True, use_qk_l2norm=True)
    base.update(kw)
    return InputConfig(**base)


def _check_forward(x, label: str) -> None:
    """The op's o and final_state on x against the float64 reference, within BOUND."""
    o, final = call_op(x)
    ref_o, ref_final = reference_forward(x)
    print(f"{label}: o {rel_err(o, ref_o):.2e}, final_state {rel_err(final, ref_final):.2e}")
    assert_rel_close("o", o, ref_o, BOUND)
    assert_rel_close("final_state", final, ref_final, BOUND)


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("tokens", [512, 333])
def test_forced_split_matches_the_reference(family, tokens, splits, monkeypatch):
    monkeypatch.setenv(ss.ENV, str(tokens))
    x = make_inputs(_config(family, (3000, 0, 1, 1100, 64)), seed=tokens)
    _check_forward(x, f"{family.value} span {tokens}")
    assert splits == [(tokens, True)], splits


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
def test_one_long_sequence_splits_on_its_own(family, splits, monkeypatch):
    monkeypatch.delenv(ss.ENV, raising=False)
    # the rule's own thresholds want >= 8 x 4096 tokens: a shorter span keeps the float64
    # reference quick, the rule (SM count, one wave, whole chunks) is the product's
    monkeypatch.setattr(ss, "MIN_SPAN", 1024)
    x = make_inputs(_config(family, (9000,), H=2, with_initial_state=False), seed=7)
    _check_forward(x, f"{family.value} auto span")
    assert len(splits) == 1 and splits[0][1], splits


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("backward, with_h0", [("0", True), ("1", True), ("1", False)],
                         ids=["unsplit-bwd", "split-bwd-h0", "split-bwd"])
def test_split_forward_gradients(family, backward, with_h0, splits, monkeypatch):
    """The gradients of a split forward: with CUDNN_LA_SPAN_BACKWARD=0 the unsplit
    backward's; by default (1) the backward splits as its forward did."""
    monkeypatch.setenv(ss.ENV, "256")
    monkeypatch.setenv(ss.BACKWARD_ENV, backward)
    config = _config(family, (700, 1, 300, 0), with_initial_state=with_h0)
    x = leaves(make_inputs(config, seed=3))
    dO, dht = make_grad_outputs(config, seed=4)
    o, final = call_op(x)
    assert splits == [(256, True)], splits
    torch.autograd.backward((o, final), (dO, dht))
    ref = reference_backward(x, dO, dht)
    for name, grad in grads_of(x).items():
        if grad is not None:
            print(f"{family.value} backward split={backward} {name}: {rel_err(grad, getattr(ref, name)):.2e}")
            assert_rel_close(name, grad, getattr(ref, name), BOUND)


def test_split_forward_in_a_cuda_graph(splits, monkeypatch):
    """A split call captured in a CUDA graph replays to the eager call's result, and an
    eager call after the capture (same cu_seqlens tensor) does not read a table that only
    the graph fills."""
    monkeypatch.setenv(ss.ENV, "512")
    x = make_inputs(_config(Family.GDN, (3000, 1, 1100)), seed=9)
    eager, eager_final = call_op(x)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm up on the capturing stream (cuBLAS workspace)
        call_op(x)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        o, final = call_op(x)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(o, eager) and torch.equal(final, eager_final)
    again, again_final = call_op(x)
    assert torch.equal(again, eager) and torch.equal(again_final, eager_final)
    assert len(splits) == 4 and all(ran for _, ran in splits), splits


# no two sequences share a row: rows written twice are a race in any forward (the
# numbers of such a table are meaningless, README "Bad input"), so nothing to compare
@pytest.mark.parametrize("table", [[0, 900, 2048, 1200], [0, 2100, 2048, 2048], [0, 0, 2048, 1200],
                                   [100, 600, 1200, 1800]],
                         ids=["inverted", "past-T", "empty-first", "late-start"])
def test_malformed_tables_cover_the_same_rows(table, splits, monkeypatch):
    """A table that breaks the contract (0 = cu[0] <= ... <= cu[N] = T) is memory-safe
    and zeroes the rows no sequence covers (README "Bad input"); the span table keeps
    each sequence's rows (its spans end where the next sequence starts), so the split
    and the unsplit forward agree, the uncovered rows zero in both."""
    x = make_inputs(_config(Family.KDA, (700, 700, 648)), seed=12)
    x.cu_seqlens.copy_(torch.tensor(table, dtype=x.cu_seqlens.dtype))
    monkeypatch.setenv(ss.ENV, "0")
    want = call_op(x)
    monkeypatch.setenv(ss.ENV, "256")
    got = call_op(x)
    assert splits == [(256, True)], splits
    for name, a, b in zip(("o", "final_state"), got, want):
        print(f"malformed {table} {name}: {rel_err(a, b):.2e}")
        assert_rel_close(name, a, b, BOUND)
    covered = torch.zeros(x.q.shape[0], dtype=torch.bool, device=x.q.device)
    for start, end in zip(table, table[1:]):
        covered[max(start, 0):max(min(end, x.q.shape[0]), 0)] = True
    assert torch.count_nonzero(got[0][~covered]) == 0


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("state", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_split_serving_calls(family, state, splits, monkeypatch):
    """Prefill through the serving op (a state pool, slots, skipped slots) by spans, over
    several calls, against the float64 serving reference."""
    monkeypatch.setenv(ss.ENV, "256")
    # inputs made on the CPU: run_steps moves them to the device, the reference keeps them
    cfg = _config(family, (1,), with_initial_state=False, device="cpu")
    steps = [Step((1500, 2, 900, 700), (0, -1, 5, 12)), Step((600, 800, 64), (5, 0, 11)),
             Step((1000, 300), (11, 5))]  # -1 and 12 (the pool size) skip their sequence
    gen = torch.Generator(device="cuda").manual_seed(2)
    pool = torch.randn(12, cfg.HO, cfg.V, cfg.K, device="cuda", generator=gen).to(state)
    worst = run_steps(cfg, steps, pool, device="cuda")
    print(f"{family.value} {state} split serving: {worst}")
    assert len(splits) == len(steps) and all(ran for _, ran in splits), splits
    assert max(worst.values()) < BOUND, worst


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
def test_summary_lane_matches_the_checked_summary(family, monkeypatch):
    """CUDNN_FROST_SUMMARY_LANE=1 (summary_engine.py): the split's cached forward summary
    calls take the op's launch lane (its bound launches and scratch fills), the split
    forward matches float64, and a lane call writes what the bound plan's execute
    (frost_summary, checked) writes, bitwise; the same for the split backward's summary
    (frost_summary_bwd's chain stage), after a split fwd+bwd matching float64."""
    from cudnn.linear_attention.frost import summary_engine
    from cudnn.linear_attention.ops import clear_graph_caches

    monkeypatch.setenv(summary_engine.LANE_ENV, "1")
    monkeypatch.setenv(ss.ENV, "512")
    clear_graph_caches()  # entries bound without the switch keep no lane
    captured = []
    real = ss.SpanSplit.run

    def run(self, args, span, *rest):
        captured.append((self, args))
        return real(self, args, span, *rest)

    monkeypatch.setattr(ss.SpanSplit, "run", run)
    backward = []
    real_backward = ss.SpanSplit.backward

    def spy_backward(self, call, named, run_backward):
        backward.append((self, call, named))
        return real_backward(self, call, named, run_backward)

    monkeypatch.setattr(ss.SpanSplit, "backward", spy_backward)
    x = make_inputs(_config(family, (3000, 0, 1, 1100, 64)), seed=5)
    try:
        _check_summary_lane(x, family, captured)
        _check_summary_bwd_lane(family, backward)
    finally:
        clear_graph_caches()  # no lane outlives the switch


def _check_summary_lane(x, family, captured) -> None:
    _check_forward(x, f"{family.value} split, summary lane on")
    split, args = captured[0]
    T, N = args[split._q].shape[0], args[split._cu].numel() - 1
    spans = sm.span_count_bound(T, N, 512)
    table = split._tables.get(args[split._cu], T, 512, spans, min(spans, -(-T // 512)))
    spanned = list(args)
    spanned[split._cu] = table.span_cu
    values = split._summary_values(split._summary_take(spanned))
    (entry,) = [e for e in split._summary.cache.values() if e.lane is not None]
    checked = entry.checked_calls
    by_lane = entry.run(values)
    assert entry.checked_calls == checked  # the lane ran it
    by_execute = entry._run(values)  # the bound plan's execute: frost_summary, checked
    for name, a, b in zip(("final_state", "transition"), by_lane, by_execute):
        assert torch.equal(a, b), name


def _check_summary_bwd_lane(family, backward) -> None:
    """The split backward's summary (chain stage) by its lane against execute, bitwise,
    after a split fwd+bwd whose gradients match float64."""
    config = _config(family, (700, 1, 300, 0))  # the gradient test's shape: 512-token spans
    x = leaves(make_inputs(config, seed=6))
    dO, dht = make_grad_outputs(config, seed=7)
    torch.autograd.backward(call_op(x), (dO, dht))
    ref = reference_backward(make_inputs(config, seed=6), dO, dht)
    for name, grad in grads_of(x).items():
        if grad is not None:
            assert_rel_close(name, grad, getattr(ref, name), BOUND)
    split, call, named = backward[-1]
    spanned = {**named, "cu_seqlens": call.table.span_cu}
    values = split._summary_bwd_values(split._summary_bwd_take(spanned))
    (entry,) = [e for e in split._summary_bwd.cache.values() if e.lane is not None]
    checked = entry.checked_calls
    by_lane = entry.run(values)
    assert entry.checked_calls == checked  # the lane ran it
    by_execute = entry._run(values)
    assert torch.equal(by_lane[0], by_execute[0]), "d_initial_state"


@pytest.mark.parametrize("family", ["gdn", "kda"])
def test_summary_op_with_the_switch_is_bitwise_the_default(family, monkeypatch):
    """FROST_SUMMARY_NO_OUTPUT=1 (kernels/summary.py): the summary op's plan, read at its
    build, runs the passes on write_output=False kernels: bitwise the default's results,
    through execute (first call) and the cached call's lane."""
    from cudnn.engines import manifest
    from cudnn.linear_attention import ops
    from cudnn.linear_attention.frost.kernels import summary
    from cudnn.linear_attention.ops.summary import GDN_SUMMARY, KDA_SUMMARY

    op = {"gdn": GDN_SUMMARY, "kda": KDA_SUMMARY}[family].summary
    gen = torch.Generator().manual_seed(3)
    T, HO, K, V = 3 * 4096 + 77, 16, 128, 128
    k = torch.randn(T, HO, K, generator=gen).to(torch.bfloat16).cuda()
    v = torch.randn(T, HO, V, generator=gen).to(torch.bfloat16).cuda()
    g = -(torch.rand(T, HO, K, generator=gen) if family == "kda" else torch.rand(T, HO, generator=gen)).cuda()
    beta = torch.rand(T, HO, generator=gen).cuda()
    cu = torch.tensor([0, 4096, 8192, 8192, T], dtype=torch.int32).cuda()
    results = {}
    for switch in ("0", "1"):
        monkeypatch.setenv(summary.NO_OUTPUT_ENV, switch)
        manifest.clear_engine_cache()
        ops.clear_graph_caches()
        runs = [op.op(k, v, g, beta, cu, initial_state=None, output_transition=True,
                      use_qk_l2norm_in_kernel=True) for _ in range(3)]  # checked, then the lane
        torch.cuda.synchronize()
        for final, trans in runs[1:]:
            assert torch.equal(final, runs[0][0]) and torch.equal(trans, runs[0][1])
        name = {"gdn": "gated_delta_net", "kda": "kimi_delta_attention"}[family]
        cache = next(c for c in ops.graph_caches() if c.name == f"cudnn::{name}_summary")
        assert cache.values()[-1].plan == f"{family}_summary_frost"  # the FROST engine ran it
        results[switch] = runs[0]
    manifest.clear_engine_cache()
    ops.clear_graph_caches()
    assert torch.equal(results["1"][0], results["0"][0])
    assert torch.equal(results["1"][1], results["0"][1])


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
