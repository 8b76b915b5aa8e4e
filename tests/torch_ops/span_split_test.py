"""The span-split forward (torch_ops/.../ops/_span_split.py) on a CPU: its span table and
state composition against plain Python, the public ops split through the test-only
reference engines against the float64 references (forward and autograd), and the calls
it must leave alone.

CUDNN_LA_SPAN_TOKENS forces the split on the CPU (its auto rule is for GPUs)."""
from __future__ import annotations

import random

import pytest
import torch

from cudnn.linear_attention.ops import _span_maps as sm
from cudnn.linear_attention.ops import _span_split as ss
from tests.reference.compare import assert_rel_close
from tests.reference.families import reference_backward, reference_forward
from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs
from tests.reference.preprocess import Family
from tests.torch_ops.op_calls import call_op, grads_of, leaves
from tests.torch_ops.serving_steps import Step, pool_config, run_steps
from tests.torch_ops.reference_summary_engine import (cp_reference_engines_installed,
                                                      loaded_engine)

F64 = torch.float64
BOUND = 1e-10  # float64 throughout: only the order of the sums differs from the reference


@pytest.fixture(scope="module", autouse=True)
def engines():
    with cp_reference_engines_installed():
        yield


@pytest.fixture
def span(monkeypatch):
    def force(n: int) -> None:
        monkeypatch.setenv(ss.ENV, str(n))
    return force


def _summary_calls(family: Family, kind: str | None = None) -> int:
    calls = loaded_engine(family.value, f"{family.value}_summary_reference").calls
    return len([c for c in calls if kind is None or c == kind])


@pytest.mark.parametrize("seed", range(6))
def test_span_table_tiles_each_sequence(seed):
    rng = random.Random(seed)
    lengths = [rng.choice([0, 1, 2, 5, 7, 8, 9, 16, 31]) for _ in range(rng.randint(1, 7))]
    span = rng.choice([1, 3, 4, 8])
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
    T, N = int(cu[-1]), len(lengths)
    spans = sm.span_count_bound(T, N, span)
    table = sm.span_table(cu, T, span, spans, steps=max(1, -(-T // span)))
    assert table.span_cu.dtype == torch.int32 and table.span_cu.shape == (spans + 1,)
    want = []
    for n, length in enumerate(lengths):
        pieces = max(1, -(-length // span))
        assert (int(table.first[n]), int(table.last[n])) == (len(want), len(want) + pieces - 1)
        want += [int(cu[n]) + j * span for j in range(pieces)]
    want += [T] * (spans + 1 - len(want))
    assert table.span_cu.tolist() == want


@pytest.mark.parametrize("table", [[0, 900, 2048, 1200], [0, 2100, 2048, 2048], [0, 0, 2048, 1200],
                                   [100, 600, 1200, 1800], [-50, 3000, 10, 5000], [700, 0, 0, 0]],
                         ids=["inverted", "past-T", "empty-first", "late-start", "wild", "drop"])
def test_span_table_of_a_malformed_table(table):
    """A table outside [0, T] or decreasing is read as its clamped running maximum: every
    span inside [0, T], each sequence's spans tiling its clamped range, no sequence with
    more spans than the walk's steps (T / span) or the table's rows (span_count_bound).
    Read raw, a sequence past T had spans the walk never reached, its entering state
    never written."""
    T, span = 2048, 256
    cu = torch.tensor(table, dtype=torch.int32)
    N = cu.numel() - 1
    spans, steps = sm.span_count_bound(T, N, span), -(-T // span)
    got = sm.span_table(cu, T, span, spans, steps)
    clamped, top = [], 0
    for c in table:
        top = max(top, min(max(c, 0), T))
        clamped.append(top)
    span_cu = got.span_cu.tolist()
    assert all(0 <= r <= T for r in span_cu) and span_cu == sorted(span_cu)
    for n in range(N):
        first, last = int(got.first[n]), int(got.last[n])
        assert 0 <= first <= last < spans and last - first < steps
        assert span_cu[first] == clamped[n] and span_cu[last + 1] == clamped[n + 1]


def _walk_case(seed, lengths, span):
    """A span table over `lengths` and random maps for its spans (float64)."""
    gen = torch.Generator().manual_seed(seed)
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()])
    T, N = int(cu[-1]), len(lengths)
    spans = sm.span_count_bound(T, N, span)
    table = sm.span_table(cu, T, span, spans, steps=-(-T // span))
    HO, V, K = 2, 3, 4
    shifts = torch.randn(spans, HO, V, K, dtype=F64, generator=gen)
    transition = torch.randn(spans, HO, K, K, dtype=F64, generator=gen) / 2
    start = torch.randn(N, HO, V, K, dtype=F64, generator=gen)
    return table, shifts, transition, start


def _sequence_spans(table):
    return [range(int(f), int(l) + 1) for f, l in zip(table.first, table.last)]


def test_entering_states_compose_the_maps():
    table, final0, transition, initial = _walk_case(3, [5, 2, 4, 0], span=2)
    for start in (initial, None):
        got = sm.entering_states(start, final0, transition, table, F64)
        for n, spans in enumerate(_sequence_spans(table)):
            x = start[n] if start is not None else torch.zeros_like(initial[n])
            for i in spans:
                assert_rel_close(f"span {i}", got[i], x, 1e-14)
                x = x @ transition[i] + final0[i]
        assert torch.count_nonzero(got[int(table.last[-1]) + 1:]) == 0  # the empty spans at T


def test_leaving_gradients_compose_the_transposed_maps():
    table, d_entering, transition, d_final = _walk_case(4, [3, 6, 1], span=2)
    for start in (d_final, None):
        got = sm.leaving_gradients(start, d_entering, transition, table, F64)
        for n, spans in enumerate(_sequence_spans(table)):
            g = start[n] if start is not None else torch.zeros_like(d_final[n])
            for i in reversed(spans):
                assert_rel_close(f"span {i}", got[i], g, 1e-14)
                g = g @ transition[i].transpose(-1, -2) + d_entering[i]


def test_auto_rule():
    assert ss.auto_span_tokens(32768, 1, 16, 132) == 4096
    for T, N, HO in [(32768, 1, 16), (65536, 2, 8), (200000, 1, 4), (32768, 3, 8)]:
        span = ss.auto_span_tokens(T, N, HO, 132)
        if span is None:
            continue
        assert span % ss.CHUNK == 0 and span >= ss.MIN_SPAN
        assert T // span >= ss.MIN_GAIN * N  # the split pays
        assert sm.span_count_bound(T, N, span) * HO <= 132 + N * HO  # about one wave
    assert ss.auto_span_tokens(8 * 4096, 8, 16, 132) is None  # pairs already fill the GPU
    assert ss.auto_span_tokens(16384, 1, 16, 132) is None     # too short to cut in MIN_GAIN
    assert ss.auto_span_tokens(32768, 1, 64, 132) is None     # heads fill the GPU


@pytest.mark.parametrize("T, N, forward, training", [
    (32768, 1, 4096, 4096), (16384, 1, None, 4096), (32768, 2, None, 4096),
    (32768, 4, None, None), (8192, 1, None, None), (65536, 2, None, 8192)])
def test_training_rule_splits_shorter_sequences(T, N, forward, training):
    """A training call whose backward splits needs half the spans per sequence (measured
    on the H200 at 16 heads: 1 and 2 x 16384 train faster split, forward-only at 2 x 16384
    does not, 4 x 8192 neither)."""
    assert ss.auto_span_tokens(T, N, 16, 132) == forward
    assert ss.auto_span_tokens(T, N, 16, 132, ss.MIN_GAIN_TRAINING) == training


@pytest.mark.parametrize("case, expected", [
    ("grad", True), ("no-grad", False), ("backward-unsplit", False), ("checkpoints", False)])
def test_which_calls_ask_the_training_rule(case, expected, monkeypatch):
    """The forward asks span_for with training=True exactly for an autograd call whose
    backward splits and recomputes (no training checkpoints asked)."""
    from cudnn.linear_attention.ops import _op_factory

    asked = []
    real = ss.SpanSplit.span_for

    def spy(self, args, training=False):
        asked.append(training)
        return real(self, args, training)

    monkeypatch.setattr(ss.SpanSplit, "span_for", spy)
    monkeypatch.setenv(ss.ENV, "0")  # no split: only which rule is asked matters here
    monkeypatch.setenv(ss.BACKWARD_ENV, "0" if case == "backward-unsplit" else "1")
    previous = _op_factory.set_training_checkpoints(case == "checkpoints")
    try:
        x = make_inputs(_config(Family.KDA), seed=39)
        if case == "no-grad":
            call_op(x)
        else:
            call_op(leaves(x))
    finally:
        _op_factory.set_training_checkpoints(previous)
    assert asked and asked[-1] is expected, asked


def _config(family, seq_lens=(13, 0, 1, 7, 20), **kw):
    base = dict(family=family, seq_lens=seq_lens, H=2, HV=4, K=4, V=3, dtype=F64,
                gate_dtype=F64, state_dtype=F64, param_dtype=F64, with_initial_state=True)
    base.update(kw)
    return InputConfig(**base)


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("tokens", [1, 4, 6, 64])
def test_split_forward_matches_the_reference(family, tokens, span):
    span(tokens)
    config = _config(family, use_qk_l2norm=True)
    x = make_inputs(config, seed=11 + tokens)
    before = _summary_calls(family)
    o, final = call_op(x)
    assert _summary_calls(family) == before + 1  # it did split
    ref_o, ref_final = reference_forward(x)
    assert_rel_close("o", o, ref_o, BOUND)
    assert_rel_close("final_state", final, ref_final, BOUND)


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
def test_split_without_initial_or_final_state(family, span):
    span(5)
    x = make_inputs(_config(family, with_initial_state=False), seed=21)
    o, final = call_op(x, output_final_state=False)
    assert final.numel() == 0
    assert_rel_close("o", o, reference_forward(x)[0], BOUND)


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
def test_split_forward_keeps_the_backward(family, span, monkeypatch):
    """CUDNN_LA_SPAN_BACKWARD=0: autograd saves the call's own arguments, the gradients are
    the unsplit backward's."""
    span(4)
    monkeypatch.setenv(ss.BACKWARD_ENV, "0")
    config = _config(family)
    x = leaves(make_inputs(config, seed=31))
    dO, dht = make_grad_outputs(config, seed=32)
    before, before_bwd = _summary_calls(family), _summary_calls(family, "summary_bwd")
    o, final = call_op(x)
    assert _summary_calls(family) == before + 1
    torch.autograd.backward((o, final), (dO, dht))
    assert _summary_calls(family, "summary_bwd") == before_bwd  # the backward did not split
    ref = reference_backward(make_inputs(config, seed=31), dO, dht)
    for name, grad in grads_of(x).items():
        if grad is not None:
            assert_rel_close(name, grad, getattr(ref, name), 1e-9)


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("with_h0, final, setting", [(True, True, "1"), (False, False, None)],
                         ids=["h0-dht", "plain-default"])
def test_split_backward_matches_the_reference(family, with_h0, final, setting, span, monkeypatch):
    """The backward of a split forward runs by spans too, by default and with
    CUDNN_LA_SPAN_BACKWARD=1 (the backward summary, the composed leaving-state gradients,
    one backward over all spans)."""
    span(4)
    if setting is None:
        monkeypatch.delenv(ss.BACKWARD_ENV, raising=False)
    else:
        monkeypatch.setenv(ss.BACKWARD_ENV, setting)
    config = _config(family, with_initial_state=with_h0)
    x = leaves(make_inputs(config, seed=33))
    dO, dht = make_grad_outputs(config, seed=34)
    before = _summary_calls(family, "summary_bwd")
    o, fin = call_op(x, output_final_state=final)
    torch.autograd.backward((o, fin) if final else (o,), (dO, dht) if final else (dO,))
    assert _summary_calls(family, "summary_bwd") == before + 1  # it did split
    ref = reference_backward(make_inputs(config, seed=33), dO, dht if final else None)
    for name, grad in grads_of(x).items():
        if grad is not None:
            assert_rel_close(name, grad, getattr(ref, name), 1e-9)


@pytest.mark.parametrize("forced, backward", [(4, "1"), (0, "1"), (4, "0")],
                         ids=["split", "unsplit", "split-fwd-only"])
def test_training_checkpoints_give_way_to_the_split(forced, backward, span, monkeypatch):
    """With training checkpoints switched on, an autograd call that splits, backward
    included, does not ask for them (the faster way to train it); one that does not
    split, or whose backward would not, still does."""
    from cudnn.linear_attention.ops import _op_factory

    span(forced)
    monkeypatch.setenv(ss.BACKWARD_ENV, backward)
    asked = []
    real = _op_factory.FamilyOps._with_training_checkpoints

    def spy(self, args):
        asked.append(True)
        return real(self, args)

    monkeypatch.setattr(_op_factory.FamilyOps, "_with_training_checkpoints", spy)
    previous = _op_factory.set_training_checkpoints(True)
    try:
        config = _config(Family.GDN)
        x = leaves(make_inputs(config, seed=37))
        dO, dht = make_grad_outputs(config, seed=38)
        before = _summary_calls(Family.GDN, "summary_bwd")
        torch.autograd.backward(call_op(x), (dO, dht))
    finally:
        _op_factory.set_training_checkpoints(previous)
    split = forced > 0 and backward == "1"
    assert asked == ([] if split else [True])
    assert _summary_calls(Family.GDN, "summary_bwd") == before + split
    ref = reference_backward(make_inputs(config, seed=37), dO, dht)
    for name, grad in grads_of(x).items():
        if grad is not None:
            assert_rel_close(name, grad, getattr(ref, name), 1e-9)


def test_backward_setting_is_checked(span, monkeypatch):
    span(4)
    monkeypatch.setenv(ss.BACKWARD_ENV, "yes")
    x = leaves(make_inputs(_config(Family.GDN), seed=35))
    with pytest.raises(ValueError, match=ss.BACKWARD_ENV):
        call_op(x)


def test_calls_it_leaves_alone(span):
    span(4)
    x = make_inputs(_config(Family.GDN), seed=41)
    before = _summary_calls(Family.GDN)
    call_op(x, batch_invariant=True)
    call_op(x, checkpoint_every_n_tokens=4)
    assert _summary_calls(Family.GDN) == before
    span(0)
    call_op(x)
    assert _summary_calls(Family.GDN) == before


def test_bad_setting_is_named(span):
    span(-3)
    x = make_inputs(_config(Family.GDN), seed=51)
    with pytest.raises(ValueError, match=ss.ENV):
        call_op(x)


def test_bad_input_gets_the_forwards_error(span):
    span(4)
    x = make_inputs(_config(Family.KDA), seed=61)
    with pytest.raises(ValueError, match="'v'"):
        call_op(x.__class__(**{**{f: getattr(x, f) for f in x.__dataclass_fields__}, "v": x.v[:5]}))


def test_table_follows_a_table_written_in_place(span):
    """The span table is kept for the next call with the same cu_seqlens tensor; writing
    into that tensor must rebuild it."""
    span(4)
    x = make_inputs(_config(Family.GDN, seq_lens=(9, 11)), seed=71)
    o, _ = call_op(x)
    assert_rel_close("o", o, reference_forward(x)[0], BOUND)
    x.cu_seqlens[1] = 15  # now (15, 5): same tensor, same T
    moved = make_inputs(_config(Family.GDN, seq_lens=(15, 5)), seed=71)
    assert torch.equal(moved.q, x.q) and torch.equal(moved.cu_seqlens, x.cu_seqlens)
    o2, final2 = call_op(x)
    ref_o, ref_final = reference_forward(moved)
    assert_rel_close("o after the in-place write", o2, ref_o, BOUND)
    assert_rel_close("final_state after the in-place write", final2, ref_final, BOUND)



@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("overwrite", [True, False], ids=["overwrite", "fresh"])
def test_split_serving_call(family, overwrite, span):
    """A serving call (state pool, slots, skipped slots) by spans: the pool (or the fresh
    final_state rows), o and the skipped sequences' zero rows as the float64 serving
    reference has them, over several calls."""
    span(3)
    cfg = pool_config(family, safe_gate=True, use_beta_sigmoid=True, use_qk_l2norm=True)
    pool = torch.randn(6, cfg.HO, cfg.V, cfg.K, generator=torch.Generator().manual_seed(1))
    # -1, 6 and 7 skip their sequence; the skipped slot 6 of the third call clamps onto
    # the served slot 5 of another sequence than the first served; the last skips all
    steps = [Step((7, 2, 9, 5), (0, 3, -1, 2)), Step((4, 6, 1, 8), (2, 6, 0, 5)),
             Step((4, 6, 5), (0, 5, 6)), Step((5, 5), (-1, 7))]
    before = _summary_calls(family)
    worst = run_steps(cfg, steps if overwrite else steps[:1], pool, overwrite=overwrite)
    assert _summary_calls(family) == before + (len(steps) if overwrite else 1)
    assert max(worst.values()) < 1e-5, worst


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
