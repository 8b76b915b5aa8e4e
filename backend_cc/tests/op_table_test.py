"""The backend_graph op methods carry the IR's names (docs/GRAPH_IR.md §1).

The expected names below are transcribed from the spec tables; a renamed port or kwarg in
the C++ op table fails here.
"""

import pytest

from cudnn.backend import loader

EXT = loader.extension()
if EXT is None:
    raise ImportError("op table tests need the built extension: " + loader.unavailable_reason())

SCHEMAS = {s["method"]: s for s in EXT.op_schemas()}

# Section 1a/1b: method -> tensor argument names in order.
POINTWISE_PORTS = {
    **{m: ["input"] for m in (
        "abs ceil cos elu erf exp floor gelu gelu_approx_tanh identity log logical_not neg "
        "reciprocal rsqrt sigmoid sin softplus sqrt tan tanh relu leaky_relu swish gen_index"
    ).split()},
    **{m: ["a", "b"] for m in "add add_square div logical_and logical_or mul sub".split()},
    **{m: ["input0", "input1"] for m in "max min mod pow".split()},
    **{m: ["input", "comparison"] for m in "cmp_eq cmp_ge cmp_gt cmp_le cmp_lt cmp_neq".split()},
    "bias": ["input", "bias"],
    "scale": ["input", "scale"],
    **{m: ["loss", "input"] for m in (
        "elu_backward gelu_approx_tanh_backward gelu_backward sigmoid_backward "
        "softplus_backward tanh_backward relu_backward leaky_relu_backward swish_backward"
    ).split()},
    "binary_select": ["input0", "input1", "mask"],
}
POINTWISE_PARAMS = {
    "relu": {"negative_slope", "lower_clip", "upper_clip"},
    "relu_backward": {"negative_slope", "lower_clip", "upper_clip"},
    "leaky_relu": {"negative_slope"},
    "leaky_relu_backward": {"negative_slope"},
    "swish": {"swish_beta"},
    "swish_backward": {"swish_beta"},
    "gen_index": {"axis"},
}

CONV_ATTRS = {"padding", "pre_padding", "post_padding", "stride", "dilation", "convolution_mode"}
# Sections 2-3: method -> (input ports, attributes, outputs).
STRUCTURED = {
    "matmul": (["A", "B"], {"padding"}, ["C"]),
    "conv_fprop": (["image", "weight"], CONV_ATTRS, ["Y"]),
    "conv_dgrad": (["loss", "filter"], CONV_ATTRS, ["DX"]),
    "conv_wgrad": (["image", "loss"], CONV_ATTRS, ["DW"]),
    "reduction": (["input", "group_offset"], {"mode"}, ["OUT_0"]),
    "layernorm": (["input", "scale", "bias", "epsilon"], {"norm_forward_phase"}, ["Y", "mean", "inv_var"]),
    "rmsnorm": (["input", "scale", "bias", "epsilon"], {"norm_forward_phase"}, ["Y", "inv_var"]),
    "adalayernorm": (["input", "scale", "bias", "epsilon"], {"norm_forward_phase"}, ["Y", "mean", "inv_var"]),
    "instancenorm": (["input", "scale", "bias", "epsilon"], {"norm_forward_phase"}, ["Y", "mean", "inv_var"]),
    "batchnorm": (["input", "scale", "bias", "in_running_mean", "in_running_var", "epsilon", "momentum",
                   "peer_stats"], set(), ["Y", "mean", "inv_var", "next_running_mean", "next_running_var"]),
    "layernorm_backward": (["grad", "input", "scale", "mean", "inv_variance"], set(), ["DX", "DScale", "DBias"]),
    "rmsnorm_backward": (["grad", "input", "scale", "inv_variance"], {"has_dbias"}, ["DX", "DScale", "DBias"]),
    "adalayernorm_backward": (["grad", "input", "scale", "mean", "inv_variance"], set(), ["DX", "DScale", "DBias"]),
    "instancenorm_backward": (["grad", "input", "scale", "mean", "inv_variance"], set(), ["DX", "DScale", "DBias"]),
    "batchnorm_backward": (["grad", "input", "scale", "mean", "inv_variance", "peer_stats"], set(),
                           ["DX", "DScale", "DBias"]),
    "genstats": (["input"], set(), ["SUM", "SQ_SUM"]),
    "reshape": (["input"], {"reshape_mode"}, ["OUT_0"]),
    "concatenate": (["inputs"], {"axis", "in_place_index"}, ["OUT_0"]),
}

# Section 5b, columns sdpa and sdpa_backward: every keyword the binding accepts.
SDPA_KWARGS = set("""
    q k v attn_scale is_inference generate_stats stats_use_log2 implementation unfuse_fma bias
    block_mask use_alibi_mask use_causal_mask use_causal_mask_bottom_right sliding_window_length
    diagonal_alignment diagonal_band_left_bound diagonal_band_right_bound use_padding_mask
    seq_len_q seq_len_kv cu_seq_len_q cu_seq_len_kv max_total_seq_len_q max_total_seq_len_kv
    dropout rng_dump paged_attention_k_table paged_attention_v_table
    paged_attention_max_seq_len_kv score_mod score_max score_sum_exp sink_token
    compute_data_type name""".split())
SDPA_BACKWARD_KWARGS = set("""
    q k v o dO stats attn_scale use_deterministic_algorithm bias dBias use_alibi_mask
    use_causal_mask use_causal_mask_bottom_right sliding_window_length diagonal_alignment
    diagonal_band_left_bound diagonal_band_right_bound use_padding_mask seq_len_q seq_len_kv
    max_total_seq_len_q max_total_seq_len_kv dropout rng_dump score_mod_bprop sink_token
    dSink_token compute_data_type name""".split())


def ports(schema):
    return [p["name"] for p in schema["inputs"]]


def keywords(schema):
    names = set(ports(schema)) | {a["name"] for a in schema["attrs"]} | {"name"}
    if schema["takes_compute_data_type"]:
        names.add("compute_data_type")
    return names


def test_all_54_pointwise_methods_with_their_argument_names():
    pointwise = {m: s for m, s in SCHEMAS.items() if s["kind"] == "pointwise"}
    assert len(POINTWISE_PORTS) == 54
    assert set(pointwise) == set(POINTWISE_PORTS)
    for method, expected in POINTWISE_PORTS.items():
        assert ports(pointwise[method]) == expected, method
        assert {a["name"] for a in pointwise[method]["attrs"]} == POINTWISE_PARAMS.get(method, set())
        assert pointwise[method]["outputs"] == ["OUT_0"]


@pytest.mark.parametrize("method", sorted(STRUCTURED))
def test_structured_ops_use_the_ir_port_and_attribute_names(method):
    expected_ports, expected_attrs, expected_outputs = STRUCTURED[method]
    schema = SCHEMAS[method]
    assert ports(schema) == expected_ports
    assert {a["name"] for a in schema["attrs"]} == expected_attrs
    assert schema["outputs"] == expected_outputs


def test_reshape_and_concatenate_take_no_compute_data_type():
    assert not SCHEMAS["reshape"]["takes_compute_data_type"]
    assert not SCHEMAS["concatenate"]["takes_compute_data_type"]
    assert SCHEMAS["matmul"]["takes_compute_data_type"]


def test_sdpa_keywords_equal_the_binding_keywords():
    assert keywords(SCHEMAS["sdpa"]) == SDPA_KWARGS
    assert keywords(SCHEMAS["sdpa_backward"]) == SDPA_BACKWARD_KWARGS
    assert SCHEMAS["sdpa"]["outputs"] == ["O", "Stats"]
    assert SCHEMAS["sdpa_backward"]["outputs"] == ["dQ", "dK", "dV"]
    assert ports(SCHEMAS["sdpa"])[:3] == ["q", "k", "v"]
    assert ports(SCHEMAS["sdpa_backward"])[:6] == ["q", "k", "v", "o", "dO", "stats"]


def test_every_table_row_is_a_documented_method():
    for method, schema in SCHEMAS.items():
        bound = getattr(EXT.backend_graph, method)
        assert bound.__doc__.splitlines()[0].startswith(f"{method}(")
        assert schema["signature"].startswith(f"{method}(")


def test_python_only_ops_have_no_backend_method():
    for method in ("gdn", "gdn_bwd", "kda", "kda_bwd", "gdn2", "gdn2_bwd", "mamba2"):
        assert not hasattr(EXT.backend_graph, method)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
