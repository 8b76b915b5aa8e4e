"""The whole op path on a CPU, with the reference engines installed (reference_engine.py):
checks, graph cache, planning, execute, autograd through the backward graph and
torch.compile, against the float64 recurrent references.

The engines compute in float64 and write float32 results, and the backward graph runs the
chunked algebra's explicit backward, so matching the recurrent reference checks both the
op plumbing and one reference against the other.
"""
from __future__ import annotations

import dataclasses
from contextlib import nullcontext
import threading

import pytest
import torch

import cudnn
from cudnn.linear_attention import ops
from tests.reference.compare import assert_rel_close
from tests.reference.families import reference_backward, reference_forward
from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs
from tests.reference.preprocess import Family
from tests.torch_ops.op_calls import call_op, grads_of, leaves
from tests.torch_ops.reference_engine import reference_engine, reference_engines_installed

# float64 results rounded to float32 differ by ~1e-7 relative; 100x margin.
FP32_BOUND = 1e-5

CASES = {
    "gdn_two_seqs": InputConfig(family=Family.GDN, seq_lens=(5, 7), H=2, K=8, V=4),
    "gdn_gva_h0_l2norm": InputConfig(family=Family.GDN, seq_lens=(9, 3), H=2, HV=4, K=8, V=4,
                                     with_initial_state=True, use_qk_l2norm=True),
    "gdn_gqa_safe_gate": InputConfig(family=Family.GDN, seq_lens=(6, 6), H=4, HK=2, HV=2, K=8,
                                     V=4, safe_gate=True, use_beta_sigmoid=True),
    "gdn_custom_scale": InputConfig(family=Family.GDN, seq_lens=(7, 4), H=2, K=8, V=4,
                                    scale=0.3),
    "gdn_empty_and_T1": InputConfig(family=Family.GDN, seq_lens=(0, 1, 6), H=2, K=8, V=4,
                                    with_initial_state=True),
    "kda_two_seqs": InputConfig(family=Family.KDA, seq_lens=(5, 7), H=2, K=8, V=4),
    "kda_gva_h0": InputConfig(family=Family.KDA, seq_lens=(10, 3), H=2, HV=4, K=8, V=4,
                              with_initial_state=True),
    "kda_safe_gate_bound": InputConfig(family=Family.KDA, seq_lens=(4, 8), H=2, K=8, V=4,
                                       safe_gate=True, gate_lower_bound=-3.0,
                                       use_beta_sigmoid=True, allow_neg_eigval=True),
    "gdn2_two_seqs": InputConfig(family=Family.GDN2, seq_lens=(5, 7), H=2, HV=4, K=8, V=4,
                                 with_initial_state=True),
}
DIFFERENTIABLE = [name for name, c in CASES.items() if c.family is not Family.GDN2]


@pytest.fixture(scope="module", autouse=True)
def engines():
    with reference_engines_installed():
        yield


@pytest.fixture
def fresh_caches():
    ops.clear_graph_caches()
    yield
    ops.set_graph_cache_size(ops.GraphCache("default").maxsize)
    ops.clear_graph_caches()


@pytest.mark.parametrize("case", sorted(CASES))
def test_forward_matches_the_float64_reference(case):
    inputs = make_inputs(CASES[case], seed=1)
    o, final = call_op(inputs)
    ref_o, ref_final = reference_forward(inputs)
    assert o.dtype == torch.float32 and final.dtype == torch.float32
    assert_rel_close("o", o, ref_o, FP32_BOUND)
    assert_rel_close("final_state", final, ref_final, FP32_BOUND)


@pytest.mark.parametrize("case", DIFFERENTIABLE)
def test_autograd_matches_the_float64_reference(case):
    config = CASES[case]
    inputs = leaves(make_inputs(config, seed=2))
    dO, d_final = make_grad_outputs(config, seed=3)
    o, final = call_op(inputs)
    torch.autograd.backward([o, final], [dO, d_final])
    expected = reference_backward(inputs, dO, d_final)
    for name, grad in grads_of(inputs).items():
        assert grad is not None, name
        assert_rel_close(name, grad, getattr(expected, name), FP32_BOUND)


@pytest.mark.parametrize("used", ["o_only", "final_only"])
def test_backward_with_one_output_unused(used):
    config = dataclasses.replace(CASES["gdn_gva_h0_l2norm"])
    inputs = leaves(make_inputs(config, seed=4))
    dO, d_final = make_grad_outputs(config, seed=5)
    if used == "o_only":  # final_state not requested: its placeholder gets no gradient
        o, _ = call_op(inputs, output_final_state=False)
        o.backward(dO)
        expected = reference_backward(inputs, dO, None)
    else:  # o unused: the op feeds zeros for dO
        _, final = call_op(inputs)
        final.backward(d_final)
        expected = reference_backward(inputs, torch.zeros_like(dO), d_final)
    for name, grad in grads_of(inputs).items():
        assert_rel_close(name, grad, getattr(expected, name), FP32_BOUND)


def test_gdn2_backward_raises_and_leaves_no_gradient():
    inputs = leaves(make_inputs(CASES["gdn2_two_seqs"], seed=6))
    o, final = call_op(inputs)
    with pytest.raises(cudnn.cudnnGraphNotSupportedError) as info:
        (o.sum() + final.sum()).backward()
    message = str(info.value)
    assert message.startswith("cudnn::gated_delta_net_v2_bwd: no engine can run this call")
    assert "  - gdn2_reference (20399): declined: NotImplementedError: gdn2_reference: " \
           "serves gdn2 ['fwd']" in message
    assert "  - gdn2_frost (20300): " in message
    assert all(grad is None for grad in grads_of(inputs).values())


class _TwoCalls(torch.nn.Module):
    """Two chained GDN calls (the second reads the first's final state)."""

    def forward(self, q, k, v, g, beta, cu):
        o, h = ops.gated_delta_net(q, k, v, g, beta, cu, output_final_state=True)
        o2, _ = ops.gated_delta_net(q, k, o, g, beta, cu, initial_state=h)
        return o2


def test_compile_fullgraph_matches_eager():
    config = CASES["gdn_two_seqs"]
    eager_in = leaves(make_inputs(config, seed=7))
    compiled_in = leaves(make_inputs(config, seed=7))
    module = _TwoCalls()
    compiled = torch.compile(module, fullgraph=True, backend="aot_eager")
    expected = module(*eager_in.args())
    got = compiled(*compiled_in.args())
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    weight = torch.randn(expected.shape, generator=torch.Generator().manual_seed(8))
    (expected * weight).sum().backward()
    (got * weight).sum().backward()
    for name in ("q", "k", "v", "g", "beta"):
        torch.testing.assert_close(getattr(compiled_in, name).grad,
                                   getattr(eager_in, name).grad, rtol=1e-6, atol=1e-7)


class _OpSpy:
    """Stands in for a family's registered forward op: counts the dispatcher calls."""

    def __init__(self, op):
        self.op, self.calls = op, 0

    def __call__(self, *args):
        self.calls += 1
        return self.op(*args)


@pytest.mark.parametrize("case", ["gdn_gva_h0_l2norm", "kda_gva_h0"])
def test_eager_calls_skip_the_dispatcher_and_agree_with_it(case, monkeypatch):
    """Eager calls run the kernels directly (no grad) or through the eager autograd
    Function (grad); under the autograd profiler they take the registered ops. Outputs
    and gradients agree exactly between the two routes."""
    family_ops = {Family.GDN: ops.FAMILY_OPS[0], Family.KDA: ops.FAMILY_OPS[1]}[CASES[case].family]
    forward_spy, backward_spy = _OpSpy(family_ops.forward_op), _OpSpy(family_ops.backward_op)
    monkeypatch.setattr(family_ops, "forward_op", forward_spy)
    monkeypatch.setattr(family_ops, "backward_op", backward_spy)
    inputs = make_inputs(CASES[case], seed=11)
    direct = call_op(inputs)  # no tensor requires grad: the kernel runs directly
    with torch.autograd.profiler.profile():  # the profiler must see the op: dispatcher
        through = call_op(inputs)
    assert (forward_spy.calls, backward_spy.calls) == (1, 0)
    for got, expected in zip(direct, through):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)

    config = CASES[case]
    dO, d_final = make_grad_outputs(config, seed=12)
    grads = {}
    for name in ("eager", "dispatcher"):
        primals = leaves(inputs)
        context = torch.autograd.profiler.profile() if name == "dispatcher" else nullcontext()
        with context:
            o, final = call_op(primals)
            torch.autograd.backward((o, final), (dO, d_final))
        grads[name] = grads_of(primals)
    assert (forward_spy.calls, backward_spy.calls) == (2, 1)  # only the profiled pass
    assert grads["eager"].keys() == grads["dispatcher"].keys()
    for field, value in grads["eager"].items():
        torch.testing.assert_close(value, grads["dispatcher"][field], rtol=0, atol=0, msg=field)


@pytest.mark.parametrize("recording", [("k",), ("initial_state", "beta"), ("q", "g", "v")])
def test_eager_autograd_with_some_primals_recording(recording):
    """Only the primals that require grad travel as autograd arguments of the eager
    Function: their gradients must land on them (and none elsewhere), equal to the
    dispatcher route's."""
    inputs = make_inputs(CASES["gdn_gva_h0_l2norm"], seed=int(torch.randint(1 << 30, ())))
    dO, d_final = make_grad_outputs(inputs.config, seed=13)
    grads = {}
    for name in ("eager", "dispatcher"):
        primals = dataclasses.replace(inputs, **{
            field: getattr(inputs, field).detach().clone().requires_grad_(True)
            for field in recording})
        context = torch.autograd.profiler.profile() if name == "dispatcher" else nullcontext()
        with context:
            o, final = call_op(primals)
            torch.autograd.backward((o, final), (dO, d_final))
        got = {field: getattr(primals, field).grad for field in recording}
        assert all(g is not None and g.abs().sum() > 0 for g in got.values()), name
        untouched = [f for f in ("q", "k", "v", "g", "beta", "initial_state")
                     if f not in recording and getattr(primals, f).grad is not None]
        assert not untouched, f"{name}: gradients on {untouched}"
        grads[name] = got
    for field in recording:
        torch.testing.assert_close(grads["eager"][field], grads["dispatcher"][field],
                                   rtol=0, atol=0, msg=field)


def test_opcheck_on_the_forward_op():
    inputs = make_inputs(CASES["kda_gva_h0"], seed=9)
    args = tuple(t.requires_grad_(t.is_floating_point()) for t in inputs.args())
    h0 = inputs.initial_state.requires_grad_(True)
    torch.library.opcheck(torch.ops.cudnn.kimi_delta_attention_fwd.default,
                          (*args, 0.3, h0, True))


def test_cached_calls_reuse_the_graph_and_new_shapes_build_one(fresh_caches):
    inputs = make_inputs(CASES["gdn_two_seqs"], seed=10)
    info = ops.graph_cache_info
    call_op(inputs)
    after_first = info()["cudnn::gated_delta_net_fwd"]
    call_op(inputs)
    after_second = info()["cudnn::gated_delta_net_fwd"]
    assert (after_first.builds, after_second.builds) == (1, 1)
    assert after_second.hits == after_first.hits + 1
    longer = make_inputs(dataclasses.replace(CASES["gdn_two_seqs"], seq_lens=(5, 8)), seed=10)
    call_op(longer)
    assert info()["cudnn::gated_delta_net_fwd"].builds == 2


def test_the_cache_bound_evicts(fresh_caches):
    ops.set_graph_cache_size(2)
    for n in range(4):
        call_op(make_inputs(dataclasses.replace(CASES["kda_two_seqs"], seq_lens=(3, 2 + n)),
                            seed=n))
    stats = ops.graph_cache_info()["cudnn::kimi_delta_attention_fwd"]
    assert (stats.size, stats.builds, stats.evictions) == (2, 4, 2)


def test_threads_share_one_graph(fresh_caches):
    inputs = make_inputs(CASES["kda_gva_h0"], seed=11)
    expected, _ = call_op(inputs)
    ops.clear_graph_caches()
    results, errors = [], []
    start = threading.Barrier(4)

    def worker():
        try:
            start.wait()
            for _ in range(3):
                results.append(call_op(inputs)[0])
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(results) == 12
    for o in results:
        torch.testing.assert_close(o, expected, rtol=0, atol=0)
    assert ops.graph_cache_info()["cudnn::kimi_delta_attention_fwd"].builds == 1


def test_the_engine_gets_a_workspace_and_the_backward_graph_runs(fresh_caches):
    engine = reference_engine("gdn")
    engine.calls.clear()
    inputs = leaves(make_inputs(CASES["gdn_two_seqs"], seed=12))
    o, _ = call_op(inputs, output_final_state=False)
    o.sum().backward()
    assert [kind for kind, _, _ in engine.calls] == ["fwd", "bwd"]
    assert all(dtype == torch.float32 and nbytes >= 256 for _, dtype, nbytes in engine.calls)


def test_the_graph_calls_the_default_scale_default(fresh_caches):
    default = make_inputs(CASES["gdn_two_seqs"], seed=14)
    custom = make_inputs(CASES["gdn_custom_scale"], seed=14)
    call_op(default)
    call_op(custom)
    forward_cache = ops.graph_caches()[0]
    scales = sorted((entry.graph.nodes[0].params.get("scale") or 0.0)
                    for entry in forward_cache.values())
    assert scales == [0.0, 0.3]  # None (the default, 1/sqrt(K)) and the caller's 0.3


def test_plan_name_pins_or_explains():
    inputs = make_inputs(CASES["gdn_two_seqs"], seed=13)
    o, _ = call_op(inputs, plan_name="gdn_reference")
    assert_rel_close("o", o, reference_forward(inputs)[0], FP32_BOUND)
    with pytest.raises(cudnn.cudnnGraphNotSupportedError,
                       match=r"plan_name 'gdn_cutile' matches none of the plans offered for "
                             r"this call: \['gdn_reference'\]"):
        call_op(inputs, plan_name="gdn_cutile")


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
