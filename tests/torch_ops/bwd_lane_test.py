"""The FROST backward plan's direct launch (bwd_plan.py; on unless CUDNN_FROST_BWD_LANE=0)
planned and launched on a CPU with recording stage kernels (frost_bwd_on_cpu.py): a cached
backward op call takes the op's launch lane after its first, checked call, and the lane
launches the stages execute launches, in the same order, with the same buffers (the
call's own tensors by name, scratch by its offset in the call's workspace); for grouped
heads its dq / dk / dv are the sums of what the grads kernel wrote into the per-head
partial regions.
"""
from __future__ import annotations

import pytest
import torch

from cudnn.linear_attention.frost import bwd_plan
from cudnn.linear_attention.frost.kernels.bwd_config import checkpoint_rows
from tests.torch_ops.frost_bwd_on_cpu import (BwdRecorder, backward_call, backward_entry,
                                              frost_bwd_on_cpu, run_backward)

FAMILIES = ["gdn", "kda", "gdn2"]
PATHS = {  # backward_call's keywords and the stages of the path
    "h0+dht": (dict(initial=True, d_final=True), ["states", "chain", "grads"]),
    "plain": (dict(), ["states", "chain", "grads"]),
    "checkpoints": (dict(checkpoints=True), ["values", "chain", "grads"]),
    "checkpoints+values": (dict(checkpoints=True, values=True), ["chain", "grads"]),
    "grouped": (dict(qk_heads=1, initial=True), ["states", "chain", "grads"]),
}


def _calls(rec: BwdRecorder, family: str, keywords: dict, count: int = 3):
    """`count` calls of one layout with fresh tensors each (new addresses); per call the
    stage launches with every unknown address named by the call's results, and the results."""
    per_call = []
    for call in range(count):
        named = backward_call(family, seed=call, **keywords)
        rec.tensors = named
        before, partials_before = len(rec.launches), len(rec.partials)
        results = run_backward(family, named)
        # the results exist only once the call returns: name their addresses now
        by_address = {t.data_ptr(): ("tensor", name) for name, t in results.items() if t.numel()}
        launches = [(stage, tuple((n, r if r is None or r[0] != "unknown"
                                   else by_address.get(r[1], r)) for n, r in operands))
                    for stage, operands in rec.launches[before:]]
        per_call.append((launches, results, named, rec.partials[partials_before:]))
    return per_call


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("path", list(PATHS))
def test_cached_backward_takes_the_lane_and_launches_what_execute_does(family, path, monkeypatch):
    monkeypatch.setenv(bwd_plan.LANE_ENV, "1")
    keywords, stages = PATHS[path]
    rec = BwdRecorder()
    with frost_bwd_on_cpu(rec):
        calls = _calls(rec, family, keywords)
        entry = backward_entry(family)
    # the first call ran the checked execute and bound the lane once; the others took it
    assert entry.lane is not None and entry.checked_calls == 1
    assert rec.checked == 1 and rec.binds == 1
    first = calls[0][0]
    assert [stage for stage, _ in first] == stages
    for later, *_ in calls[1:]:
        assert later == first, (first, later)
    operands = {stage: dict(ops) for stage, ops in first}
    assert all(r is None or r[0] != "unknown" for ops in operands.values()
               for r in ops.values()), first
    grads = operands["grads"]
    assert grads["dg"] == ("tensor", "dg") and grads["dbeta"] == ("tensor", "dbeta")
    assert grads["dw"] == (("tensor", "dw") if family == "gdn2" else None)
    with_h0 = keywords.get("initial", False)
    assert grads["d_initial_state"] == (("tensor", "d_initial_state") if with_h0 else None)
    assert grads["d_final_state"] == (("tensor", "d_final_state")
                                      if keywords.get("d_final") else None)
    if keywords.get("checkpoints"):
        assert grads["ckpt"] == ("tensor", "state_checkpoints")
    else:
        assert grads["ckpt"][0] == "scratch"
    assert grads["u"] == (("tensor", "values") if keywords.get("values") else grads["u"])
    if not keywords.get("values"):
        assert grads["u"][0] == "scratch"
    grouped = "qk_heads" in keywords
    for name in ("dq", "dk"):
        assert grads[name][0] == ("scratch" if grouped else "tensor"), grads[name]
    assert grads["dv"] == ("tensor", "dv")


@pytest.mark.parametrize("family", FAMILIES)
def test_grouped_heads_the_lane_sums_the_partials(family, monkeypatch):
    """One q/k head for two v heads: the grads kernel writes fp32 per-output-head dq / dk
    partials (random here) and the call returns their sums over the head group, on the
    checked call and on the lane's."""
    monkeypatch.setenv(bwd_plan.LANE_ENV, "1")
    rec = BwdRecorder()
    with frost_bwd_on_cpu(rec):
        calls = _calls(rec, family, dict(qk_heads=1, initial=True))
        entry = backward_entry(family)
    assert entry.checked_calls == 1 and rec.binds == 1
    for launches, results, named, partials in calls:
        (written,) = partials
        assert set(written) == {"dq", "dk"}
        for name, part in written.items():
            out = results[name]
            T, H, K = out.shape
            expected = part.view(T, H, part.shape[1] // H, K).sum(2).to(out.dtype)
            assert torch.equal(out, expected), name
        assert results["dq"].abs().sum() > 0  # the random partials reached the result


def test_the_lane_with_state_checkpoints_through_the_training_graph(monkeypatch):
    """The backward graph the training forward's decision builds (checkpoints and values
    as graph inputs at the forward's result dims) takes the lane too."""
    monkeypatch.setenv(bwd_plan.LANE_ENV, "1")
    rec = BwdRecorder()
    with frost_bwd_on_cpu(rec):
        named = backward_call("gdn", checkpoints=True, values=True)
        T, N = named["q"].shape[0], named["cu_seqlens"].numel() - 1
        assert named["state_checkpoints"].shape[0] == checkpoint_rows(T, N)
        for _ in range(3):
            rec.tensors = named
            run_backward("gdn", named)
        entry = backward_entry("gdn")
    assert entry.lane is not None and entry.checked_calls == 1 and rec.checked == 1
    assert [stage for stage, _ in rec.launches] == ["chain", "grads"] * 3


@pytest.mark.parametrize("value", ["0", None], ids=["off", "unset"])
def test_the_switch_decides_the_lane(value, monkeypatch):
    """0: every call takes the checked execute; unset: the lane (the default since the H200
    run found its gradients bitwise execute's and its calls faster, bench/NOTES.md)."""
    if value is None:
        monkeypatch.delenv(bwd_plan.LANE_ENV, raising=False)
    else:
        monkeypatch.setenv(bwd_plan.LANE_ENV, value)
    rec = BwdRecorder()
    with frost_bwd_on_cpu(rec):
        _calls(rec, "kda", {})
        entry = backward_entry("kda")
    if value == "0":
        assert entry.lane is None and rec.binds == 0
        assert rec.checked == 3 and entry.checked_calls == 3
    else:
        assert entry.lane is not None and rec.binds == 1
        assert rec.checked == 1 and entry.checked_calls == 1


def test_a_bad_switch_value_is_named(monkeypatch):
    monkeypatch.setenv(bwd_plan.LANE_ENV, "on")
    with pytest.raises(ValueError, match=bwd_plan.LANE_ENV):
        bwd_plan.lane_enabled()
    monkeypatch.setenv(bwd_plan.LANE_ENV, "1")
    assert bwd_plan.lane_enabled() is True
    monkeypatch.setenv(bwd_plan.LANE_ENV, "0")
    assert bwd_plan.lane_enabled() is False
    monkeypatch.delenv(bwd_plan.LANE_ENV)
    assert bwd_plan.lane_enabled() is True  # the default since its H200 run


def test_strict_cu_seqlens_no_lane(monkeypatch):
    """Strict mode checks the table on the device on every call: execute does that."""
    monkeypatch.setenv(bwd_plan.LANE_ENV, "1")
    monkeypatch.setenv("CUDNN_STRICT_CU_SEQLENS", "1")
    rec = BwdRecorder()
    with frost_bwd_on_cpu(rec):
        _calls(rec, "gdn", {}, count=2)
        entry = backward_entry("gdn")
    assert entry.lane is None and rec.binds == 0 and rec.checked == 2



@pytest.mark.parametrize("invariant", [False, True])
def test_batch_invariant_reaches_the_backward(invariant, monkeypatch):
    """The op's batch_invariant reaches frost_bwd and bind_bwd (it keeps the recompute
    path's states stage off the long-sequence forward kernel, kernels/bwd.py), on the
    checked call and on the lane's bind alike."""
    monkeypatch.setenv(bwd_plan.LANE_ENV, "1")
    rec = BwdRecorder()
    with frost_bwd_on_cpu(rec):
        for call in range(2):
            named = backward_call("gdn", seed=call)
            named["batch_invariant"] = invariant
            rec.tensors = named
            run_backward("gdn", named)
    assert rec.checked == 1 and rec.binds == 1
    assert rec.invariant == [invariant, invariant]


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
