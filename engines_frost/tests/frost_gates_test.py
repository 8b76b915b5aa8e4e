"""CPU tests of the FROST support gates (engine_gates.py): L0 planning decisions, no GPU.

Each case builds a real single-node graph (or edits one field of a real graph's facts
record) and checks that the engine claims it, or declines with a message that starts
with the engine's name and names the property and its value. What the op spec forbids
(k heads outside {H, HV}, gates of the wrong width) never reaches these gates: the
builders refuse it, and a node assembled past them has an invalid facts record.
"""
import dataclasses
import types

import pytest
from frost_graphs import op_graph

import cudnn
from cudnn.linear_attention.common.facts import analyze_linear_attention, linear_attention_facts
from cudnn.linear_attention.frost.engine_gates import GDN, GDN2, KDA, decline_reason

D = cudnn.data_type
TRAITS = {"gdn": GDN, "kda": KDA, "gdn2": GDN2}


def reason(graph, family="gdn", facts=None):
    f = facts or linear_attention_facts(graph)
    return decline_reason(f, TRAITS[family], f"{family}_frost")


# -- accepted graphs ---------------------------------------------------------------------
ACCEPTED = [
    ("plain", {}),
    ("h0_and_final_fp32", dict(with_h0=True, output_final_state=True)),
    ("h0_and_final_bf16", dict(with_h0=True, output_final_state=True,
                               dtypes={"initial_state": D.BFLOAT16},
                               out_dtypes={"final_state": D.BFLOAT16})),
    ("final_only", dict(output_final_state=True, out_dtypes={"final_state": D.FLOAT})),
    ("fp16_io", dict(dtypes={"q": D.HALF, "k": D.HALF, "v": D.HALF},
                     out_dtypes={"O": D.HALF})),
    ("v_heads_grouped", dict(H=4, HV=16, K=128, V=64)),
    ("q_heads_grouped", dict(H=16, HV=4, K=64, V=128)),
    ("k_heads_follow_v", dict(H=4, HK=8, HV=8)),
    ("explicit_scale", dict(scale=0.5)),
    ("one_token", dict(T=1, N=1)),
]


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
@pytest.mark.parametrize("case, kw", ACCEPTED, ids=[c for c, _ in ACCEPTED])
def test_forward_graphs_are_claimed(family, case, kw):
    g, _ = op_graph(family, **kw)
    assert reason(g, family) is None


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
@pytest.mark.parametrize("kw", [dict(), dict(with_h0=True, output_final_state=True),
                                dict(T=200, N=5, H=4, HV=8, K=128, V=64)],
                         ids=["plain", "h0_final", "grouped"])
def test_checkpoints_at_cadence_64_are_claimed_forward_and_backward(family, kw):
    g, _ = op_graph(family, checkpoint_every_n_tokens=64, **kw)
    assert reason(g, family) is None
    g, _ = op_graph(f"{family}_bwd", checkpoint_every_n_tokens=64,
                    extra_inputs=("state_checkpoints",),
                    **{k: v for k, v in kw.items() if k != "output_final_state"})
    assert reason(g, family) is None


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_values_with_checkpoints_are_claimed_forward_and_backward(family):
    """The v1.3 training pair: the forward writing values (u_t) with its checkpoints, the
    backward reading both; the recurrent engine declines the values output, and so would
    an engine whose gate does not say it serves them (the shared feature gate)."""
    from cudnn.linear_attention.common.feature_gates import unsupported_feature_reason
    from cudnn.linear_attention.frost.decode_gates import decline_reason as decode_reason

    g, _ = op_graph(family, checkpoint_every_n_tokens=64, output_values=True,
                    out_dtypes={"values": D.BFLOAT16})
    assert reason(g, family) is None
    f = linear_attention_facts(g)
    assert f.flags.output_values and f.has_output("values")
    assert "output_values=True is not implemented in the recurrent kernel" in \
        decode_reason(f, TRAITS[family], "x_frost_decode")
    assert unsupported_feature_reason(f, "eng", flags=(), inputs=(), checkpoints=True) == \
        "eng: output_values=True (the forward's u_t per token) is not implemented"
    g, _ = op_graph(f"{family}_bwd", checkpoint_every_n_tokens=64,
                    extra_inputs=("state_checkpoints", "values"))
    assert reason(g, family) is None
    assert unsupported_feature_reason(linear_attention_facts(g), "eng", flags=(), inputs=(),
                                      checkpoints=True) == \
        "eng: input 'values' (the forward's u_t per token) is not implemented"


def test_values_in_another_dtype_decline():
    g, _ = op_graph("gdn", checkpoint_every_n_tokens=64, output_values=True,
                    out_dtypes={"values": D.FLOAT})
    assert "'values' dtype must be BFLOAT16, got FLOAT" in reason(g)
    g, _ = op_graph("gdn_bwd", checkpoint_every_n_tokens=64, extra_inputs=("state_checkpoints", "values"),
                    dtypes={"values": D.HALF})
    assert "'values' dtype must be BFLOAT16, got HALF" in reason(g)


SERVING = [
    ("state_pool", dict(with_h0=True, extra_inputs=("state_indices",),
                        dims={"initial_state": [9, 4, 64, 64]})),
    ("overwrite", dict(with_h0=True, output_final_state=True, overwrite_initial_state=True)),
    ("pool_overwrite", dict(with_h0=True, extra_inputs=("state_indices",),
                            dims={"initial_state": [9, 4, 64, 64]}, output_final_state=True,
                            overwrite_initial_state=True)),
    ("safe_gate", dict(safe_gate=True, extra_inputs=("a_log", "dt_bias"))),
    ("beta_sigmoid", dict(use_beta_sigmoid=True, allow_neg_eigval=True)),
    ("linear_gate", dict(gate_domain="linear")),
]


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
@pytest.mark.parametrize("case, kw", SERVING, ids=[c for c, _ in SERVING])
def test_forward_serving_features_are_claimed(family, case, kw):
    """Served by serving_adapter.py around the kernel (forward only)."""
    g, _ = op_graph(family, **kw)
    assert reason(g, family) is None


@pytest.mark.parametrize("family", ["kda", "gdn2"])
def test_l2norm_is_claimed_where_the_kernel_normalises(family):
    g, _ = op_graph(family, use_qk_l2norm=True)
    assert reason(g, family) is None


# -- declines from real graphs ---------------------------------------------------------
DECLINES = [
    # (id, family, op_graph kwargs, expected fragment of the message)
    ("gdn_bwd_sigmoid", "gdn", dict(op="gdn_bwd", use_beta_sigmoid=True), "use_beta_sigmoid"),
    ("summary", "gdn", dict(op="gdn_summary"), "summary nodes are not implemented (kind SUMMARY)"),
    ("K_32", "gdn", dict(K=32), "head dim K = 32 is not one of (64, 128)"),
    ("V_256", "kda", dict(V=256), "head dim V = 256 is not one of (64, 128)"),
    ("int32_offsets", "gdn", dict(T=2**31 // (4 * 128), K=128),
     "operands of 2147483648 elements need 64-bit offsets (T = 4194304, N = 3, HO = 4)"),
    # the serving features: forward only (serving_adapter.py), the backward declines them
    ("bwd_beta_sigmoid", "gdn", dict(op="gdn_bwd", use_beta_sigmoid=True),
     "use_beta_sigmoid=True is not impl"),
    ("bwd_safe_gate", "kda", dict(op="kda_bwd", safe_gate=True),
     "safe_gate=True is not implemented in this"),
    ("beta_guard", "gdn2", dict(beta_guard=True, use_qk_l2norm=True),
     "beta_guard=True is not impl"),
    ("bwd_linear_gate", "gdn", dict(op="gdn_bwd", gate_domain="linear"),
     "gate_domain='linear' is not implemented in this version (only 'log')"),
    ("checkpoints_128", "kda", dict(checkpoint_every_n_tokens=128),
     "state checkpoints (checkpoint_every_n_tokens=128) is not implemented in this version: "
     "the kernels write and read them every 64 tokens (one chunk; the recurrent engine "
     "*_frost_decode writes any cadence)"),
    ("checkpoints_16", "gdn", dict(checkpoint_every_n_tokens=16), "checkpoint_every_n_tokens=16"),
    ("checkpoints_bwd_128", "gdn", dict(op="gdn_bwd", checkpoint_every_n_tokens=128,
                                        extra_inputs=("state_checkpoints",),
                                        dims={"state_checkpoints": [40 // 128 + 3, 4, 64, 64]}),
     "checkpoint_every_n_tokens=128"),
    ("fp32_checkpoints", "gdn", dict(checkpoint_every_n_tokens=64,
                                     out_dtypes={"state_checkpoints": D.FLOAT}),
     "'state_checkpoints' dtype must be BFLOAT16, got FLOAT"),
    ("fp32_checkpoints_bwd", "kda", dict(op="kda_bwd", checkpoint_every_n_tokens=64,
                                         extra_inputs=("state_checkpoints",),
                                         dtypes={"state_checkpoints": D.FLOAT}),
     "'state_checkpoints' dtype must be BFLOAT16, got FLOAT"),
    ("checkpoints_with_pool", "gdn", dict(checkpoint_every_n_tokens=64, with_h0=True,
                                          extra_inputs=("state_indices",),
                                          dims={"initial_state": [9, 4, 64, 64]}),
     "state checkpoints with a state pool, overwrite_initial_state or fused gates"),
    ("checkpoints_with_safe_gate", "kda", dict(checkpoint_every_n_tokens=64, safe_gate=True,
                                               extra_inputs=("a_log", "dt_bias")),
     "the recurrent engine *_frost_decode writes them"),
    ("bwd_a_log", "gdn", dict(op="gdn_bwd", safe_gate=True, extra_inputs=("a_log",)),
     "input 'a_log' is not implemented in this version"),
    ("bwd_dt_bias", "kda", dict(op="kda_bwd", safe_gate=True, extra_inputs=("dt_bias",)),
     "input 'dt_bias' is not implemented in this version"),
    ("fp32_io", "gdn", dict(dtypes={"q": D.FLOAT, "k": D.FLOAT, "v": D.FLOAT}),
     "q/k/v dtype must be BFLOAT16 or HALF, got FLOAT"),
    ("mixed_io", "kda", dict(dtypes={"k": D.HALF}), "q, k and v must share one dtype"),
    ("bf16_gate", "gdn", dict(dtypes={"g": D.BFLOAT16}), "'g' dtype must be FLOAT, got BFLOAT16"),
    ("bf16_beta_gdn", "gdn", dict(dtypes={"beta": D.BFLOAT16}),
     "'beta' dtype must be FLOAT, got BFLOAT16"),
    ("fp32_beta_gdn2", "gdn2", dict(dtypes={"beta": D.FLOAT}),
     "'beta' dtype must be BFLOAT16, got FLOAT"),
    ("fp32_w_gdn2", "gdn2", dict(dtypes={"w": D.FLOAT}),
     "'w' dtype must be BFLOAT16, got FLOAT"),
    ("int64_cu", "kda", dict(dtypes={"cu_seqlens": D.INT64}),
     "'cu_seqlens' dtype must be INT32, got INT64"),
    ("fp32_out", "gdn", dict(out_dtypes={"O": D.FLOAT}), "'O' dtype must be BFLOAT16, got FLOAT"),
    ("fp16_state", "gdn", dict(with_h0=True, dtypes={"initial_state": D.HALF}),
     "'initial_state' dtype must be FLOAT or BFLOAT16, got HALF"),
    ("state_pair", "kda", dict(with_h0=True, output_final_state=True,
                               out_dtypes={"final_state": D.BFLOAT16}),
     "initial_state (FLOAT) and final_state (BFLOAT16) must share one dtype"),
]


@pytest.mark.parametrize("case, family, kw, needle", DECLINES, ids=[c[0] for c in DECLINES])
def test_declines_name_property_and_value(case, family, kw, needle):
    kw = dict(kw)
    g, _ = op_graph(kw.pop("op", family), **kw)
    msg = reason(g, family)
    assert msg is not None and msg.startswith(f"{family}_frost: "), msg
    assert needle in msg, msg


# -- declines on facts the builders never produce ---------------------------------------
def _edited(family="gdn", **changes):
    g, _ = op_graph(family)
    return dataclasses.replace(linear_attention_facts(g), **changes)


@pytest.mark.parametrize("family, kw, argument", [
    ("gdn", dict(H=2, HK=4, HV=8), "'k'"),
    ("kda", dict(dims={"g": [40, 4, 32]}), "'g'"),
    ("gdn2", dict(dims={"beta": [40, 4, 32]}), "'beta'"),
], ids=["k_heads", "kda_gate_channels", "gdn2_beta_width"])
def test_what_the_op_spec_forbids_is_refused_before_any_gate(family, kw, argument):
    with pytest.raises(cudnn.OpValueError, match=argument):
        op_graph(family, **kw)


def test_allow_neg_eigval_declines_even_without_sigmoid_flag():
    g, _ = op_graph("gdn_bwd")
    f = linear_attention_facts(g)
    f = dataclasses.replace(f, flags=dataclasses.replace(f.flags, allow_neg_eigval=True))
    assert "allow_neg_eigval=True is not implemented in this version" in reason(None, facts=f)


def test_invalid_graph_declines_with_the_analyzer_reason():
    facts = analyze_linear_attention(types.SimpleNamespace(nodes=[]))
    msg = reason(None, facts=facts)
    assert msg.startswith("gdn_frost: ") and "no linear-attention node" in msg


@pytest.mark.parametrize("family, graph_family", [("gdn", "kda"), ("kda", "gdn2"),
                                                  ("gdn2", "gdn")])
def test_family_mismatch_declines(family, graph_family):
    g, _ = op_graph(graph_family)
    assert f"serves {family} nodes, not {graph_family}" in reason(g, family)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
