"""The composite sdpa_backward lowering on CPU: the builder calls it records (ops, tensors,
dims/strides, data types, virtual flags, uids, workspace-resident scratch) and what it
declines. The route is pinned to what the H200 gets (cuDNN 9.19 on sm_90); when a libcudnn
loads here, cuDNN also finalizes every descriptor (no GPU needed).
"""
import pytest

import cudnn
from cudnn.backend import loader, lowering, sdpa_bwd_composite
from cudnn.backend.sdpa_bwd_route import choose_route

EXT = loader.extension()
if EXT is None:
    raise ImportError("composite tests need the built extension: " + loader.unavailable_reason())

DT = cudnn.data_type
H200 = choose_route(91900, 90)
FLOAT, HALF = DT.FLOAT.value, DT.HALF.value

MHA_METHODS = ["mul", "reduction", "mul",                      # D = rowsum(dO * O) * 1
               "matmul", "mul", "sub", "exp", "reshape",       # P, P^T
               "matmul",                                       # dV
               "matmul", "sub", "mul", "mul", "reshape",       # dS, dS^T
               "matmul",                                       # dK
               "reshape", "matmul", "identity"]                # K, dQ accumulator, dQ


@pytest.fixture(autouse=True)
def h200_route(monkeypatch):
    monkeypatch.setattr(lowering, "route_for", lambda ext, handle: H200)


def bshd(b, h, s, d):
    return dict(dim=[b, h, s, d], stride=[s * h * d, d, h * d, 1])


class Case:
    """An IR graph holding one sdpa_backward node (BSHD q/k/v/o/dO, BHS1 stats)."""

    def __init__(self, b=2, h=4, hk=None, s_q=64, s_kv=96, d=32, d_v=None, io=DT.HALF,
                 **kwargs):
        hk, d_v = hk or h, d_v or d
        self.dims = dict(b=b, h=h, hk=hk, s_q=s_q, s_kv=s_kv, d=d, d_v=d_v)
        self.g = g = cudnn.pygraph(io_data_type=io, intermediate_data_type=DT.FLOAT,
                                   compute_data_type=DT.FLOAT)
        self.q = g.tensor(**bshd(b, h, s_q, d), name="q")
        self.k = g.tensor(**bshd(b, hk, s_kv, d), name="k")
        self.v = g.tensor(**bshd(b, hk, s_kv, d_v), name="v")
        self.o = g.tensor(**bshd(b, h, s_q, d_v), name="o")
        self.do = g.tensor(**bshd(b, h, s_q, d_v), name="dO")
        self.stats = g.tensor(dim=[b, h, s_q, 1], stride=[h * s_q, s_q, 1, 1],
                              data_type=DT.FLOAT, name="stats")
        kwargs.setdefault("attn_scale", 0.125)
        self.grads = g.sdpa_backward(self.q, self.k, self.v, self.o, self.do, self.stats,
                                     **kwargs)
        for t in self.grads:
            t.set_output(True)

    def lower(self):
        self.g.validate()
        lowered = lowering.lower(self.g, EXT)
        if loader.is_available():
            lowered.backend.finalize_op_descriptors()
        return lowered


def by_name(lowered, step):
    (op,) = [op for op in lowered.backend.ops() if op["name"].endswith("::" + step)]
    return op


def out_of(lowered, step):
    (t,) = by_name(lowered, step)["outputs"].values()
    return t


def test_mha_records_the_fused_attention_pattern_one_builder_call_per_op():
    case = Case()
    lowered = case.lower()
    ops = lowered.backend.ops()
    assert [op["method"] for op in ops] == MHA_METHODS
    assert all(op["name"].startswith("sdpa_backward.0::") for op in ops)
    computing = [op for op in ops if op["method"] != "reshape"]
    assert {op["compute_data_type"] for op in computing} == {FLOAT}
    assert by_name(lowered, "rowsum_dO_O")["attrs"] == {"mode": cudnn.reduction_mode.ADD.value}
    (note,) = lowered.notes
    assert "composite fused-attention graph" in note and "9.19.0 < 9.21.0" in note


def test_graph_inputs_keep_their_uids_and_k_v_enter_transposed_over_their_own_memory():
    case = Case()
    lowered = case.lower()
    bt = lowered.tensors
    for t in (case.q, case.o, case.do, case.stats):
        assert bt[t].get_uid() == t.uid and not bt[t].get_is_virtual()
        assert (bt[t].get_dim(), bt[t].get_stride()) == (list(t.dim), list(t.stride))
    b, hk, s_kv, d = case.k.dim
    for t in (case.k, case.v):
        assert bt[t].get_uid() == t.uid and not bt[t].get_is_virtual()
        assert bt[t].get_dim() == [b, hk, d, s_kv]
        assert bt[t].get_stride() == [t.stride[0], t.stride[1], t.stride[3], t.stride[2]]
    q_kt = by_name(lowered, "matmul_Q_KT")["inputs"]
    assert q_kt == {"A": bt[case.q], "B": bt[case.k]}
    assert by_name(lowered, "matmul_dO_VT")["inputs"] == {"A": bt[case.do], "B": bt[case.v]}
    # K comes back to [b, hk, s_kv, d] (its own layout) for dQ = dS K
    k = out_of(lowered, "untranspose_K")
    assert by_name(lowered, "untranspose_K")["inputs"] == {"input": bt[case.k]}
    assert (k.get_dim(), k.get_stride()) == (list(case.k.dim), list(case.k.stride))
    assert k.get_is_virtual() and k.get_data_type() == HALF


def test_added_tensors_get_fresh_uids_above_the_graph_s_and_every_uid_is_pushed():
    case = Case()
    lowered = case.lower()
    ir_uids = {t.uid for t in case.g.all_tensors()}
    added = set(lowered.backend.tensor_uids()) - ir_uids
    assert added == set(lowered.internal_uids)
    assert min(added) > max(ir_uids)
    assert len(added) == 15 + 2  # 15 intermediates, the scale and the 1 of the pattern
    lowered.verify_uids()
    scalars = {t.get_name().split("::")[-1]: t.get_pass_by_value()
               for t in lowered.backend.tensors() if t.get_is_pass_by_value()}
    assert scalars == {"attn_scale": 0.125, "one": 1.0}
    for step in ("mul_S_scale", "mul_dS_scale"):
        (scale,) = [t for p, t in by_name(lowered, step)["inputs"].items() if p == "b"]
        assert scale.get_pass_by_value() == 0.125


def test_intermediates_are_virtual_with_explicit_layouts_except_two_workspace_scratches():
    case = Case(b=2, h=4, s_q=64, s_kv=96, d=32)
    lowered = case.lower()
    scores = [2, 4, 64, 96]
    for step in ("matmul_Q_KT", "mul_S_scale", "sub_S_stats", "exp_P", "matmul_dO_VT",
                 "sub_dP_softmax_sum", "mul_P", "mul_dS_scale"):
        t = out_of(lowered, step)
        assert t.get_is_virtual() and t.get_dim() == scores, step
        assert t.get_stride() == [4 * 64 * 96, 64 * 96, 96, 1] and t.get_data_type() == FLOAT
    for step in ("transpose_P", "transpose_dS"):  # view-only transposes, narrowed to I/O type
        t = out_of(lowered, step)
        assert t.get_is_virtual() and t.get_dim() == [2, 4, 96, 64], step
        assert t.get_stride() == [4 * 64 * 96, 64 * 96, 1, 96] and t.get_data_type() == HALF
    rows = out_of(lowered, "mul_rowsum_one")
    acc = out_of(lowered, "matmul_dS_K")
    for t in (rows, acc):
        assert not t.get_is_virtual() and t.get_workspace_resident()
        assert t.get_data_type() == FLOAT
    assert (rows.get_dim(), rows.get_stride()) == ([2, 4, 64, 1], [256, 64, 1, 1])
    assert (acc.get_dim(), acc.get_stride()) == ([2, 4, 64, 32], [8192, 2048, 32, 1])
    assert lowered.backend.workspace_tensors() == [
        {"uid": rows.get_uid(), "offset": 0, "bytes": 2 * 4 * 64 * 4},
        {"uid": acc.get_uid(), "offset": 2048, "bytes": 2 * 4 * 64 * 32 * 4}]
    assert lowered.backend.workspace_tensor_bytes() == 2048 + 65536


def test_gradients_are_the_ir_outputs_at_their_uids_and_layouts():
    case = Case()
    lowered = case.lower()
    dq, dk, dv = case.grads
    bt = lowered.tensors
    assert by_name(lowered, "copy_dQ")["outputs"] == {"OUT_0": bt[dq]}
    assert by_name(lowered, "matmul_dK")["outputs"] == {"C": bt[dk]}
    assert by_name(lowered, "matmul_dV")["outputs"] == {"C": bt[dv]}
    for t in case.grads:
        assert bt[t].get_uid() == t.uid and not bt[t].get_is_virtual()
        assert (bt[t].get_dim(), bt[t].get_stride()) == (list(t.dim), list(t.stride))
        assert bt[t].get_stride_assigned() and bt[t].get_data_type() == HALF


def test_grouped_heads_form_dk_dv_per_query_head_and_sum_each_group():
    case = Case(h=8, hk=2, d=32, d_v=16)
    lowered = case.lower()
    methods = [op["method"] for op in lowered.backend.ops()]
    assert methods.count("reduction") == 3
    dq, dk, dv = case.grads
    bt = lowered.tensors
    for port, grad, d in (("dV", dv, 16), ("dK", dk, 32)):
        full = out_of(lowered, f"matmul_{port}_per_q_head")
        assert full.get_is_virtual() and full.get_dim() == [2, 8, 96, d]
        assert full.get_data_type() == HALF
        total = by_name(lowered, f"sum_{port}_over_head_group")
        assert total["inputs"] == {"input": full} and total["outputs"] == {"OUT_0": bt[grad]}
        assert bt[grad].get_dim() == [2, 2, 96, d]
    assert out_of(lowered, "untranspose_K").get_dim() == [2, 2, 96, 32]


def test_without_attn_scale_the_pattern_scales_by_one():
    lowered = Case(attn_scale=None).lower()
    for step in ("mul_S_scale", "mul_dS_scale"):
        assert by_name(lowered, step)["inputs"]["b"].get_pass_by_value() == 1.0


def test_a_scale_tensor_is_used_as_given():
    g = cudnn.pygraph(io_data_type=DT.HALF, intermediate_data_type=DT.FLOAT,
                      compute_data_type=DT.FLOAT)
    q, k, v = (g.tensor(**bshd(1, 2, 64, 32)) for _ in range(3))
    stats = g.tensor(dim=[1, 2, 64, 1], stride=[128, 64, 1, 1], data_type=DT.FLOAT)
    scale = g.tensor_scalar(0.25)
    grads = g.sdpa_backward(q, k, v, q, q, stats, attn_scale=scale)
    for t in grads:
        t.set_output(True)
    g.validate()
    lowered = lowering.lower(g, EXT)
    assert by_name(lowered, "mul_S_scale")["inputs"]["b"] == lowered.tensors[scale]
    assert by_name(lowered, "mul_dS_scale")["inputs"]["b"] == lowered.tensors[scale]


# -- declines ---------------------------------------------------------------------------
def declined(case, pattern, composite_reason=True):
    case.g.validate()
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match=pattern) as info:
        lowering.lower(case.g, EXT)
    if composite_reason:
        assert "used because cuDNN 9.19.0 < 9.21.0" in str(info.value)


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(use_causal_mask=True), "cannot take use_causal_mask=True"),
    (dict(use_deterministic_algorithm=True), "cannot take use_deterministic_algorithm=True"),
    (dict(diagonal_alignment=cudnn.diagonal_alignment.BOTTOM_RIGHT),
     "cannot take diagonal_alignment=BOTTOM_RIGHT"),
    (dict(sliding_window_length=16), "cannot take sliding_window_length=16"),
    (dict(compute_data_type=DT.HALF), "computes in FLOAT; compute_data_type=HALF"),
])
def test_arguments_the_pattern_cannot_carry_decline(kwargs, pattern):
    declined(Case(**kwargs), pattern)


def test_neutral_arguments_are_accepted():
    Case(use_causal_mask=False, diagonal_alignment=cudnn.diagonal_alignment.TOP_LEFT,
         use_deterministic_algorithm=False).lower()


def test_tensor_ports_the_pattern_cannot_carry_decline():
    case = Case(b=1, h=2, s_q=64, s_kv=64, d=32)
    g = case.g
    bias = g.tensor(dim=[1, 2, 64, 64], name="bias")
    extra = g.sdpa_backward(case.q, case.k, case.v, case.o, case.do, case.stats, bias=bias)
    for t in extra:
        t.set_output(True)
    # two nodes, and the second one has a bias
    declined(case, r"must be the only node of its graph.*'sdpa_backward.1'")
    declined(case, r"node 'sdpa_backward.1': the composite sdpa_backward graph cannot take "
                   r"'bias'")


@pytest.mark.parametrize("shared", ["q_is_k", "k_is_v"])
def test_k_and_v_need_their_own_tensors(shared):
    g = cudnn.pygraph(io_data_type=DT.HALF, intermediate_data_type=DT.FLOAT,
                      compute_data_type=DT.FLOAT)
    x, y = g.tensor(**bshd(1, 2, 64, 32)), g.tensor(**bshd(1, 2, 64, 32))
    stats = g.tensor(dim=[1, 2, 64, 1], stride=[128, 64, 1, 1], data_type=DT.FLOAT)
    q, k, v = (x, x, y) if shared == "q_is_k" else (y, x, x)
    for t in g.sdpa_backward(q, k, v, y, y, stats):
        t.set_output(True)
    g.validate()
    port, others = ("k", r"\['q'\]") if shared == "q_is_k" else ("k", r"\['v'\]")
    with pytest.raises(cudnn.cudnnGraphNotSupportedError,
                       match=f"describes '{port}' transposed under its own uid, so it cannot "
                             f"be the same tensor as {others}"):
        lowering.lower(g, EXT)


def test_ragged_layouts_decline():
    case = Case(b=2, h=2, s_q=64, s_kv=64, d=32)
    offsets = case.g.tensor(dim=[3, 1, 1, 1], data_type=DT.INT32, name="q_offsets")
    case.q.set_ragged_offset(offsets)
    declined(case, r"has no ragged \(packed-sequence\) layouts; 'q' has a ragged offset")


def test_inputs_without_a_data_type_narrow_to_the_graph_s_io_type():
    g = cudnn.pygraph(io_data_type=DT.BFLOAT16, intermediate_data_type=DT.FLOAT,
                      compute_data_type=DT.FLOAT)
    q, k, v, o, do = (g.tensor(**bshd(1, 2, 64, 32)) for _ in range(5))
    stats = g.tensor(dim=[1, 2, 64, 1], stride=[128, 64, 1, 1], data_type=DT.FLOAT)
    for t in g.sdpa_backward(q, k, v, o, do, stats):
        t.set_output(True)
    g.validate()
    lowered = lowering.lower(g, EXT)
    for step in ("transpose_P", "transpose_dS", "untranspose_K"):
        assert out_of(lowered, step).get_data_type() == DT.BFLOAT16.value, step


def test_a_graph_with_other_nodes_declines():
    case = Case()
    extra = case.g.relu(case.grads[0])
    extra.set_output(True)
    declined(case, r"must be the only node of its graph.*\['relu\.0'\]")


def test_libraries_before_9_6_decline_the_accumulator_they_cannot_zero():
    case = Case()
    (node,) = case.g.nodes
    assert sdpa_bwd_composite.decline_reasons(node, case.g, 92400) == []
    (reason,) = sdpa_bwd_composite.decline_reasons(node, case.g, 90500)
    assert "needs cuDNN >= 9.6.0" in reason and "90500" in reason


def test_python_only_arguments_still_decline_on_their_own():
    case = Case(softmax_precision=DT.FLOAT)
    declined(case, "attr 'softmax_precision' is python-only", composite_reason=False)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
