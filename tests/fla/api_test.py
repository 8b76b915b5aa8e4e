"""The FLA drop-in's surface, on a CPU with the reference engines: FLA 0.6's signatures and
defaults, layouts (dense batches, packed sequences, state orientation), results (o in q's
dtype, float32 final state or None), the fused gate arguments, the recurrent forms'
extras (gk, no g, no beta), and FLA's errors for FLA's bad arguments.
"""
from __future__ import annotations

import inspect
import math
import warnings

import pytest
import torch
import torch.nn.functional as F

import cudnn.linear_attention.fla as cfla
from tests.reference.compare import assert_rel_close
from tests.reference.gdn2 import naive_recurrent_gdn2
from tests.torch_ops.reference_engine import reference_engines_installed

BOUND = 1e-5  # float64 references written to float32, ~1e-7 apart
_ = inspect.Parameter.empty

# FLA 0.6's public signatures (fla/ops/{gated_delta_rule,kda,gdn2}), as (name, default).
FLA_SIGNATURES = {
    "chunk_gated_delta_rule": [
        ("q", _), ("k", _), ("v", _), ("g", _), ("beta", _), ("scale", None),
        ("initial_state", None), ("output_final_state", False),
        ("use_qk_l2norm_in_kernel", False), ("use_beta_sigmoid_in_kernel", False),
        ("allow_neg_eigval", False), ("state_v_first", False), ("cu_seqlens", None),
        ("cu_seqlens_cpu", None), ("chunk_indices", None), ("cp_context", None), ("kwargs", _)],
    "fused_recurrent_gated_delta_rule": [
        ("q", _), ("k", _), ("v", _), ("g", None), ("gk", None), ("gv", None), ("beta", None),
        ("scale", None), ("initial_state", None), ("output_final_state", False),
        ("use_qk_l2norm_in_kernel", False), ("use_gate_in_kernel", False), ("A_log", None),
        ("dt_bias", None), ("use_beta_sigmoid_in_kernel", False), ("allow_neg_eigval", False),
        ("state_v_first", False), ("cu_seqlens", None), ("kwargs", _)],
    "chunk_kda": [
        ("q", _), ("k", _), ("v", _), ("g", _), ("beta", _), ("scale", None),
        ("initial_state", None), ("output_final_state", False),
        ("use_qk_l2norm_in_kernel", False), ("use_gate_in_kernel", False),
        ("use_beta_sigmoid_in_kernel", False), ("allow_neg_eigval", False),
        ("safe_gate", False), ("lower_bound", None), ("disable_recompute", False),
        ("return_intermediate_states", False), ("state_v_first", False), ("cu_seqlens", None),
        ("cu_seqlens_cpu", None), ("cp_context", None), ("use_graph", False),
        ("max_num_seqs", None), ("kwargs", _)],
    "fused_recurrent_kda": [
        ("q", _), ("k", _), ("v", _), ("g", _), ("beta", _), ("A_log", None), ("dt_bias", None),
        ("scale", None), ("initial_state", None), ("output_final_state", False),
        ("use_qk_l2norm_in_kernel", False), ("use_gate_in_kernel", False),
        ("use_beta_sigmoid_in_kernel", False), ("allow_neg_eigval", False),
        ("lower_bound", None), ("state_v_first", False), ("cu_seqlens", None), ("kwargs", _)],
    "chunk_gdn2": [
        ("q", _), ("k", _), ("v", _), ("g", _), ("b", _), ("w", _), ("scale", None),
        ("initial_state", None), ("output_final_state", False),
        ("use_qk_l2norm_in_kernel", False), ("use_gate_in_kernel", False), ("cu_seqlens", None),
        ("cu_seqlens_cpu", None), ("safe_gate", False), ("lower_bound", None),
        ("disable_recompute", False), ("return_intermediate_states", False),
        ("state_v_first", False), ("cp_context", None), ("kwargs", _)],
    "fused_recurrent_gdn2": [
        ("q", _), ("k", _), ("v", _), ("g", _), ("b", _), ("w", _), ("A_log", None),
        ("dt_bias", None), ("scale", None), ("initial_state", None),
        ("output_final_state", False), ("use_qk_l2norm_in_kernel", False),
        ("use_gate_in_kernel", False), ("lower_bound", None), ("state_v_first", False),
        ("cu_seqlens", None), ("kwargs", _)],
}


@pytest.fixture(scope="module", autouse=True)
def engines():
    with reference_engines_installed():
        yield


@pytest.mark.parametrize("name", sorted(FLA_SIGNATURES))
def test_signature_is_fla_s(name):
    params = inspect.signature(getattr(cfla, name)).parameters.values()
    assert [(p.name, p.default) for p in params] == FLA_SIGNATURES[name]


def test_aliases():
    assert cfla.chunk_gdn is cfla.chunk_gated_delta_rule
    assert cfla.fused_recurrent_gdn is cfla.fused_recurrent_gated_delta_rule


def inputs(kind: str, B=1, T=12, H=2, HV=4, K=8, V=4, seed=0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen).to(dtype)

    x = dict(q=randn(B, T, H, K), k=F.normalize(randn(B, T, H, K).float(), dim=-1).to(dtype),
             v=randn(B, T, HV, V))
    if kind == "gdn":
        x.update(g=F.logsigmoid(randn(B, T, HV).float()), beta=torch.rand(B, T, HV, generator=gen))
    elif kind == "kda":
        x.update(g=F.logsigmoid(randn(B, T, HV, K).float()),
                 beta=torch.rand(B, T, HV, generator=gen))
    else:
        x.update(g=F.logsigmoid(randn(B, T, HV, K).float()),
                 b=torch.rand(B, T, HV, K, generator=gen).to(dtype),
                 w=torch.rand(B, T, HV, V, generator=gen).to(dtype))
    return x


CHUNKED = {"gdn": cfla.chunk_gated_delta_rule, "kda": cfla.chunk_kda, "gdn2": cfla.chunk_gdn2}
RECURRENT = {"gdn": cfla.fused_recurrent_gated_delta_rule, "kda": cfla.fused_recurrent_kda,
             "gdn2": cfla.fused_recurrent_gdn2}


def heads(kind: str) -> dict:
    return dict(H=4) if kind == "gdn2" else {}  # chunk_gdn2 takes no grouped value heads


@pytest.mark.parametrize("kind", sorted(CHUNKED))
def test_results_and_dtypes(kind):
    x = inputs(kind, **heads(kind), dtype=torch.bfloat16)
    o, final = CHUNKED[kind](**x)
    assert final is None and o.dtype == torch.bfloat16 and o.shape == x["v"].shape
    N, HV, K, V = 1, x["v"].shape[2], x["q"].shape[3], x["v"].shape[3]
    h0 = torch.randn(N, HV, K, V)
    o, final = CHUNKED[kind](**x, initial_state=h0, output_final_state=True)
    assert final.dtype == torch.float32 and final.shape == (N, HV, K, V)


@pytest.mark.parametrize("kind", sorted(CHUNKED))
def test_dense_batch_equals_packed_sequences(kind):
    x = inputs(kind, B=3, T=5, **heads(kind), seed=1)
    h0 = torch.randn(3, x["v"].shape[2], 8, 4)
    o, final = CHUNKED[kind](**x, initial_state=h0, output_final_state=True)
    packed = {n: t.reshape(1, 15, *t.shape[2:]) for n, t in x.items()}
    cu = torch.tensor([0, 5, 10, 15], dtype=torch.int64)
    o_p, final_p = CHUNKED[kind](**packed, initial_state=h0, output_final_state=True,
                                 cu_seqlens=cu)
    torch.testing.assert_close(o_p.reshape(o.shape), o, rtol=0, atol=0)
    torch.testing.assert_close(final_p, final, rtol=0, atol=0)


@pytest.mark.parametrize("kind", sorted(CHUNKED))
def test_recurrent_form_equals_chunked_form(kind):
    x = inputs(kind, **heads(kind), seed=2)
    h0 = torch.randn(1, x["v"].shape[2], 8, 4)
    o, final = CHUNKED[kind](**x, initial_state=h0, output_final_state=True,
                             use_qk_l2norm_in_kernel=True)
    o_r, final_r = RECURRENT[kind](**x, initial_state=h0, output_final_state=True,
                                   use_qk_l2norm_in_kernel=True)
    torch.testing.assert_close(o_r, o, rtol=0, atol=0)
    torch.testing.assert_close(final_r, final, rtol=0, atol=0)


def test_gdn2_matches_the_float64_reference():
    x = inputs("gdn2", H=4, seed=3)
    h0 = torch.randn(1, 4, 8, 4)
    o, final = cfla.chunk_gdn2(**x, initial_state=h0, output_final_state=True, scale=0.4)
    flat = {n: t[0] for n, t in x.items()}
    o_ref, final_ref = naive_recurrent_gdn2(
        flat["q"], flat["k"], flat["v"], flat["g"], flat["b"], flat["w"],
        torch.tensor([0, 12]), scale=0.4, initial_state=h0.transpose(-1, -2),
        output_final_state=True)
    assert_rel_close("o", o[0], o_ref, BOUND)
    assert_rel_close("final_state", final, final_ref.transpose(-1, -2), BOUND)


# -- fused gate arguments ----------------------------------------------------------------

def test_gdn_fused_gate_equals_the_gate_applied_first():
    x = inputs("gdn", seed=4)
    raw = torch.randn(x["g"].shape, requires_grad=True)
    A_log = torch.randn(4, requires_grad=True)
    dt_bias = torch.randn(4, requires_grad=True)
    o, _ = cfla.chunk_gated_delta_rule(**dict(x, g=raw), use_gate_in_kernel=True,
                                       A_log=A_log, dt_bias=dt_bias)
    o.sum().backward()
    g = -A_log.detach().exp() * F.softplus(raw.detach() + dt_bias.detach())
    o_ref, _ = cfla.chunk_gated_delta_rule(**dict(x, g=g))
    torch.testing.assert_close(o, o_ref, rtol=0, atol=0)
    assert all(t.grad is not None for t in (raw, A_log, dt_bias))
    o_r, _ = cfla.fused_recurrent_gated_delta_rule(**dict(x, g=raw.detach()),
                                                   use_gate_in_kernel=True, A_log=A_log,
                                                   dt_bias=dt_bias)
    torch.testing.assert_close(o_r, o_ref, rtol=0, atol=0)


@pytest.mark.parametrize("lower_bound", [None, -3.0])
def test_kda_fused_gate_equals_the_gate_applied_first(lower_bound):
    x = inputs("kda", seed=5)
    raw = torch.randn(x["g"].shape)
    A_log = torch.randn(4)
    dt_bias = torch.randn(4 * 8)
    o, _ = cfla.chunk_kda(**dict(x, g=raw), use_gate_in_kernel=True, A_log=A_log,
                          dt_bias=dt_bias, lower_bound=lower_bound, safe_gate=True
                          if lower_bound is not None else False)
    pre = raw + dt_bias.view(4, 8)
    if lower_bound is None:
        g = -A_log.exp()[:, None] * F.softplus(pre)
    else:
        g = lower_bound * torch.sigmoid(A_log.exp()[:, None] * pre)
    o_ref, _ = cfla.chunk_kda(**dict(x, g=g))
    torch.testing.assert_close(o, o_ref, rtol=0, atol=0)
    o_r, _ = cfla.fused_recurrent_kda(**dict(x, g=raw), A_log=A_log, dt_bias=dt_bias,
                                      use_gate_in_kernel=True, lower_bound=lower_bound)
    torch.testing.assert_close(o_r, o_ref, rtol=0, atol=0)


def test_gate_parameters_in_model_shapes():
    """Kimi Linear keeps A_log as [1, 1, HV, 1] and dt_bias as [HV * K]: read flat, per head
    (and channel), as FLA's kernels index them."""
    x = inputs("kda", seed=12)
    raw = torch.randn(x["g"].shape)
    A_log, dt_bias = torch.randn(4), torch.randn(4, 8)
    o, _ = cfla.chunk_kda(**dict(x, g=raw), use_gate_in_kernel=True, A_log=A_log,
                          dt_bias=dt_bias.reshape(-1))
    o_model, _ = cfla.chunk_kda(**dict(x, g=raw), use_gate_in_kernel=True,
                                A_log=A_log.view(1, 1, 4, 1), dt_bias=dt_bias)
    torch.testing.assert_close(o_model, o, rtol=0, atol=0)


def test_recurrent_kda_reads_a_missing_a_log_as_one():
    x = inputs("kda", seed=6)
    raw = torch.randn(x["g"].shape)
    o, _ = cfla.fused_recurrent_kda(**dict(x, g=raw), use_gate_in_kernel=True)
    o_ref, _ = cfla.fused_recurrent_kda(**dict(x, g=-math.e * F.softplus(raw)))
    torch.testing.assert_close(o, o_ref, rtol=0, atol=0)


@pytest.mark.parametrize("allow_neg_eigval", [False, True])
def test_beta_sigmoid_in_kernel(allow_neg_eigval):
    x = inputs("gdn", seed=7)
    logits = torch.randn(x["beta"].shape, requires_grad=True)
    o, _ = cfla.chunk_gated_delta_rule(**dict(x, beta=logits), use_beta_sigmoid_in_kernel=True,
                                       allow_neg_eigval=allow_neg_eigval)
    o.sum().backward()
    beta = torch.sigmoid(logits.detach()) * (2 if allow_neg_eigval else 1)
    o_ref, _ = cfla.chunk_gated_delta_rule(**dict(x, beta=beta))
    torch.testing.assert_close(o, o_ref, rtol=0, atol=0)
    assert logits.grad is not None


# -- the recurrent GDN form's extras ---------------------------------------------------------

def test_recurrent_gdn_with_key_decay_is_kda():
    x = inputs("kda", seed=8)
    gk = x.pop("g")
    g = F.logsigmoid(torch.randn(1, 12, 4))
    o, final = cfla.fused_recurrent_gated_delta_rule(**x, g=g, gk=gk, output_final_state=True)
    o_ref, final_ref = cfla.fused_recurrent_kda(**x, g=gk + g[..., None],
                                                output_final_state=True)
    torch.testing.assert_close(o, o_ref, rtol=0, atol=0)
    torch.testing.assert_close(final, final_ref, rtol=0, atol=0)


def test_recurrent_gdn_without_decay_or_beta():
    x = inputs("gdn", seed=9)
    o, _ = cfla.fused_recurrent_gated_delta_rule(x["q"], x["k"], x["v"])
    o_ref, _ = cfla.chunk_gated_delta_rule(x["q"], x["k"], x["v"], torch.zeros(1, 12, 4),
                                           torch.ones(1, 12, 4))
    torch.testing.assert_close(o, o_ref, rtol=0, atol=0)


def test_state_v_first_and_its_deprecated_name():
    x = inputs("kda", seed=10)
    h0 = torch.randn(1, 4, 8, 4)
    _, final = cfla.chunk_kda(**x, initial_state=h0, output_final_state=True)
    _, final_vf = cfla.chunk_kda(**x, initial_state=h0.transpose(-1, -2).contiguous(),
                                 output_final_state=True, state_v_first=True)
    torch.testing.assert_close(final_vf, final.transpose(-1, -2), rtol=0, atol=0)
    with pytest.warns(DeprecationWarning, match="transpose_state_layout"):
        _, final_old = cfla.chunk_kda(**x, initial_state=h0.transpose(-1, -2).contiguous(),
                                      output_final_state=True, transpose_state_layout=True)
    torch.testing.assert_close(final_old, final_vf, rtol=0, atol=0)


# -- FLA's errors ----------------------------------------------------------------------------

def _err(exc, match, fn, *args, **kwargs):
    with pytest.raises(exc, match=match):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            fn(*args, **kwargs)


def test_errors_for_fla_s_bad_arguments():
    gdn, kda, gdn2 = inputs("gdn"), inputs("kda"), inputs("gdn2", H=4)
    two = inputs("gdn", B=2)
    cu = torch.tensor([0, 12])
    chunk_gdn, rec_gdn = cfla.chunk_gated_delta_rule, cfla.fused_recurrent_gated_delta_rule
    _err(ValueError, "'q'.*B = 1", chunk_gdn, **two, cu_seqlens=cu)
    _err(ValueError, "'initial_state'.*N = 1", cfla.chunk_kda, **kda, cu_seqlens=cu,
         initial_state=torch.zeros(2, 4, 8, 4))
    _err(ValueError, "'allow_neg_eigval'", chunk_gdn, **gdn, allow_neg_eigval=True)
    _err(ValueError, "'k'", chunk_gdn, **dict(gdn, k=gdn["k"][:, :, :1]))
    _err(ValueError, "'v'", chunk_gdn, **dict(gdn, v=gdn["v"][:, :, :3]))
    _err(DeprecationWarning, "'head_first'", chunk_gdn, **gdn, head_first=False)
    _err(DeprecationWarning, "'head_first'", cfla.chunk_kda, **kda, head_first=True)
    _err(ValueError, "'chunk_size'", chunk_gdn, **gdn, chunk_size=128)
    _err(ValueError, "'chunk_size'", cfla.chunk_kda, **kda, chunk_size=16)
    _err(ValueError, "'chunk_size'", cfla.chunk_gdn2, **gdn2, chunk_size=32)
    _err(NotImplementedError, "'cp_context'", chunk_gdn, **gdn, cp_context=object())
    _err(NotImplementedError, "'return_intermediate_states'", cfla.chunk_kda, **kda,
         return_intermediate_states=True)
    _err(NotImplementedError, "'gv'", rec_gdn, **gdn, gv=torch.zeros(1, 12, 4, 4))
    _err(NotImplementedError, "'beta'", rec_gdn, **dict(gdn, beta=torch.ones(1, 12, 4, 4)))
    _err(AssertionError, "'initial_state'.*float32", cfla.chunk_kda, **kda,
         initial_state=torch.zeros(1, 4, 8, 4, dtype=torch.bfloat16))
    _err(AssertionError, "'A_log'", chunk_gdn, **gdn, use_gate_in_kernel=True)
    _err(ValueError, "'A_log'", rec_gdn, **gdn, use_gate_in_kernel=True)
    _err(ValueError, "'A_log'", cfla.chunk_kda, **kda, use_gate_in_kernel=True)
    _err(ValueError, "'lower_bound'", cfla.chunk_kda, **kda, use_gate_in_kernel=True,
         A_log=torch.zeros(4), safe_gate=True)
    _err(ValueError, "'lower_bound'", cfla.chunk_kda, **kda, use_gate_in_kernel=True,
         safe_gate=True, lower_bound=-6.0)
    _err(AssertionError, "'g'", cfla.chunk_kda, **dict(kda, g=kda["g"][..., :4]))
    _err(AssertionError, "'beta'", cfla.chunk_kda, **dict(kda, beta=kda["beta"][..., None]))
    _err(AssertionError, "'b'", cfla.chunk_gdn2, **dict(gdn2, b=gdn2["b"][..., :4]))
    _err(AssertionError, "'w'", cfla.fused_recurrent_gdn2, **dict(gdn2, w=gdn2["w"][..., :2]))
    _err(ValueError, "'transpose_state_layout'", cfla.chunk_kda, **kda, state_v_first=True,
         transpose_state_layout=True)
    _err(AssertionError, "max_num_seqs", cfla.chunk_kda, **kda, cu_seqlens=cu,
         use_graph=True, max_num_seqs=4)


def test_hints_without_effect_are_accepted():
    x = inputs("kda", seed=11)
    cu = torch.tensor([0, 12])
    o, _ = cfla.chunk_kda(**x, cu_seqlens=cu)
    o2, _ = cfla.chunk_kda(**x, cu_seqlens=cu, cu_seqlens_cpu=cu, disable_recompute=True,
                           use_graph=True, max_num_seqs=1, safe_gate=True, chunk_size=32)
    torch.testing.assert_close(o2, o, rtol=0, atol=0)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
