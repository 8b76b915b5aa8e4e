"""Training checkpoints on a CPU (the opt-in switch on): an eager forward that records
autograd asks for state checkpoints every 64 tokens when the engine serving it takes
them, keeps them for the backward, and the backward graph reads them (_op_factory.FamilyOps
._with_training_checkpoints); otherwise the old path, unchanged. Under torch.compile the
switch asks for nothing (the dispatcher path), while checkpoints a traced call asks for
itself are saved by the registered autograd and read by the backward.

A test engine (the GDN reference engine that also serves checkpoints at cadence 64)
writes a marker into the state_checkpoints output and records what each graph asked for
and what the backward was handed; its gradients are the reference's, computed without
them, so the op plumbing is what is tested here (the kernels' use of the checkpoints is
tested in engines_frost and on the GPU). A second test engine also serves the forward's
`values` output and the backward's `values` input (FROST v1.3): then the training forward
asks for both and the backward is handed both; an engine that serves checkpoints only
keeps the checkpoint path.
"""
from __future__ import annotations

import pytest
import torch

from cudnn.linear_attention import ops
from cudnn.linear_attention.common.facts import linear_attention_facts
from cudnn.engines.base import resolve_node_buffers
from cudnn.ops.linear_attention_family import Kind
from tests.reference.compare import assert_rel_close
from tests.reference.families import reference_backward
from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs
from tests.reference.preprocess import Family
from tests.torch_ops.op_calls import call_op, grads_of, leaves
from tests.torch_ops.reference_engine import (GdnReferenceEngine, reference_engine,
                                              reference_engines_installed)

MARKER = 1.5
CONFIG = InputConfig(family=Family.GDN, seq_lens=(70, 0, 9, 64), H=2, HV=4, K=8, V=4,
                     with_initial_state=True)


class CheckpointingGdn(GdnReferenceEngine):
    """GDN reference engine that serves checkpoint_every_n_tokens in (0, 64), backward
    nodes included (the parent serves forward checkpoints only)."""

    def __init__(self) -> None:
        super().__init__()
        #: (kind, cadence, state_checkpoints: None / "marked" / "other") per execute.
        self.seen: list[tuple[str, int, str | None]] = []

    def check_support(self, graph) -> None:
        facts = linear_attention_facts(graph)
        every = facts.flags.checkpoint_every_n_tokens
        if every not in (0, 64):
            raise NotImplementedError(f"{self.name}: checkpoints every {every} tokens")
        _check_all_but_checkpoints(self, graph, facts)

    def execute(self, graph, data, ctx) -> None:
        facts = linear_attention_facts(graph)
        buffers = resolve_node_buffers(graph, data)[graph.nodes[0]]
        every = facts.flags.checkpoint_every_n_tokens
        if facts.kind is Kind.BWD:
            ckpt = buffers.inputs.get("state_checkpoints")
            state = None if ckpt is None else ("marked" if bool((ckpt == MARKER).all()) else "other")
            self.seen.append(("bwd", every, state))
        super().execute(graph, data, ctx)
        if facts.kind is Kind.FWD:
            ckpt = buffers.outputs.get("state_checkpoints")
            if ckpt is not None:  # after the parent's (real) checkpoints: a marker to find
                ckpt.fill_(MARKER)
            self.seen.append(("fwd", every, None if ckpt is None else "marked"))


VALUES_MARKER = -2.5


class ValuesGdn(CheckpointingGdn):
    """CheckpointingGdn that also serves the forward's values (writing a marker into them)
    and a backward reading them; records (kind, cadence, checkpoints, values) per execute."""

    def check_support(self, graph) -> None:
        facts = linear_attention_facts(graph)
        if facts.flags.checkpoint_every_n_tokens not in (0, 64):
            raise NotImplementedError(f"{self.name}: checkpoints every "
                                      f"{facts.flags.checkpoint_every_n_tokens} tokens")
        _check_all_but_checkpoints(self, graph, facts, values=True)

    def execute(self, graph, data, ctx) -> None:
        facts = linear_attention_facts(graph)
        buffers = resolve_node_buffers(graph, data)[graph.nodes[0]]
        if facts.kind is Kind.BWD:
            u = buffers.inputs.get("values")
            self.values_seen.append(("bwd", None if u is None else
                                     ("marked" if bool((u == VALUES_MARKER).all()) else "other")))
        super().execute(graph, data, ctx)
        if facts.kind is Kind.FWD:
            u = buffers.outputs.get("values")
            if u is not None:
                u.fill_(VALUES_MARKER)
            self.values_seen.append(("fwd", None if u is None else "marked"))


def _check_all_but_checkpoints(engine, graph, facts, values: bool = False) -> None:
    """The parent's checks on the facts with the cadence cleared (it declines any
    checkpoints; it reads the facts through its module's linear_attention_facts), and with
    `values` the forward's values (output and input) cleared too."""
    import dataclasses

    import tests.torch_ops.reference_engine as ref

    flags = dataclasses.replace(facts.flags, checkpoint_every_n_tokens=0)
    if values:
        flags = dataclasses.replace(flags, output_values=False)
        facts = dataclasses.replace(facts, inputs=facts.inputs - {"values"})
    plain = dataclasses.replace(facts, flags=flags)
    original = ref.linear_attention_facts
    try:
        ref.linear_attention_facts = lambda g: plain
        GdnReferenceEngine.check_support(engine, graph)
    finally:
        ref.linear_attention_facts = original


@pytest.fixture(autouse=True)
def switched_on():
    """The behaviour is opt-in (ops.set_training_checkpoints): on for these tests."""
    previous = ops.set_training_checkpoints(True)
    yield
    ops.set_training_checkpoints(previous)


def test_off_by_default():
    """A fresh process starts with the switch off (the measured default)."""
    import os
    import subprocess
    import sys
    code = ("from cudnn.linear_attention import ops; "
            "assert ops.set_training_checkpoints(False) is False")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


@pytest.fixture
def checkpointing():
    with reference_engines_installed({"gdn": CheckpointingGdn}):
        engine = reference_engine("gdn")
        engine.seen.clear()
        yield engine


@pytest.fixture
def with_values():
    with reference_engines_installed({"gdn": ValuesGdn}):
        engine = reference_engine("gdn")
        engine.seen.clear()
        engine.values_seen = []
        yield engine


@pytest.fixture
def declining():  # checkpoints in the forward, none in the backward
    with reference_engines_installed():
        yield reference_engine("gdn")


def test_training_forward_writes_checkpoints_and_the_backward_reads_them(checkpointing):
    inputs = leaves(make_inputs(CONFIG, seed=1))
    dO, d_final = make_grad_outputs(CONFIG, seed=2)
    results = call_op(inputs)
    assert len(results) == 2  # the caller did not ask for them: (o, final_state) only
    torch.autograd.backward(list(results), [dO, d_final])
    assert checkpointing.seen == [("fwd", 64, "marked"), ("bwd", 64, "marked")]
    expected = reference_backward(inputs, dO, d_final)
    for name, grad in grads_of(inputs).items():
        assert_rel_close(name, grad, getattr(expected, name), 1e-5)


def test_an_engine_without_values_keeps_the_checkpoint_path(checkpointing):
    """The trial with values is declined (the reference does not model them): the forward
    asks for checkpoints only and the backward is handed no values."""
    calls = []
    original = checkpointing.execute

    def execute(graph, data, ctx):
        facts = linear_attention_facts(graph)
        calls.append((facts.kind, facts.flags.output_values, facts.has_input("values")))
        original(graph, data, ctx)

    checkpointing.execute = execute
    o, _ = call_op(leaves(make_inputs(CONFIG, seed=7)))
    o.sum().backward()
    assert calls == [(Kind.FWD, False, False), (Kind.BWD, False, False)]


def test_training_forward_writes_values_and_the_backward_reads_them(with_values):
    """An engine that serves values: the training forward asks for checkpoints and values,
    the caller still gets (o, final_state), and the backward is handed both."""
    inputs = leaves(make_inputs(CONFIG, seed=5))
    dO, d_final = make_grad_outputs(CONFIG, seed=6)
    results = call_op(inputs)
    assert len(results) == 2
    torch.autograd.backward(list(results), [dO, d_final])
    assert with_values.seen == [("fwd", 64, "marked"), ("bwd", 64, "marked")]
    assert with_values.values_seen == [("fwd", "marked"), ("bwd", "marked")]
    expected = reference_backward(inputs, dO, d_final)
    for name, grad in grads_of(inputs).items():
        assert_rel_close(name, grad, getattr(expected, name), 1e-5)


def test_values_are_never_returned(with_values):
    """A caller asking for checkpoints gets (o, final_state, state_checkpoints): the values
    stay internal even when the engine writes them."""
    inputs = leaves(make_inputs(CONFIG, seed=8))
    results = call_op(inputs, checkpoint_every_n_tokens=64)
    assert len(results) == 3 and results[2].shape[-1] == CONFIG.K


def test_the_decision_is_made_once_per_configuration(checkpointing):
    for seed in (3, 4):
        o, _ = call_op(leaves(make_inputs(CONFIG, seed=seed)))
        o.sum().backward()
    assert [s for s in checkpointing.seen if s[0] == "fwd"] == [("fwd", 64, "marked")] * 2
    info = ops.graph_cache_info()["cudnn::gated_delta_net_fwd"]
    assert info.builds == 2  # the plain forward (for the decision) and the checkpointed one


def test_no_autograd_no_checkpoints(checkpointing):
    with torch.no_grad():
        call_op(leaves(make_inputs(CONFIG, seed=5)))
    call_op(make_inputs(CONFIG, seed=6))  # nothing requires grad
    assert checkpointing.seen == [("fwd", 0, None), ("fwd", 0, None)]


def test_checkpoints_the_caller_asks_for_are_returned_and_reused(checkpointing):
    inputs = leaves(make_inputs(CONFIG, seed=7))
    o, _, ckpt = call_op(inputs, checkpoint_every_n_tokens=64)
    assert ckpt.shape == (sum(CONFIG.seq_lens) // 64 + 4, 4, 4, 8) and bool((ckpt == MARKER).all())
    o.sum().backward()
    assert checkpointing.seen == [("fwd", 64, "marked"), ("bwd", 64, "marked")]


def test_the_switch_turns_it_off(checkpointing):
    assert ops.set_training_checkpoints(False) is True
    try:
        o, _ = call_op(leaves(make_inputs(CONFIG, seed=10)))
        o.sum().backward()
    finally:
        ops.set_training_checkpoints(True)
    assert checkpointing.seen == [("fwd", 0, None), ("bwd", 0, None)]
    with pytest.raises(TypeError, match="expected a bool, got int"):
        ops.set_training_checkpoints(1)


def test_a_backward_without_checkpoints_keeps_the_recompute_path(declining):
    """The shipped reference engine writes checkpoints in its forward but its backward
    does not read them: the training call keeps the recompute path."""
    declining.calls.clear()
    inputs = leaves(make_inputs(CONFIG, seed=8))
    dO, d_final = make_grad_outputs(CONFIG, seed=9)
    results = call_op(inputs)
    torch.autograd.backward(list(results), [dO, d_final])
    assert [kind for kind, _, _ in declining.calls] == ["fwd", "bwd"]
    backward_graphs = ops.graph_caches()[1].values()
    assert [entry.graph.nodes[0].params.get("checkpoint_every_n_tokens") or 0
            for entry in backward_graphs] == [0]
    expected = reference_backward(inputs, dO, d_final)
    for name, grad in grads_of(inputs).items():
        assert_rel_close(name, grad, getattr(expected, name), 1e-5)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))


def _compiled(fn):
    return torch.compile(fn, fullgraph=True, backend="aot_eager")


def test_under_compile_the_switch_asks_for_nothing(checkpointing):
    """A traced call takes the dispatcher path, whose autograd saves only what the call
    asked for: with the switch on and no checkpoints asked for, the forward writes none
    and the backward recomputes the states (torch_ops/README.md, "Training checkpoints")."""
    inputs = leaves(make_inputs(CONFIG, seed=11))
    o, _ = _compiled(lambda: call_op(inputs))()
    o.sum().backward()
    assert checkpointing.seen == [("fwd", 0, None), ("bwd", 0, None)]


def test_under_compile_checkpoints_the_caller_asks_for_are_reused(checkpointing):
    """A traced call that asks for checkpoints itself: the compiled forward writes them,
    the registered autograd saves them, and the backward reads them."""
    inputs = leaves(make_inputs(CONFIG, seed=12))
    dO, d_final = make_grad_outputs(CONFIG, seed=13)
    o, final, ckpt = _compiled(lambda: call_op(inputs, checkpoint_every_n_tokens=64))()
    assert bool((ckpt == MARKER).all())
    torch.autograd.backward([o, final], [dO, d_final])
    assert checkpointing.seen == [("fwd", 64, "marked"), ("bwd", 64, "marked")]
    expected = reference_backward(inputs, dO, d_final)
    for name, grad in grads_of(inputs).items():
        assert_rel_close(name, grad, getattr(expected, name), 1e-5)
