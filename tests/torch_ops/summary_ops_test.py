"""The span-summary ops (cudnn.linear_attention.ops.summary) on a CPU, end to end through
the graph API with the test-only summary engines (reference_summary_engine.py), against
the float64 references; plus their checks, fake kernels and non-differentiability, and
GDN-2's autograd through the gdn2_bwd reference engine."""
from __future__ import annotations

import pytest
import torch

import cudnn
from cudnn.linear_attention import ops
from tests.reference.compare import assert_rel_close
from tests.reference.families import reference_backward
from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs
from tests.reference.preprocess import Family
from tests.reference.summary import summary_bwd_reference, summary_reference
from tests.torch_ops.op_calls import call_op, grads_of, leaves
from tests.torch_ops.reference_summary_engine import (cp_reference_engines_installed,
                                                      loaded_engine)

F64 = torch.float64
EXACT = 1e-13
FP32_BOUND = 1e-5
SUMMARY = {Family.GDN: ops.gated_delta_net_summary, Family.KDA: ops.kimi_delta_attention_summary,
           Family.GDN2: ops.gated_delta_net_v2_summary}
SUMMARY_BWD = {Family.GDN: ops.gated_delta_net_summary_bwd,
               Family.KDA: ops.kimi_delta_attention_summary_bwd,
               Family.GDN2: ops.gated_delta_net_v2_summary_bwd}


@pytest.fixture(scope="module", autouse=True)
def engines():
    with cp_reference_engines_installed():
        yield


def _config(family, dtype=F64, **kw):
    base = dict(family=family, seq_lens=(5, 0, 3), H=2, HV=4, K=4, V=3, dtype=dtype,
                gate_dtype=dtype, state_dtype=torch.float32 if dtype != F64 else F64,
                param_dtype=dtype, with_initial_state=True)
    base.update(kw)
    return InputConfig(**base)


def _flags(config):
    kw = dict(use_qk_l2norm_in_kernel=config.use_qk_l2norm,
              use_beta_sigmoid_in_kernel=config.use_beta_sigmoid,
              allow_neg_eigval=config.allow_neg_eigval, safe_gate=config.safe_gate,
              gate_domain=config.gate_domain)
    if config.family is not Family.GDN:
        kw["gate_lower_bound"] = config.gate_lower_bound
    return kw


def _gates(x):
    return (x.g, x.beta) if x.w is None else (x.g, x.beta, x.w)


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("options", [{}, dict(use_qk_l2norm=True, safe_gate=True,
                                              use_beta_sigmoid=True)], ids=["plain", "flags"])
def test_summary_matches_the_reference(family, options):
    config = _config(family, **options)
    x = make_inputs(config, seed=1)
    final, transition = SUMMARY[family](x.k, x.v, *_gates(x), x.cu_seqlens,
                                        initial_state=x.initial_state, a_log=x.a_log,
                                        dt_bias=x.dt_bias, **_flags(config))
    ref_final, ref_transition = summary_reference(
        family, x.k, x.v, x.g, x.beta, x.cu_seqlens, w=x.w, initial_state=x.initial_state,
        opts=config.options(), a_log=x.a_log, dt_bias=x.dt_bias)
    assert final.dtype == F64 and transition.shape == (3, 4, 4, 4)
    assert_rel_close("final_state", final, ref_final, EXACT)
    assert_rel_close("transition", transition, ref_transition, EXACT)
    assert loaded_engine(family.value, f"{family.value}_summary_reference").calls[-1] == "summary"


@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
@pytest.mark.parametrize("with_dht", [False, True], ids=["no_dht", "dht"])
def test_summary_bwd_matches_the_reference(family, with_dht):
    config = _config(family, scale=0.4)
    x = make_inputs(config, seed=2)
    dO, dht = make_grad_outputs(config, seed=3)
    dht = dht if with_dht else None
    d_init, transition = SUMMARY_BWD[family](x.q, x.k, x.g, x.beta, dO, x.cu_seqlens,
                                             scale=0.4, d_final_state=dht,
                                             output_transition=True, **_flags(config))
    ref, ref_transition = summary_bwd_reference(family, x.q, x.k, x.g, x.beta, x.cu_seqlens,
                                                dO, d_final_state=dht, opts=config.options())
    assert_rel_close("d_initial_state", d_init, ref, EXACT)
    assert_rel_close("transition", transition, ref_transition, EXACT)
    # the full backward's d_initial_state is the same gradient
    full = reference_backward(x, dO, dht)
    assert_rel_close("d_initial_state vs backward", d_init, full.d_initial_state, 1e-12)
    alone = SUMMARY_BWD[family](x.q, x.k, x.g, x.beta, dO, x.cu_seqlens, scale=0.4,
                                d_final_state=dht, **_flags(config))
    assert torch.equal(alone, d_init)


def test_float32_inputs_give_float32_states():
    config = _config(Family.KDA, dtype=torch.float32)
    x = make_inputs(config, seed=4)
    final, transition = ops.kimi_delta_attention_summary(x.k, x.v, x.g, x.beta, x.cu_seqlens,
                                                         initial_state=x.initial_state)
    assert final.dtype == transition.dtype == torch.float32
    ref, _ = summary_reference(Family.KDA, x.k, x.v, x.g, x.beta, x.cu_seqlens,
                               initial_state=x.initial_state)
    assert_rel_close("final_state", final, ref, FP32_BOUND)


def test_errors_name_the_argument():
    x = make_inputs(_config(Family.GDN), seed=5)
    with pytest.raises(TypeError, match="'initial_state'.*float64"):
        ops.gated_delta_net_summary(x.k, x.v, x.g, x.beta, x.cu_seqlens,
                                    initial_state=x.initial_state.float())
    with pytest.raises(ValueError, match="'v'.*T = 8"):
        ops.gated_delta_net_summary(x.k, x.v[:5], x.g, x.beta, x.cu_seqlens)
    with pytest.raises(ValueError, match="'a_log'.*safe_gate"):
        ops.gated_delta_net_summary(x.k, x.v, x.g, x.beta, x.cu_seqlens,
                                    a_log=torch.zeros(4, dtype=F64))
    with pytest.raises(ValueError, match="'dO'.*HO = 4"):
        ops.gated_delta_net_summary_bwd(x.q, x.k, x.g, x.beta, x.v.new_zeros(8, 2, 3),
                                        x.cu_seqlens)


def test_outputs_are_not_differentiable():
    x = leaves(make_inputs(_config(Family.GDN), seed=6))
    final, transition = ops.gated_delta_net_summary(x.k, x.v, x.g, x.beta, x.cu_seqlens)
    assert not final.requires_grad and not transition.requires_grad


def test_fake_kernels_and_schema():
    x = make_inputs(_config(Family.GDN2), seed=7)
    args = (x.k, x.v, x.g, x.beta, x.w, x.cu_seqlens)
    torch.library.opcheck(torch.ops.cudnn.gated_delta_net_v2_summary.default, args,
                          dict(output_transition=True),
                          test_utils=("test_schema", "test_faketensor"))
    meta = [t.to("meta") for t in args]
    final, transition = ops.gated_delta_net_v2_summary(*meta)
    assert final.shape == (3, 4, 3, 4) and transition.shape == (3, 4, 4, 4)


def test_cached_graph_is_reused():
    ops.clear_graph_caches()
    x = make_inputs(_config(Family.GDN), seed=8)
    for _ in range(2):
        ops.gated_delta_net_summary(x.k, x.v, x.g, x.beta, x.cu_seqlens)
    info = ops.graph_cache_info()["cudnn::gated_delta_net_summary"]
    assert (info.builds, info.hits) == (1, 1)


def test_no_engine_error_lists_the_engines():
    x = make_inputs(_config(Family.GDN2), seed=9)
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="gdn2_summary_reference.*beta_guard"):
        ops.gated_delta_net_v2_summary(x.k, x.v, x.g, x.beta, x.w, x.cu_seqlens, beta_guard=True)


def test_gdn2_autograd_through_the_backward_reference_engine():
    config = _config(Family.GDN2, dtype=torch.float32, H=2, HV=2)
    inputs = leaves(make_inputs(config, seed=10))
    dO, d_final = make_grad_outputs(config, seed=11)
    o, final = call_op(inputs)
    torch.autograd.backward((o, final), (dO, d_final))
    want = reference_backward(inputs, dO, d_final)
    for name, grad in grads_of(inputs).items():
        assert_rel_close(name, grad, getattr(want, name), FP32_BOUND)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
