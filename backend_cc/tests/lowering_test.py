"""cudnn.backend.lowering on CPU: the builder calls each IR op becomes, uids, layouts and
declines, read back from the extension's own recording layer (`backend_graph.ops()`).

No GPU: when a libcudnn loads here, cuDNN also checks every descriptor
(`finalize_op_descriptors`, no handle needed); otherwise the C++ validation alone runs.
"""

import pytest

import cudnn
from cudnn.backend import loader, lowering
from cudnn.backend.sdpa_bwd_route import choose_route
from cudnn.ops import registry
from cudnn.ops.op_spec import OpGroup

EXT = loader.extension()
if EXT is None:
    raise ImportError("lowering tests need the built extension: " + loader.unavailable_reason())

from fake_cudnn import FakeExtension  # noqa: E402

DT = cudnn.data_type
TRAINING = cudnn.norm_forward_phase.TRAINING


def new_graph(**kwargs):
    return cudnn.pygraph(io_data_type=DT.HALF, intermediate_data_type=DT.FLOAT,
                         compute_data_type=DT.FLOAT, **kwargs)


def lowered_of(g, check_descriptors=True):
    g.validate()
    lowered = lowering.lower(g, EXT)
    if check_descriptors and loader.is_available():
        lowered.backend.finalize_op_descriptors()
    return lowered


#: sdpa_backward's runtime gate (the op table): older libraries cannot build its graph.
SDPA_BWD_GATE = next(s for s in EXT.op_schemas()
                     if s["method"] == "sdpa_backward")["min_runtime_version"]


def sdpa_backward_is_gated_here(g):
    """True (after checking the decline) where the loaded cuDNN is older than the gate."""
    loaded = EXT.cudnn_version() if loader.is_available() else None
    if loaded is None or loaded >= SDPA_BWD_GATE:
        return False
    g.validate()
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match=r"needs cuDNN >= 9\.21\.0"):
        lowering.lower(g, EXT)
    return True


@pytest.fixture
def native_sdpa_backward(monkeypatch):
    """Route sdpa_backward to the native descriptor, as on a device its engines run on
    (cuDNN >= 9.21 on sm_100); elsewhere it becomes the composite graph
    (sdpa_bwd_composite_test.py)."""
    monkeypatch.setattr(lowering, "route_for", lambda ext, handle: choose_route(92400, 100))


def only_op(lowered):
    (op,) = lowered.backend.ops()
    return op


# -- builder calls ---------------------------------------------------------------------
def test_matmul_bias_relu_chain_is_one_builder_call_per_node():
    g = new_graph()
    a, b, bias = g.tensor(dim=[4, 16, 32]), g.tensor(dim=[4, 32, 8]), g.tensor(dim=[1, 1, 8])
    c = g.matmul(a, b, compute_data_type=DT.FLOAT)
    d = g.add(c, bias)
    y = g.relu(d, lower_clip=0.0)
    y.set_output(True)
    lowered = lowered_of(g)
    ops = lowered.backend.ops()
    bt = lowered.tensors
    assert [op["method"] for op in ops] == ["matmul", "add", "relu"]
    assert [op["name"] for op in ops] == [n.name for n in g.nodes]
    assert ops[0]["inputs"] == {"A": bt[a], "B": bt[b]} and ops[0]["outputs"] == {"C": bt[c]}
    assert ops[1]["inputs"] == {"a": bt[c], "b": bt[bias]}
    assert ops[2]["attrs"] == {"lower_clip": 0.0}
    assert ops[0]["compute_data_type"] == DT.FLOAT.value
    assert set(lowered.backend.tensor_uids()) == {t.uid for t in (a, b, bias, c, d, y)}
    assert bt[y].get_is_virtual() is False and bt[c].get_is_virtual() is True
    assert lowered.internal_uids == frozenset()


POINTWISE = sorted(name for name, spec in registry.all_specs().items()
                   if spec.group is OpGroup.POINTWISE)
BOOLEAN_INPUTS = {"logical_and", "logical_or", "logical_not"}
BOOLEAN_OUTPUTS = BOOLEAN_INPUTS | {n for n in POINTWISE if n.startswith("cmp_")}
REQUIRED_PARAMS = {"leaky_relu": {"negative_slope": 0.1}, "leaky_relu_backward":
                   {"negative_slope": 0.1}, "gen_index": {"axis": 1}}


def test_the_table_has_all_54_pointwise_modes():
    assert len(POINTWISE) == 54


@pytest.mark.parametrize("op", POINTWISE)
def test_every_pointwise_mode_lowers_to_its_builder(op):
    spec = registry.all_specs()[op]
    g = new_graph()
    dtype = DT.BOOLEAN if op in BOOLEAN_INPUTS else DT.FLOAT
    inputs = [g.tensor(dim=[2, 3, 8], data_type=DT.BOOLEAN if port.name == "mask" else dtype,
                       name=port.name) for port in spec.input_ports]
    params = REQUIRED_PARAMS.get(op, {})
    out = getattr(g, op)(*inputs, **params)
    out.set_output(True)
    if op in BOOLEAN_OUTPUTS:
        out.set_data_type(DT.BOOLEAN)
    elif op == "gen_index":
        out.set_data_type(DT.INT32)
    op_record = only_op(lowered_of(g))
    assert op_record["method"] == spec.backend_method == op
    assert op_record["kind"] == "pointwise"
    assert [t.get_uid() for t in op_record["inputs"].values()] == [t.uid for t in inputs]
    assert list(op_record["inputs"]) == [p.name for p in spec.input_ports]
    assert op_record["attrs"] == params
    assert op_record["outputs"]["OUT_0"].get_uid() == out.uid


def test_layernorm_forward_and_backward():
    g = new_graph()
    x = g.tensor(dim=[16, 64, 1, 1])
    scale = g.tensor(dim=[1, 64, 1, 1], data_type=DT.FLOAT)
    bias = g.tensor(dim=[1, 64, 1, 1], data_type=DT.FLOAT)
    y, mean, inv = g.layernorm(x, scale, bias, g.tensor_scalar(1e-5), norm_forward_phase=TRAINING)
    dy = g.tensor(dim=[16, 64, 1, 1])
    dx, dscale, dbias = g.layernorm_backward(dy, x, scale, mean, inv)
    for t in (y, dx, dscale, dbias):
        t.set_output(True)
    lowered = lowered_of(g)
    fwd, bwd = lowered.backend.ops()
    bt = lowered.tensors
    assert fwd["method"] == "layernorm" and fwd["attrs"] == {"norm_forward_phase": TRAINING.value}
    assert list(fwd["inputs"]) == ["input", "scale", "bias", "epsilon"]
    assert fwd["outputs"] == {"Y": bt[y], "mean": bt[mean], "inv_var": bt[inv]}
    assert bt[mean].get_is_virtual() and bt[mean].get_data_type() == DT.FLOAT.value
    assert bwd["method"] == "layernorm_backward"
    assert bwd["inputs"] == {"grad": bt[dy], "input": bt[x], "scale": bt[scale],
                             "mean": bt[mean], "inv_variance": bt[inv]}
    assert bwd["outputs"] == {"DX": bt[dx], "DScale": bt[dscale], "DBias": bt[dbias]}
    epsilon = fwd["inputs"]["epsilon"]
    assert epsilon.get_is_pass_by_value() and epsilon.get_pass_by_value() == pytest.approx(1e-5)


def test_rmsnorm_forward_and_backward_without_dbias():
    g = new_graph()
    x = g.tensor(dim=[8, 128, 1, 1])
    scale = g.tensor(dim=[1, 128, 1, 1], data_type=DT.FLOAT)
    y, inv = g.rmsnorm(x, scale, None, g.tensor_scalar(1e-6), norm_forward_phase=TRAINING)
    dx, dscale, dbias = g.rmsnorm_backward(g.tensor(dim=[8, 128, 1, 1]), x, scale, inv,
                                           has_dbias=False)
    assert dbias is None
    for t in (y, dx, dscale):
        t.set_output(True)
    fwd, bwd = lowered_of(g).backend.ops()
    assert fwd["method"] == "rmsnorm" and "bias" not in fwd["inputs"]
    assert bwd["method"] == "rmsnorm_backward" and bwd["attrs"] == {"has_dbias": False}
    assert bwd["outputs"]["DBias"] is None


def test_batchnorm_instancenorm_and_genstats():
    g = new_graph()
    x = g.tensor(dim=[4, 32, 8, 8], stride=[2048, 1, 256, 32])
    per_channel = [g.tensor(dim=[1, 32, 1, 1], data_type=DT.FLOAT, name=n)
                   for n in ("scale", "bias", "running_mean", "running_var")]
    scale, bias, running_mean, running_var = per_channel
    eps, momentum = g.tensor_scalar(1e-5), g.tensor_scalar(0.1)
    bn = g.batchnorm(x, scale, bias, running_mean, running_var, eps, momentum)
    y, _, _ = g.instancenorm(x, scale, bias, eps, norm_forward_phase=TRAINING)
    sums = g.genstats(x)
    for t in (*bn, y, *sums):
        t.set_output(True)
    for t in (*bn[1:], *sums):
        t.set_data_type(DT.FLOAT)
    ops = lowered_of(g).backend.ops()
    assert [op["method"] for op in ops] == ["batchnorm", "instancenorm", "genstats"]
    assert list(ops[0]["inputs"]) == ["input", "scale", "bias", "in_running_mean",
                                      "in_running_var", "epsilon", "momentum"]
    assert [t.get_uid() for t in ops[0]["outputs"].values()] == [t.uid for t in bn]
    assert ops[1]["attrs"] == {"norm_forward_phase": TRAINING.value}
    assert [t.get_uid() for t in ops[2]["outputs"].values()] == [t.uid for t in sums]


def test_conv_fprop_dgrad_wgrad_and_reduction():
    g = new_graph()
    x, w, dy = g.tensor(dim=[2, 8, 6, 6]), g.tensor(dim=[4, 8, 3, 3]), g.tensor(dim=[2, 4, 6, 6])
    conv = dict(padding=[1, 1], stride=[1, 1], dilation=[1, 1])
    y = g.conv_fprop(x, w, **conv)
    dx = g.conv_dgrad(dy, w, **conv)
    dw = g.conv_wgrad(x, dy, **conv)
    dw.set_dim([4, 8, 3, 3])
    r = g.reduction(y, mode=cudnn.reduction_mode.MAX)
    r.set_dim([2, 4, 1, 1])
    for t in (dx, dw, r):
        t.set_output(True)
    lowered = lowered_of(g)
    ops = lowered.backend.ops()
    assert [op["method"] for op in ops] == ["conv_fprop", "conv_dgrad", "conv_wgrad", "reduction"]
    assert all(op["attrs"] == conv for op in ops[:3])
    assert list(ops[1]["inputs"]) == ["loss", "filter"]
    assert list(ops[2]["inputs"]) == ["image", "loss"]
    assert ops[3]["attrs"] == {"mode": cudnn.reduction_mode.MAX.value}


def test_sdpa_forward_and_backward_use_the_native_builders(native_sdpa_backward):
    g = new_graph()
    q = g.tensor(dim=[2, 4, 128, 64], stride=[128 * 4 * 64, 64, 4 * 64, 1])
    scale = g.tensor_scalar(0.125)
    o, stats = g.sdpa(q, q, q, attn_scale=scale, generate_stats=True)
    dq, dk, dv = g.sdpa_backward(q, q, q, o, q, stats, attn_scale=scale)
    for t in (o, stats, dq, dk, dv):
        t.set_output(True)
    if sdpa_backward_is_gated_here(g):
        return
    lowered = lowered_of(g)
    fwd, bwd = lowered.backend.ops()
    bt = lowered.tensors
    assert fwd["method"] == "sdpa" and fwd["attrs"] == {"generate_stats": True}
    assert fwd["inputs"]["attn_scale"] == bwd["inputs"]["attn_scale"] == bt[scale]
    assert bwd["method"] == "sdpa_backward"
    assert bwd["inputs"]["o"] == bt[o] and bwd["inputs"]["stats"] == bt[stats]
    assert bt[stats].get_data_type() == DT.FLOAT.value
    assert lowered.internal_uids == frozenset() and lowered.notes == ()


def test_sdpa_backward_alone_declares_every_tensor_of_the_descriptor(
        native_sdpa_backward):
    """The GPU suite's backward graph (BSHD q/k/v/o/dO from torch, forward Stats, a float
    scale): nine distinct non-virtual tensors at the IR's uids and layouts, plus the scale."""
    b, h, s, d = 2, 4, 128, 64
    bshd = dict(dim=[b, h, s, d], stride=[s * h * d, d, h * d, 1])
    g = new_graph()
    q, k, v, o, do = (g.tensor(**bshd, name=n) for n in ("q", "k", "v", "o", "dO"))
    stats = g.tensor(dim=[b, h, s, 1], stride=[h * s, s, 1, 1], data_type=DT.FLOAT,
                     name="stats")
    grads = g.sdpa_backward(q, k, v, o, do, stats, attn_scale=0.125)
    for t in grads:
        t.set_output(True)
    if sdpa_backward_is_gated_here(g):
        return
    lowered = lowered_of(g)
    op = only_op(lowered)
    bt = lowered.tensors
    assert op["method"] == "sdpa_backward" and op["attrs"] == {}
    ir_inputs = {"q": q, "k": k, "v": v, "o": o, "dO": do, "stats": stats}
    assert {p: t for p, t in op["inputs"].items() if p != "attn_scale"} == \
        {p: bt[t] for p, t in ir_inputs.items()}
    assert op["outputs"] == dict(zip(("dQ", "dK", "dV"), (bt[t] for t in grads)))
    for t in (*ir_inputs.values(), *grads):
        backend = bt[t]
        assert backend.get_uid() == t.uid and not backend.get_is_virtual()
        assert (backend.get_dim(), backend.get_stride()) == (list(t.dim), list(t.stride))
    for t in grads:  # the descriptor gets every output layout explicitly
        assert bt[t].get_dim() == bshd["dim"] and bt[t].get_stride_assigned()
        assert bt[t].get_data_type() == DT.HALF.value
    (internal,) = lowered.internal_uids
    scale = op["inputs"]["attn_scale"]
    assert scale.get_uid() == internal and scale.get_is_pass_by_value()
    assert (scale.get_dim(), scale.get_data_type()) == ([1, 1, 1, 1], DT.FLOAT.value)
    uids = lowered.backend.tensor_uids()
    assert len(uids) == len(set(uids)) == 10


def test_a_float_attn_scale_becomes_an_internal_scalar_above_every_ir_uid():
    g = new_graph()
    q = g.tensor(dim=[1, 2, 64, 32])
    o, _ = g.sdpa(q, q, q, attn_scale=0.125)
    o.set_output(True)
    g.tensor(dim=[3], name="unwired")  # its uid counts too: a pack may name it
    lowered = lowered_of(g)
    (internal,) = lowered.internal_uids
    assert internal > max(t.uid for t in g.all_tensors())
    scale = lowered.backend.query_tensor_attributes_of_uid(internal)
    assert scale.get_pass_by_value() == 0.125 and scale.get_name() == "sdpa.0::attn_scale"
    assert scale.get_is_pass_by_value()


def test_reshape_and_concatenate_take_no_compute_data_type():
    g = new_graph()
    a, b = g.tensor(dim=[2, 3, 4]), g.tensor(dim=[2, 5, 4])
    cat = g.concatenate([a, b], axis=1, compute_data_type=DT.FLOAT)
    flat = g.reshape(cat)
    flat.set_dim([2, 32]).set_output(True)
    ops = lowered_of(g, check_descriptors=False).backend.ops()
    assert [op["method"] for op in ops] == ["concatenate", "reshape"]
    assert list(ops[0]["inputs"]) == ["inputs_0", "inputs_1"]
    assert [op["compute_data_type"] for op in ops] == [0, 0]


# -- broadcast operands ----------------------------------------------------------------
def test_lower_rank_inputs_are_padded_with_leading_ones():
    g = new_graph()
    x = g.tensor(dim=[4, 6, 8])
    bias = g.tensor(dim=[8])
    a = g.tensor(dim=[16, 8])
    y = g.add(x, bias)
    z = g.matmul(a, g.tensor(dim=[3, 8, 5]))
    for t in (y, z):
        t.set_output(True)
    lowered = lowered_of(g)
    bt = lowered.tensors
    assert (bt[bias].get_dim(), bt[bias].get_stride()) == ([1, 1, 8], [8, 8, 1])
    assert (bt[a].get_dim(), bt[a].get_stride()) == ([1, 16, 8], [128, 8, 1])
    assert bt[bias].get_uid() == bias.uid
    assert tuple(bias.dim) == (8,) and tuple(a.dim) == (16, 8)  # the IR keeps its own layout


def test_a_scalar_broadcasts_into_a_lower_rank_pointwise():
    g = new_graph()
    x = g.tensor(dim=[5, 7])
    two = g.tensor_scalar(2.0)
    y = g.mul(x, two)
    y.set_output(True)
    lowered = lowered_of(g)
    assert len(y.dim) == 4  # the IR broadcast the [1, 1, 1, 1] scalar
    assert lowered.tensors[x].get_dim() == [1, 1, 5, 7]
    assert lowered.tensors[two].get_pass_by_value() == 2.0


def test_a_produced_lower_rank_operand_is_a_decline():
    g = new_graph()
    x = g.tensor(dim=[4, 8], data_type=DT.FLOAT)
    r = g.reduction(x, mode=cudnn.reduction_mode.ADD)
    r.set_dim([4, 1])
    y = g.add(g.tensor(dim=[2, 4, 8]), r)
    y.set_output(True)
    g.validate()
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="can only pad graph inputs"):
        lowering.lower(g, EXT)


def test_one_input_needed_at_two_ranks_is_a_decline():
    g = new_graph()
    bias = g.tensor(dim=[8])
    for t in (g.add(g.tensor(dim=[4, 8]), bias), g.add(g.tensor(dim=[2, 4, 8]), bias)):
        t.set_output(True)
    g.validate()
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="needed at several ranks"):
        lowering.lower(g, EXT)


# -- layouts ------------------------------------------------------------------------------
def test_only_caller_set_output_layouts_are_pushed():
    g = new_graph()
    x = g.tensor(dim=[2, 8, 6, 6], stride=[288, 1, 48, 8])  # NHWC
    w = g.tensor(dim=[4, 8, 3, 3], stride=[72, 1, 24, 8])
    y = g.conv_fprop(x, w, padding=[1, 1])
    y.set_output(True)
    c = g.matmul(g.tensor(dim=[1, 4, 8]), g.tensor(dim=[1, 8, 2]))
    c.set_stride([8, 1, 4]).set_output(True)  # caller-set strides carry their dims along
    lowered = lowered_of(g)
    by, bc = lowered.tensors[y], lowered.tensors[c]
    assert not by.get_dim_assigned() and not by.get_stride_assigned()
    assert bc.get_dim_assigned() and bc.get_stride() == [8, 1, 4]
    # the backend inferred NHWC for y; the IR learns it once copied back, still as inferred
    assert tuple(y.stride) == (144, 36, 6, 1)
    lowered.copy_back_layouts()
    assert tuple(y.stride) == tuple(by.get_stride()) == (144, 1, 24, 4)
    assert not y.stride_assigned and not y.dim_assigned
    assert tuple(c.stride) == (8, 1, 4) and c.stride_assigned


def test_push_ops_push_dims_but_not_inferred_strides():
    g = new_graph()
    x = g.tensor(dim=[4, 64], data_type=DT.FLOAT)
    r = g.reduction(x, mode=cudnn.reduction_mode.ADD, out_dims=[4, 1])
    r.set_output(True)
    bt = lowered_of(g).tensors[r]
    assert bt.get_dim() == [4, 1] and bt.get_dim_assigned()
    assert not bt.get_stride_assigned()


def test_sdpa_pushes_inferred_dims_and_strides():
    g = new_graph()
    q = g.tensor(dim=[1, 2, 64, 32])
    o, _ = g.sdpa(q, q, q)
    o.set_output(True)
    assert not o.dim_assigned and not o.stride_assigned
    bt = lowered_of(g).tensors[o]
    assert bt.get_dim_assigned() and bt.get_stride_assigned()
    assert bt.get_dim() == list(o.dim) and bt.get_stride() == list(o.stride)


# -- uids ---------------------------------------------------------------------------------
def test_every_backend_uid_is_the_ir_uid_even_for_user_chosen_uids():
    g = new_graph()
    a = g.tensor(dim=[8, 8], uid=1000)
    y = g.relu(a)
    y.set_uid(7).set_output(True)
    lowered = lowered_of(g)
    assert lowered.tensors[a].get_uid() == 1000 and lowered.tensors[y].get_uid() == 7
    assert set(lowered.backend.tensor_uids()) == {1000, 7}


def test_verify_uids_catches_a_backend_uid_that_drifted():
    g = new_graph()
    y = g.relu(g.tensor(dim=[8, 8]))
    y.set_output(True)
    lowered = lowered_of(g, check_descriptors=False)
    lowered.tensors[y].set_uid(y.uid + 100)
    with pytest.raises(AssertionError, match=f"IR uid {y.uid}, backend uid {y.uid + 100}"):
        lowering.verify_uids(lowered)


def test_verify_uids_catches_a_tensor_nobody_pushed():
    g = new_graph()
    y = g.relu(g.tensor(dim=[8, 8]))
    y.set_output(True)
    lowered = lowered_of(g, check_descriptors=False)
    lowered.backend.tensor(uid=4242, dim=[1])
    with pytest.raises(AssertionError, match=r"uids nobody pushed: \[4242\]"):
        lowering.verify_uids(lowered)


# -- declines -----------------------------------------------------------------------------
def declined(g, match, ext=None):
    g.validate()
    ext = ext or FakeExtension()
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match=match):
        lowering.lower(g, ext)
    return ext


def test_linear_attention_declines_before_anything_is_recorded():
    g = new_graph()
    t, h, k = 64, 2, 64
    q = g.tensor(dim=[t, h, k])
    gate = g.tensor(dim=[t, h], data_type=DT.FLOAT)
    out = g.gdn(q, q, q, gate, gate, g.tensor(dim=[2], data_type=DT.INT32))
    (out[0] if isinstance(out, list) else out).set_output(True)
    ext = declined(g, r"^No valid engine configs for GDN: node 'gdn.0': gdn has no backend")
    assert ext.graphs == []


class WithoutMethods(FakeExtension):
    """An extension built without some op methods (an older build of this backend)."""

    def __init__(self, *methods):
        super().__init__()
        self.missing = set(methods)

    def op_schemas(self):
        return [s for s in super().op_schemas() if s["method"] not in self.missing]


@pytest.mark.parametrize("build, method", [
    (lambda g, x: g.transpose(x, permutation=[1, 0]), "transpose"),
    (lambda g, x: g.slice(x, slices=[slice(0, 2), slice(0, 4)]), "slice"),
])
def test_ops_the_extension_cannot_build_decline(build, method):
    g = new_graph()
    out = build(g, g.tensor(dim=[4, 8]))
    out.set_output(True)
    ext = declined(g, f"this cuDNN backend has no {method}\\(\\) builder",
                   ext=WithoutMethods(method))
    assert ext.graphs == []


def test_python_only_arguments_decline():
    g = new_graph()
    q = g.tensor(dim=[1, 2, 64, 32])
    o, _ = g.sdpa(q, q, q, softmax_precision=DT.FLOAT)
    o.set_output(True)
    declined(g, "attr 'softmax_precision' is python-only")


def test_arguments_the_builder_does_not_take_decline(native_sdpa_backward):
    g = new_graph()
    q = g.tensor(dim=[1, 2, 64, 32])
    o, stats = g.sdpa(q, q, q, generate_stats=True)
    dq, _, _ = g.sdpa_backward(q, q, q, o, q, stats, score_mod=lambda *a: None)
    dq.set_output(True)
    declined(g, r"backend_graph.sdpa_backward\(\) takes no 'score_mod' argument")


def test_out_ports_the_backend_cannot_write_decline():
    g = new_graph()
    q = g.tensor(dim=[1, 2, 64, 32])
    score_max = g.tensor(dim=[1, 2, 64, 1], data_type=DT.FLOAT)
    o, _ = g.sdpa(q, q, q, score_max=score_max)
    o.set_output(True)
    declined(g, r"sdpa\(\) cannot take 'score_max': the native cuDNN SDPA descriptor")


def test_the_extension_s_own_declines_surface_as_the_ir_error():
    g = new_graph()
    q = g.tensor(dim=[1, 2, 64, 32])
    o, _ = g.sdpa(q, q, q, use_causal_mask=True)
    o.set_output(True)
    g.validate()
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="use_causal_mask"):
        lowering.lower(g, EXT)


def test_graph_options_the_backend_cannot_honour_decline():
    g = new_graph(sm_count=8)
    g.relu(g.tensor(dim=[4, 4])).set_output(True)
    declined(g, r"cannot honour pygraph\(sm_count=8\)")


def test_a_declined_lowering_leaves_the_ir_untouched():
    """The conv records, then the extension itself refuses rope_backward (its descriptor
    needs cuDNN 9.25): the decline comes mid-recording and the IR keeps its layouts."""
    g = new_graph()
    x = g.tensor(dim=[2, 8, 6, 6], stride=[288, 1, 48, 8])
    y = g.conv_fprop(x, g.tensor(dim=[4, 8, 3, 3]), padding=[1, 1])
    z = g.rope_backward(y, g.tensor(dim=[6, 1, 1, 6], data_type=DT.FLOAT))
    z.set_output(True)
    g.validate()
    before = (tuple(y.dim), tuple(y.stride), y.uid)
    # named by the headers (9.24 lack it) or the loaded library, whichever is older
    declined(g, r"rope_backward.*9\.25")
    assert (tuple(y.dim), tuple(y.stride), y.uid) == before


def test_lowering_needs_a_validated_graph():
    g = new_graph()
    g.relu(g.tensor(dim=[4, 4])).set_output(True)
    with pytest.raises(RuntimeError, match="validated graph"):
        lowering.lower(g, EXT)


def test_only_graphs_with_sdpa_backward_ask_for_its_route(monkeypatch):
    asked = []
    monkeypatch.setattr(lowering, "route_for",
                        lambda ext, handle: asked.append(handle) or choose_route(91900, 90))
    g = new_graph()
    y = g.matmul(g.tensor(dim=[2, 8, 16]), g.tensor(dim=[2, 16, 4]))
    y.set_output(True)
    lowered_of(g)
    assert asked == []
    g = new_graph()
    q, k, v = (g.tensor(dim=[1, 2, 64, 32]) for _ in range(3))
    stats = g.tensor(dim=[1, 2, 64, 1], data_type=DT.FLOAT)
    for t in g.sdpa_backward(q, k, v, q, q, stats):
        t.set_output(True)
    g.validate()
    lowered = lowering.lower(g, EXT, handle=0x5150)
    assert asked == [0x5150]
    assert "mul" in {op["method"] for op in lowered.backend.ops()}


def test_without_a_handle_sdpa_backward_takes_the_composite_graph():
    """No device to ask: the composite graph, which cuDNN's fused-attention engines run on
    every architecture the native descriptor does and more."""
    g = new_graph()
    q, k, v = (g.tensor(dim=[1, 2, 64, 32]) for _ in range(3))
    stats = g.tensor(dim=[1, 2, 64, 1], data_type=DT.FLOAT)
    for t in g.sdpa_backward(q, k, v, q, q, stats):
        t.set_output(True)
    lowered = lowered_of(g)
    assert "sdpa_backward" not in {op["method"] for op in lowered.backend.ops()}
    (note,) = lowered.notes
    assert "composite fused-attention graph" in note


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
