"""Training checkpoints on a CPU (the opt-in switch on): an eager forward that records
autograd asks for state checkpoints every 64 tokens when the engine serving it takes
them, keeps them for the backward, and the backward graph reads them (_op_factory.FamilyOps
._with_training_checkpoints); otherwise the old path, unchanged.

A test engine (the GDN reference engine that also serves checkpoints at cadence 64)
writes a marker into the state_checkpoints output and records what each graph asked for
and what the backward was handed; its gradients are the reference's, computed without
them, so the op plumbing is what is tested here (the kernels' use of the checkpoints is
tested in engines_frost and on the GPU).
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


def _check_all_but_checkpoints(engine, graph, facts) -> None:
    """The parent's checks on the facts with the cadence cleared (it declines any
    checkpoints; it reads the facts through its module's linear_attention_facts)."""
    import dataclasses

    import tests.torch_ops.reference_engine as ref

    plain = dataclasses.replace(facts, flags=dataclasses.replace(facts.flags, checkpoint_every_n_tokens=0))
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
