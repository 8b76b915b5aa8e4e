"""CPU tests of the backend_graph recording layer: no libcudnn and no GPU needed.

They need the built extension (the Bazel target, or `pip install -e .`): a missing
extension is an error here, not a skip.
"""

import enum

import pytest

from cudnn.backend import loader

EXT = loader.extension()
if EXT is None:
    raise ImportError("backend_graph tests need the built extension: " + loader.unavailable_reason())

# Frontend data_type values (docs/GRAPH_IR.md §3).
FLOAT, HALF, INT32, BFLOAT16, BOOLEAN = 1, 3, 5, 10, 12
NOT_SUPPORTED = EXT.graph_not_supported_error()


class DataType(enum.Enum):
    """Stands in for the IR's enum: the binding reads `.value`."""

    HALF = 3
    FLOAT = 1


def graph(**kw):
    kw.setdefault("io_data_type", HALF)
    return EXT.backend_graph(**kw)


def matmul_bias_relu():
    g = graph(intermediate_data_type=FLOAT, compute_data_type=FLOAT)
    a = g.tensor(uid=11, dim=[4, 16, 32], name="a")
    b = g.tensor(uid=12, dim=[4, 32, 8], name="b")
    bias = g.tensor(uid=13, dim=[1, 1, 8], name="bias")
    c = g.matmul(a, b)
    d = g.add(a=c, b=bias)
    y = g.relu(d, lower_clip=0.0)
    return g, (a, b, bias, c, d, y)


def test_ops_record_methods_ports_and_uids():
    g, (a, b, bias, c, d, y) = matmul_bias_relu()
    ops = g.ops()
    assert [op["method"] for op in ops] == ["matmul", "add", "relu"]
    assert [op["name"] for op in ops] == ["matmul.0", "add.0", "relu.0"]
    assert {p: t.get_uid() for p, t in ops[0]["inputs"].items()} == {"A": 11, "B": 12}
    assert ops[1]["inputs"]["a"] == c and ops[1]["inputs"]["b"] == bias
    assert ops[2]["attrs"] == {"lower_clip": 0.0}
    # Outputs are born without uids and virtual; Python pushes every uid.
    assert [t.get_uid() for t in (c, d, y)] == [None, None, None]
    assert c.get_is_virtual() and c.get_producer() == ("matmul.0", "C")
    for uid, t in zip((21, 22, 23), (c, d, y)):
        assert t.set_uid(uid) is t
    assert [t.get_uid() for t in (c, d, y)] == [21, 22, 23]
    assert g.tensor_uids() == {11: "a", 12: "b", 13: "bias", 21: "matmul.0::C",
                               22: "add.0::OUT_0", 23: "relu.0::OUT_0"}
    assert g.query_tensor_attributes_of_uid(22) == d


def test_validate_refuses_a_tensor_without_a_pushed_uid():
    g, (_, _, _, c, d, y) = matmul_bias_relu()
    c.set_uid(21)
    y.set_uid(23)
    with pytest.raises(RuntimeError, match=r"uid ownership violated.*add\.0::OUT_0.*never assigns"):
        g.validate()
    d.set_uid(22)
    g.validate()
    assert g.is_validated()


def test_uid_collisions_name_the_holder():
    g = graph()
    g.tensor(uid=5, dim=[2], name="first")
    with pytest.raises(ValueError, match=r"uid 5 is already used by tensor 'first'"):
        g.tensor(uid=5, dim=[2], name="second")
    t = g.tensor(uid=6, dim=[2])
    with pytest.raises(ValueError, match="already used by tensor 'first'"):
        t.set_uid(5)
    assert t.set_uid(6).get_uid() == 6  # same value: allowed


def test_inferred_shapes_dtypes_and_strides():
    g, (a, b, bias, c, d, y) = matmul_bias_relu()
    for uid, t in zip((21, 22, 23), (c, d, y)):
        t.set_uid(uid)
    y.set_output(True)
    g.validate()
    assert c.get_dim() == [4, 16, 8] and c.get_stride() == [128, 8, 1]
    assert not c.get_dim_assigned()
    # Virtual intermediates take the intermediate type, outputs the io type.
    assert c.get_data_type() == FLOAT and y.get_data_type() == HALF


def test_conv_output_keeps_the_image_layout():
    g = graph()
    x = g.tensor(uid=1, dim=[4, 16, 9, 9], stride=[1296, 1, 144, 16])  # NHWC
    w = g.tensor(uid=2, dim=[32, 16, 3, 3], stride=[144, 1, 48, 16])
    y = g.conv_fprop(image=x, weight=w, pre_padding=[1, 0], post_padding=[1, 0], stride=[2, 2])
    y.set_uid(3)
    g.validate()
    # H: (9 + 1 + 1 - 3) // 2 + 1 = 5, W: (9 - 3) // 2 + 1 = 4
    assert y.get_dim() == [4, 32, 5, 4]
    assert y.get_stride() == [640, 1, 128, 32]


def test_user_set_layout_is_kept_and_flagged():
    g = graph()
    a = g.tensor(uid=1, dim=[8, 4])
    b = g.tensor(uid=2, dim=[4, 6])
    c = g.matmul(a, b).set_uid(3).set_stride([1, 8])
    g.validate()
    assert c.get_stride() == [1, 8] and c.get_stride_assigned() and not c.get_dim_assigned()


def test_outputs_that_cannot_be_inferred_must_be_set():
    g = graph()
    x = g.tensor(uid=1, dim=[4, 64], data_type=FLOAT)
    y = g.reduction(x, mode=1).set_uid(2)
    with pytest.raises(ValueError, match=r"reduction 'reduction.0': cannot infer the dims of output OUT_0"):
        g.validate()
    y.set_dim([4, 1])
    g.validate()


def test_conditional_outputs_follow_the_ir_rules():
    g = graph()
    x = g.tensor(uid=1, dim=[8, 64, 1, 1])
    s = g.tensor(uid=2, dim=[1, 64, 1, 1])
    eps = g.tensor_scalar(uid=3, value=1e-5)
    y, mean, inv = g.layernorm(x, s, s, eps, norm_forward_phase=1)  # INFERENCE
    assert y is not None and mean is None and inv is None
    y2, mean2, inv2 = g.layernorm(x, s, s, eps, norm_forward_phase=2)  # TRAINING
    assert mean2 is not None and inv2 is not None
    dx, dscale, dbias = g.rmsnorm_backward(grad=x, input=x, scale=s, inv_variance=x, has_dbias=False)
    assert dscale is not None and dbias is None
    q = g.tensor(uid=4, dim=[1, 2, 8, 16])
    assert g.sdpa(q, q, q, generate_stats=True)[1] is not None
    assert g.sdpa(q, q, q, is_inference=False)[1] is not None
    assert g.sdpa(q, q, q)[1] is None


def test_sdpa_output_shapes_and_stats_dtype():
    g = graph()
    q = g.tensor(uid=1, dim=[2, 4, 32, 64], stride=[8192, 64, 256, 1])  # BSHD in memory
    v = g.tensor(uid=2, dim=[2, 4, 48, 32], stride=[6144, 32, 128, 1])
    k = g.tensor(uid=3, dim=[2, 4, 48, 64])
    scale = g.tensor_scalar(uid=4, value=0.125, data_type=FLOAT)
    o, stats = g.sdpa(q, k, v, attn_scale=scale, generate_stats=True)
    o.set_uid(5).set_output(True)
    stats.set_uid(6).set_output(True)
    g.validate()
    assert o.get_dim() == [2, 4, 32, 32] and o.get_stride() == [4096, 32, 128, 1]
    assert stats.get_dim() == [2, 4, 32, 1] and stats.get_data_type() == FLOAT
    assert o.get_data_type() == HALF


def test_constructors_take_keywords_only():
    with pytest.raises(TypeError, match=r"backend_graph\(\) takes keyword arguments only"):
        EXT.backend_graph(HALF)
    with pytest.raises(TypeError, match=r"tensor\(\) takes keyword arguments only"):
        graph().tensor(1, [2])


def test_enum_members_are_read_through_value():
    g = EXT.backend_graph(io_data_type=DataType.HALF)
    t = g.tensor(uid=1, dim=[2], data_type=DataType.FLOAT)
    assert t.get_data_type() == FLOAT


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda g, t: g.matmul(A=t, B=t, paddin=1.0), r"unexpected keyword argument 'paddin'"),
        (lambda g, t: g.matmul(A=t, B=t, padding="x"), r"argument 'padding' must be a float, got str"),
        (lambda g, t: g.matmul(A=t), r"missing required tensor argument 'B'"),
        (lambda g, t: g.leaky_relu(t), r"missing required argument 'negative_slope'"),
        (lambda g, t: g.add(t, 2.0), r"argument 'b' must be a backend_tensor, got float.*tensor_scalar"),
        (lambda g, t: g.add(t, t, a=t), r"multiple values for argument 'a'"),
        (lambda g, t: g.conv_fprop(t, t, stride=[1, "2"]), r"argument 'stride'\[1\] must be an int"),
        (lambda g, t: g.layernorm(t, t, t, t, norm_forward_phase="TRAINING"),
         r"argument 'norm_forward_phase' must be a norm_forward_phase"),
        (lambda g, t: g.sdpa(t, t, t, generate_stats=1), r"argument 'generate_stats' must be a bool"),
        (lambda g, t: g.reshape(t, compute_data_type=FLOAT), r"unexpected keyword argument 'compute_data_type'"),
        (lambda g, t: g.tensor(dim=[2]), r"tensor\(\) missing required argument 'uid'"),
        (lambda g, t: g.tensor(uid=9, dim=[2], strides=[1]), r"unexpected keyword argument 'strides'"),
    ],
)
def test_bad_arguments_raise_type_error_naming_the_argument(call, message):
    g = graph()
    t = g.tensor(uid=1, dim=[2, 2])
    with pytest.raises(TypeError, match=message):
        call(g, t)
    assert g.ops() == []  # nothing half-recorded


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda g, t: g.reduction(t, mode=42), r"42 is not a reduction_mode value"),
        (lambda g, t: g.layernorm(t, t, t, t, norm_forward_phase=0), r"must be INFERENCE or TRAINING"),
        (lambda g, t: g.conv_fprop(t, t, padding=[1, 1], pre_padding=[1, 1]), r"either padding or pre_padding"),
        (lambda g, t: g.tensor(uid=3, dim=[2, 0]), r"every extent of dim must be > 0"),
        (lambda g, t: g.tensor(uid=3, dim=[2, 2], stride=[1]), r"stride has 1 entries but dim has 2"),
        (lambda g, t: g.tensor(uid=3, dim=[2], data_type=13), r"13 is not a data_type value"),
        (lambda g, t: g.sdpa(t, t, t, use_padding_mask=True), r"needs both seq_len_q and seq_len_kv"),
    ],
)
def test_bad_values_raise_value_error(call, message):
    g = graph()
    t = g.tensor(uid=1, dim=[2, 2])
    with pytest.raises(ValueError, match=message):
        call(g, t)


def test_tensors_of_another_graph_are_refused():
    g1, g2 = graph(), graph()
    a = g1.tensor(uid=1, dim=[2, 2])
    with pytest.raises(ValueError, match="tensor of another backend_graph"):
        g2.relu(a)


@pytest.mark.parametrize(
    "kwargs, named",
    [
        ({"use_causal_mask": True}, "use_causal_mask=True"),
        ({"diagonal_band_left_bound": 16}, "diagonal_band_left_bound=16"),
        ({"dropout": (0.1, None, None)}, "argument 'dropout'"),
        ({"score_mod": print}, "argument 'score_mod'"),
        ({"implementation": 1}, "implementation=COMPOSITE"),
        ({"use_alibi_mask": True}, "use_alibi_mask=True"),
    ],
)
def test_sdpa_features_without_a_native_attribute_decline(kwargs, named):
    g = graph()
    q = g.tensor(uid=1, dim=[1, 2, 8, 16])
    with pytest.raises(NOT_SUPPORTED, match=named):
        g.sdpa(q, q, q, **kwargs)
    assert g.ops() == []


def test_unsupported_tensor_ports_decline_and_neutral_values_pass():
    g = graph()
    q = g.tensor(uid=1, dim=[1, 2, 8, 16])
    with pytest.raises(NOT_SUPPORTED, match=r"argument 'bias' is not supported"):
        g.sdpa(q, q, q, bias=q)
    o, stats = g.sdpa(q, q, q, use_causal_mask=False, diagonal_alignment=0, dropout=None)
    assert stats is None and [op["method"] for op in g.ops()] == ["sdpa"]
    assert g.ops()[0]["name"] == "sdpa.0"  # declined calls do not consume names


def test_pointwise_inputs_of_different_rank_decline_at_validate():
    g = graph()
    a = g.tensor(uid=1, dim=[2, 8, 4])
    b = g.tensor(uid=2, dim=[4])
    g.add(a, b).set_uid(3)
    with pytest.raises(NOT_SUPPORTED, match=r"equal ranks"):
        g.validate()


def test_mutation_after_validate_invalidates_it():
    g, (_, _, _, c, d, y) = matmul_bias_relu()
    for uid, t in zip((21, 22, 23), (c, d, y)):
        t.set_uid(uid)
    g.validate()
    y.set_output(True)
    assert not g.is_validated()


def test_plan_queries_before_the_operation_graph_are_state_errors():
    g = graph()
    assert g.get_execution_plan_count() == 0
    with pytest.raises(IndexError, match="plan index 0 is out of range"):
        g.get_plan_name_at_index(0)
    with pytest.raises(RuntimeError, match="no plan is built"):
        g.execute({}, 0)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
