"""The launch lane of a cached op call (_launch_lane.py), on a CPU with the reference
engines offering a DirectLaunch: which calls take it, that they compute what the executor
path computes, and every case that must fall back."""
from __future__ import annotations

import contextlib
import dataclasses

import pytest
import torch

from cudnn.engines.base import DirectLaunch
from cudnn.linear_attention import ops
from cudnn.linear_attention.ops._launch_lane import make_lane
from tests.reference.compare import assert_rel_close
from tests.reference.families import reference_forward
from tests.reference.inputs import InputConfig, make_inputs
from tests.reference.preprocess import Family
from tests.torch_ops.op_calls import call_op, grads_of, leaves
from tests.torch_ops.reference_engine import reference_engine, reference_engines_installed

CONFIG = InputConfig(family=Family.GDN, seq_lens=(5, 3, 0, 1), H=2, HV=4, K=8, V=4,
                     with_initial_state=True)


@contextlib.contextmanager
def _engine(direct: bool):
    with reference_engines_installed():
        engine = reference_engine("gdn")
        engine.offers_direct_launch = direct
        yield engine


def _entry():
    (entry,) = [e for cache in ops.graph_caches() for e in cache.values()]
    return entry


def _seed() -> int:
    return int(torch.randint(0, 2**31 - 1, ()).item())


def test_cached_calls_take_the_lane_and_compute_what_the_executor_path_computes():
    inputs = make_inputs(CONFIG, seed=_seed())
    with _engine(direct=True) as engine:
        first = call_op(inputs)  # builds the graph, runs graph.execute, asks for a lane
        assert engine.direct_calls == 0 and _entry().lane is not None
        second = call_op(inputs)
        third, fourth = call_op(inputs), call_op(inputs)
        assert engine.direct_calls == 3
    for a, b, c, d in zip(first, second, third, fourth):
        assert torch.equal(a, c) and torch.equal(b, d)
    assert third[0].data_ptr() != fourth[0].data_ptr()  # fresh results per call
    ref_o, ref_final = reference_forward(inputs)
    assert_rel_close("o", third[0], ref_o, 1e-5)
    assert_rel_close("final_state", third[1], ref_final, 1e-5)


def test_a_plan_without_a_direct_launch_leaves_no_lane():
    inputs = make_inputs(CONFIG, seed=_seed())
    with _engine(direct=False) as engine:
        for _ in range(4):
            call_op(inputs)
        assert _entry().lane is None and engine.direct_calls == 0
        assert len(engine.calls) == 4


def test_an_input_at_another_address_alignment_falls_back_to_the_checked_path():
    inputs = make_inputs(CONFIG, seed=_seed())
    with _engine(direct=True) as engine:
        expected = call_op(inputs)
        # the same q (dims, strides, dtype: the same graph) 4 bytes past a 16-byte boundary
        storage = torch.empty(inputs.q.numel() + 1, dtype=inputs.q.dtype)
        shifted = storage[1:].view(inputs.q.shape)
        shifted.copy_(inputs.q)
        assert shifted.data_ptr() % 16 != inputs.q.data_ptr() % 16
        inputs = dataclasses.replace(inputs, q=shifted)
        before = len(engine.calls)
        got = call_op(inputs)
        assert engine.direct_calls == 0 and len(engine.calls) == before + 1
    for a, b in zip(expected, got):
        assert torch.equal(a, b)


def test_autograd_calls_run_their_forward_through_the_lane():
    inputs = make_inputs(CONFIG, seed=_seed())
    with _engine(direct=False):
        leaf = leaves(inputs)
        o, final = call_op(leaf)
        (o.square().sum() + final.sum()).backward()
        expected = grads_of(leaf)
    with _engine(direct=True) as engine:
        for _ in range(3):
            leaf = leaves(inputs)
            o, final = call_op(leaf)
        assert engine.direct_calls == 2
        (o.square().sum() + final.sum()).backward()
    for name, grad in grads_of(leaf).items():
        assert torch.equal(grad, expected[name]), name


def _direct(uids, alignment):
    return DirectLaunch(tuple(uids), tuple(alignment), lambda *_: None)


@pytest.mark.parametrize("direct, why", [
    (None, "no DirectLaunch offered"),
    (_direct((1, 2, 99), (0, 0, 0)), "a buffer the op does not bind"),
    (_direct((1, 2, 10), (0, 0, 8)), "a result address off the allocator's alignment"),
])
def test_make_lane_declines(direct, why):
    lane = make_lane(torch.device("cpu"), [((2,), torch.float32)], (), 0, direct,
                     input_uids=[(0, 1), (3, 2)], output_uids=[(0, 10)])
    assert lane is None, why


def test_make_lane_binds_inputs_and_results_by_position():
    seen = []
    direct = DirectLaunch((10, 2, 1), (0, 4, 0),
                          lambda buffers, workspace, stream: seen.append((buffers, workspace)))
    lane = make_lane(torch.device("cpu"), [((3,), torch.float32), ((0,), torch.float32),
                                           ((0, 4), torch.float16)], (1,), 16, direct,
                     input_uids=[(0, 1), (2, 2)], output_uids=[(0, 10)])
    a = torch.zeros(4)
    storage = torch.zeros(8)
    b = storage[1:5]  # 4 bytes past the boundary, as the lane was made for
    result, empty, other_empty = lane((a, None, b))
    ((buffers, workspace),) = seen
    assert buffers[0] is result and buffers[1] is b and buffers[2] is a
    assert result.shape == (3,) and workspace.numel() == 16
    assert empty.shape == (0,) and other_empty.shape == (0, 4)
    # a caller that drops unused results gets None for the droppable empty one only
    _, dropped, kept = lane((a, None, b), drop_unused=True)
    assert dropped is None and kept.shape == (0, 4) and kept.dtype == torch.float16
    assert lane((a, None, storage[:4])) is None  # position 2 at another alignment
    assert len(seen) == 2


def test_a_launch_that_takes_addresses_gets_each_buffers_address():
    seen = []
    direct = DirectLaunch((10, 1), (0, 0), lambda addresses, workspace, stream:
                          seen.append(addresses), takes_addresses=True)
    lane = make_lane(torch.device("cpu"), [((3,), torch.float32)], (), 0, direct,
                     input_uids=[(0, 1)], output_uids=[(0, 10)])
    a = torch.zeros(4)
    (result,) = lane((a,))
    assert seen == [[result.data_ptr(), a.data_ptr()]]


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
