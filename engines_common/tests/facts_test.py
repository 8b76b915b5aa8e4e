"""The linear-attention facts record: geometry, dtypes, flags, memoization, and every
consistency rule of the op specs turning the record invalid (nodes assembled past the
builders reach states the builders refuse)."""
from __future__ import annotations

import math

import pytest
from la_graphs import Geo, extra_tensor, la_graph, node_variant, shapes

import cudnn
from cudnn.linear_attention.common.facts import (DEFAULT_GATE_LOWER_BOUND,
                                                analyze_linear_attention,
                                                linear_attention_facts)
from cudnn.ops.linear_attention_family import Kind

D = cudnn.data_type
GEO = Geo()

ALL_OPS = [f"{fam}{suffix}" for fam in ("gdn", "kda", "gdn2", "gdp", "mamba2")
           for suffix in ("", "_bwd", "_summary", "_summary_bwd")]


@pytest.mark.parametrize("op", ALL_OPS)
def test_every_minimal_op_is_valid_and_single_node(op):
    g, node = la_graph(op)
    facts = linear_attention_facts(g)
    assert facts.valid and facts.invalid_reason is None, facts.invalid_reason
    assert facts.node is node and facts.node_name == op and facts.node_type is node.node_type
    assert facts.family.prefix == op.split("_")[0]
    assert facts.n_seq == GEO.N and facts.total_t == GEO.T


def test_gdn_forward_geometry_dtypes_and_flags():
    g, node = la_graph("gdn", output_final_state=True)
    f = linear_attention_facts(g)
    assert (f.h_q, f.h_k, f.h_v, f.h_o) == (2, 2, 4, 4)
    assert (f.d_qk, f.d_v, f.total_t, f.n_seq) == (16, 8, 24, 3)
    assert f.kind is Kind.FWD and not f.is_backward and not f.is_summary
    assert f.householder_layout is None
    assert f.inputs == {"q", "k", "v", "g", "beta", "cu_seqlens"}
    assert f.outputs == {"O", "final_state"} and f.has_output("final_state")
    assert not f.has_input("initial_state") and not f.uses_state_pool
    assert f.dtype("q") is D.BFLOAT16 and f.dtype("g") is D.FLOAT
    assert f.dtype("cu_seqlens") is D.INT32 and f.dtype("initial_state") is None
    assert f.io_dtype is D.BFLOAT16 and f.uniform_io and f.state_pair_match
    assert f.flags.output_final_state and f.flags.scale == pytest.approx(1 / math.sqrt(16))
    assert f.flags.scale_is_default and f.flags.gate_domain == "log"
    assert f.flags.gate_lower_bound is None and f.flags.checkpoint_every_n_tokens == 0


def test_explicit_scale_and_kda_safe_gate_defaults():
    g, _ = la_graph("kda", ports=("a_log", "dt_bias"), safe_gate=True, scale=0.5)
    f = linear_attention_facts(g)
    assert f.flags.scale == 0.5 and not f.flags.scale_is_default
    assert f.flags.safe_gate and f.flags.gate_lower_bound == DEFAULT_GATE_LOWER_BOUND
    g2, _ = la_graph("kda", safe_gate=True, gate_lower_bound=-3.0)
    assert linear_attention_facts(g2).flags.gate_lower_bound == -3.0


def test_gdn2_write_gate_is_an_input():
    g, _ = la_graph("gdn2")
    f = linear_attention_facts(g)
    assert f.valid and f.has_input("w") and f.family.per_channel_beta


def test_gates_not_at_ho_make_the_record_invalid():
    geo = Geo(HQ=4, HK=4, HV=4)
    g, node = la_graph("gdn", geo=geo)
    narrow = extra_tensor((geo.T, 2), D.FLOAT, "g")
    f = analyze_linear_attention(node_variant(node, inputs={"g": narrow}))
    assert "gates have HO heads" in f.invalid_reason


def test_backward_records_state_gradients_and_kind():
    g, _ = la_graph("gdn_bwd", ports=("initial_state", "d_final_state"))
    f = linear_attention_facts(g)
    assert f.kind is Kind.BWD and f.is_backward and not f.is_summary
    assert f.has_output("d_initial_state") and f.state_rows == GEO.N
    assert f.state_pair_match and f.io_dtype is D.BFLOAT16


def test_summaries_take_ho_from_the_gate():
    g, _ = la_graph("kda_summary")
    f = linear_attention_facts(g)
    assert f.is_summary and f.h_q is None and f.h_o == GEO.HO and f.d_qk == GEO.K


def test_dtype_mismatches_are_facts_not_errors():
    g, _ = la_graph("gdn", dtypes={"k": D.HALF})
    assert not linear_attention_facts(g).uniform_io
    g = cudnn.pygraph()
    dims = shapes("gdn", GEO)
    t = {p: g.tensor(list(dims[p]), data_type=DT, name=p) for p, DT in (
        ("q", D.HALF), ("k", D.HALF), ("v", D.HALF), ("g", D.FLOAT), ("beta", D.FLOAT),
        ("cu_seqlens", D.INT32), ("initial_state", D.FLOAT))}
    final = g.gdn(**t, output_final_state=True)[1]
    final.set_data_type(D.HALF)
    g.validate()
    f = linear_attention_facts(g)
    assert f.valid and f.uniform_io and not f.state_pair_match


def test_householder_and_mamba_geometry():
    g, _ = la_graph("gdp")
    f = linear_attention_facts(g)
    assert f.householder_layout == "expanded" and f.total_t == GEO.T and f.flags.num_householder == 2
    g, _ = la_graph("mamba2")
    f = linear_attention_facts(g)
    assert f.h_o == GEO.HV and f.flags.scale is None and f.flags.dt_softplus


def test_facts_are_memoized_once_validated_and_dropped_by_a_mutation():
    g, node = la_graph("gdn")
    first = linear_attention_facts(g)
    assert linear_attention_facts(g) is first
    node.inputs["q"].set_dim([GEO.T, GEO.HQ, 32])
    node.inputs["k"].set_dim([GEO.T, GEO.HK, 32])
    assert not g.state.validated
    assert linear_attention_facts(g) is not linear_attention_facts(g)  # not cached now
    g.validate()
    again = linear_attention_facts(g)
    assert again is linear_attention_facts(g) and again.d_qk == 32 and again is not first


def test_graph_level_rules():
    g, _ = la_graph("gdn")
    g2 = cudnn.pygraph()
    x = g2.tensor([4, 4], data_type=D.FLOAT, name="x")
    g2.relu(x)
    g2.validate()
    assert "no linear-attention node (node types: POINTWISE)" in \
        linear_attention_facts(g2).invalid_reason
    two = node_variant(g.nodes[0])
    two.nodes.append(g2.nodes[0])
    reason = analyze_linear_attention(two).invalid_reason
    assert "single-node graphs; this graph has 2 nodes" in reason
    assert linear_attention_facts(cudnn.pygraph()).invalid_reason.startswith(
        "the graph has no linear-attention node")


def _t(port, family="gdn", dtype=None, dims=None):
    return extra_tensor(dims or shapes(family, GEO)[port], dtype or D.FLOAT, port)


N = GEO.N
# (op, builder ports, builder attrs, variant edits, expected reason)
RULES = [
    ("gdn", (), {}, dict(drop=("beta",)), "required input 'beta' is not wired"),
    ("gdn_bwd", (), {}, dict(outputs={"d_initial_state": _t("initial_state")}),
     "output 'd_initial_state' is present although 'initial_state given' is false"),
    ("gdn_bwd", ("initial_state",), {}, dict(inputs={"state_indices": _t("state_indices",
                                                                          dtype=D.INT32)}),
     "input 'state_indices' is not a port of gdn_bwd"),
    ("gdn", (), {}, dict(inputs={"state_indices": _t("state_indices", dtype=D.INT32)}),
     "state_indices requires initial_state"),
    ("gdn", ("initial_state", "state_indices"), {},
     dict(inputs={"state_indices": _t("state_indices", dtype=D.INT32, dims=(N + 1,))}),
     f"state_indices': expected dims [{N}] ([N], one pool row per sequence)"),
    ("gdn", (), {}, dict(inputs={"a_log": _t("a_log")}), "a_log requires safe_gate=True"),
    ("kda", (), {}, dict(inputs={"dt_bias": _t("dt_bias", "kda")}),
     "dt_bias requires safe_gate=True"),
    ("gdn", (), {}, dict(params={"gate_domain": "exp"}),
     "argument 'gate_domain': expected one of ['log', 'linear']; got str 'exp'"),
    ("gdn", (), {"safe_gate": True}, dict(params={"gate_domain": "linear"}),
     "gate_domain='linear' is incompatible with safe_gate=True"),
    ("gdn", ("a_log",), {"safe_gate": True}, dict(outputs={"d_a_log": _t("a_log")}),
     "output 'd_a_log' is not an output of gdn"),
    ("gdn_bwd", (), {}, dict(outputs={"d_a_log": _t("a_log")}),
     "output 'd_a_log' is present although 'a_log given' is false"),
    ("gdn_bwd", ("a_log",), {"safe_gate": True}, dict(outputs={"d_a_log": None}),
     "output 'd_a_log' is missing (present when a_log given)"),
    ("kda_bwd", ("dt_bias",), {"safe_gate": True},
     dict(outputs={"d_dt_bias": _t("dt_bias", dims=(GEO.HO, GEO.K + 1))}),
     "argument 'd_dt_bias': expected dims [4, 16] (what the op writes)"),
    ("kda", (), {}, dict(params={"gate_lower_bound": -2.0}),
     "gate_lower_bound requires safe_gate=True"),
    ("gdn", (), {}, dict(params={"checkpoint_every_n_tokens": -4}),
     "argument 'checkpoint_every_n_tokens': expected >= 0; got int -4"),
    ("gdn", (), {}, dict(params={"checkpoint_every_n_tokens": 4}),
     "output 'state_checkpoints' is missing (present when checkpoint_every_n_tokens > 0)"),
    ("gdn", (), {"checkpoint_every_n_tokens": 4}, dict(params={"checkpoint_every_n_tokens": 0}),
     "output 'state_checkpoints' is present although 'checkpoint_every_n_tokens > 0' is"),
    ("gdn_bwd", (), {}, dict(params={"checkpoint_every_n_tokens": 4}),
     "checkpoint_every_n_tokens > 0 requires the state_checkpoints input"),
    ("gdn", ("initial_state",), {}, dict(params={"overwrite_initial_state": True}),
     "overwrite_initial_state requires initial_state and output_final_state=True"),
    ("gdn_bwd", ("initial_state",), {}, dict(params={"overwrite_initial_state": True}),
     "overwrite_initial_state requires d_final_state and initial_state"),
    ("gdn", (), {}, dict(params={"allow_neg_eigval": True}),
     "allow_neg_eigval requires use_beta_sigmoid=True"),
    ("gdp", (), {}, dict(params={"num_householder": 0}), "argument 'num_householder': expected >= 1; got int 0"),
    ("gdp", (), {}, dict(inputs={"k": _t("k", dims=(GEO.T * 3, GEO.HK, GEO.K))}),
     "expected rows T*n = 48 (expanded) or leading [T, n] = [24, 2]"),
    ("mamba2", (), {}, dict(inputs={"beta": _t("beta")}), "input 'beta' is not a port of mamba2"),
    ("mamba2", (), {}, dict(inputs={"d": _t("d", dims=(GEO.HO, GEO.V, 1))}),
     "input 'd': expected rank 1 or 2; got dims [4, 8, 1] (rank 3)"),
    ("mamba2", (), {}, dict(outputs={"O_pre": _t("O_pre")}),
     "output 'O_pre' is present although 'output_pre_gate is True and z given' is false"),
    ("mamba2", ("z",), {}, dict(params={"output_pre_gate": True}),
     "output 'O_pre' is missing (present when output_pre_gate is True and z given)"),
    ("mamba2_bwd", (), {}, dict(inputs={"z": _t("z")}, outputs={"dZ": _t("z")}),
     "the z-gate backward requires O_pre"),
    ("mamba2", (), {}, dict(params={"dt_min": 2.0, "dt_max": 1.0}),
     "dt_min (2.0) must be <= dt_max (1.0)"),
]


@pytest.mark.parametrize("op, ports, attrs, edits, reason", RULES,
                         ids=[f"{r[0]}:{r[4][:40]}" for r in RULES])
def test_each_consistency_rule_invalidates_the_record(op, ports, attrs, edits, reason):
    _, node = la_graph(op, ports=ports, **attrs)
    assert analyze_linear_attention(node_variant(node)).valid  # the base node is fine
    facts = analyze_linear_attention(node_variant(node, **edits))
    assert facts.invalid_reason is not None and reason in facts.invalid_reason
    with pytest.raises(NotImplementedError, match="gdn_cutile: "):
        facts.require_valid("gdn_cutile")


def test_several_violations_are_all_reported():
    _, node = la_graph("gdn")
    facts = analyze_linear_attention(node_variant(
        node, drop=("beta",), params={"gate_domain": "exp", "checkpoint_every_n_tokens": -1}))
    for reason in ("required input 'beta' is not wired", "argument 'gate_domain'",
                   "argument 'checkpoint_every_n_tokens'"):
        assert reason in facts.invalid_reason
    _, node = la_graph("kda")
    facts = analyze_linear_attention(node_variant(
        node, params={"allow_neg_eigval": True, "gate_lower_bound": -1.0}))
    assert "allow_neg_eigval requires" in facts.invalid_reason
    assert "gate_lower_bound requires" in facts.invalid_reason


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
