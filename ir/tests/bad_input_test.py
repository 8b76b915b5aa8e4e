"""Bad builder input: every error names the op, the argument, what was expected and what
was given, and a rejected call leaves the graph unchanged."""
import pytest

import cudnn

D = cudnn.data_type


def _la_inputs(g, T=6, H=2, K=8, V=4):
    return dict(q=g.tensor([T, H, K], data_type=D.BFLOAT16),
                k=g.tensor([T, H, K], data_type=D.BFLOAT16),
                v=g.tensor([T, H, V], data_type=D.BFLOAT16),
                g=g.tensor([T, H], data_type=D.FLOAT), beta=g.tensor([T, H]),
                cu_seqlens=g.tensor([3], data_type=D.INT32))


def _call(g, op, **overrides):
    if op.startswith("gdn"):
        kwargs = _la_inputs(g)
    else:
        kwargs = {}
    kwargs.update(overrides)
    return getattr(g, op)(**kwargs)


# (id, builder call, error type, op, argument, text in expected, text in given)
CASES = [
    ("wrong_type_tensor", lambda g: g.add("x", g.tensor([2])),
     cudnn.OpTypeError, "add", "a", "cudnn Tensor or a framework array", "str 'x'"),
    ("wrong_type_attr", lambda g: g.gen_index(g.tensor([2, 3]), axis=1.5),
     cudnn.OpTypeError, "gen_index", "axis", "an int", "float 1.5"),
    ("bool_is_not_int", lambda g: _call(g, "gdn", checkpoint_every_n_tokens=True),
     cudnn.OpTypeError, "gdn", "checkpoint_every_n_tokens", "an int", "bool True"),
    ("wrong_enum", lambda g: g.reduction(g.tensor([2, 3]), mode=1),
     cudnn.OpTypeError, "reduction", "mode", "cudnn.reduction_mode member", "int 1"),
    ("wrong_rank", lambda g: _call(g, "gdn", q=g.tensor([6, 16])),
     cudnn.OpValueError, "gdn", "q", "rank 3", "dims [6, 16] (rank 2)"),
    ("incompatible_matmul", lambda g: g.matmul(g.tensor([4, 5]), g.tensor([6, 3])),
     cudnn.OpValueError, "matmul", "B", "B.dim[-2] == A.dim[-1] = 5", "B.dim [6, 3]"),
    ("incompatible_broadcast", lambda g: g.mul(g.tensor([2, 3]), g.tensor([4, 3])),
     cudnn.OpValueError, "mul", "b", "broadcast-compatible with a [2, 3]", "b.dim [4, 3]"),
    ("la_token_count", lambda g: _call(g, "gdn", v=g.tensor([7, 2, 4])),
     cudnn.OpValueError, "gdn", "v", "T, the token count", "v.dim [7, 2, 4]"),
    ("la_heads", lambda g: _call(g, "gdn", k=g.tensor([6, 3, 8])),
     cudnn.OpValueError, "gdn", "k", "head count dividing HO = 2", "3 heads"),
    ("unknown_kwarg", lambda g: _call(g, "gdn", output_final_sate=True),
     cudnn.OpTypeError, "gdn", "output_final_sate", "did you mean 'output_final_state'",
     "unexpected keyword output_final_sate=bool True"),
    ("wrong_dtype", lambda g: _call(g, "gdn", cu_seqlens=g.tensor([3], data_type=D.FLOAT)),
     cudnn.OpValueError, "gdn", "cu_seqlens", "one of INT32, INT64", "FLOAT"),
    ("missing_required_port", lambda g: _call(g, "gdn", beta=None),
     cudnn.OpTypeError, "gdn", "beta", "(required)", "None"),
    ("below_minimum", lambda g: _call(g, "gdn", checkpoint_every_n_tokens=-1),
     cudnn.OpValueError, "gdn", "checkpoint_every_n_tokens", ">= 0", "int -1"),
    ("not_a_choice", lambda g: _call(g, "gdn", gate_domain="exp"),
     cudnn.OpValueError, "gdn", "gate_domain", "one of ['log', 'linear']", "str 'exp'"),
    ("other_graph", lambda g: g.exp(cudnn.pygraph().tensor([2])),
     cudnn.OpValueError, "exp", "input", "a tensor of this graph", "another graph"),
    ("bad_out_dims_key", lambda g: g.rope(g.tensor([2, 4]), g.tensor([2, 4]),
                                          out_dims={"Y": [2, 4]}),
     cudnn.OpValueError, "rope", "out_dims", "outputs ['OUT_0']", "'Y'"),
    ("reduction_dims", lambda g: g.reduction(g.tensor([2, 3]), mode=cudnn.reduction_mode.ADD,
                                             out_dims=[3, 1]),
     cudnn.OpValueError, "reduction", "out_dims", "reduced axes set to 1", "[3, 1]"),
    ("conv_window", lambda g: g.conv_fprop(g.tensor([1, 2, 2, 2]), g.tensor([4, 2, 3, 3])),
     cudnn.OpValueError, "conv_fprop", "weight", "window that fits", "[1, 4, 0, 0]"),
    ("transpose_perm", lambda g: g.transpose(g.tensor([2, 3]), permutation=[0, 0]),
     cudnn.OpValueError, "transpose", "permutation", "a permutation of 0..1", "[0, 0]"),
    ("sdpa_gqa", lambda g: g.sdpa(g.tensor([1, 4, 8, 16]), g.tensor([1, 3, 8, 16]),
                                  g.tensor([1, 3, 8, 16])),
     cudnn.OpValueError, "sdpa", "k", "dividing H_q = 4", "k.dim [1, 3, 8, 16]"),
    ("sdpa_dropout", lambda g: g.sdpa(*(g.tensor([1, 1, 4, 8]) for _ in range(3)),
                                      dropout=(1.0, g.tensor([1]), g.tensor([1]))),
     cudnn.OpValueError, "sdpa", "dropout", "probability in [0, 1)", "1.0"),
    ("list_port", lambda g: g.concatenate(g.tensor([2]), axis=0),
     cudnn.OpTypeError, "concatenate", "inputs", "a list of", "Tensor 'tensor_0'"),
    ("compute_dtype", lambda g: g.exp(g.tensor([2]), compute_data_type="half"),
     cudnn.OpTypeError, "exp", "compute_data_type", "cudnn.data_type", "str 'half'"),
]


@pytest.mark.parametrize("call,error,op,argument,expected,given", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_error_names_op_argument_expected_and_given(call, error, op, argument, expected, given):
    g = cudnn.pygraph()
    with pytest.raises(error) as err:
        call(g)
    e = err.value
    assert (e.op, e.argument) == (op, argument)
    assert expected in e.expected, e.expected
    assert given in e.given, e.given
    assert str(e) == f"{op}: argument '{argument}': expected {e.expected}; got {e.given}"


def test_rejected_call_leaves_graph_unchanged():
    g = cudnn.pygraph()
    np = pytest.importorskip("numpy")
    kwargs = _la_inputs(g)
    kwargs["dt_bias"] = np.zeros((2,), dtype=np.float32)  # would be auto-described
    kwargs["q"] = g.tensor([6, 16])  # but q has the wrong rank
    tensors = g.all_tensors()
    with pytest.raises(cudnn.OpValueError):
        g.gdn(**kwargs)
    assert g.nodes == [] and g.all_tensors() == tensors and g.auto_bindings() == {}
    g.validate()
    g.exp(g.tensor([2]))  # counters untouched: the first node is still exp.0
    assert g.nodes[0].name == "exp.0"


def test_tensor_setter_errors_name_the_setter():
    g = cudnn.pygraph()
    t = g.tensor([2, 3], name="x")
    with pytest.raises(cudnn.OpTypeError, match="tensor 'x'.set_dim: argument 'dim'"):
        t.set_dim("23")
    with pytest.raises(cudnn.OpValueError, match="non-negative extents"):
        t.set_dim([2, -3])
    with pytest.raises(cudnn.OpTypeError, match="set_data_type"):
        t.set_data_type("float")
    with pytest.raises(cudnn.OpValueError, match="alignment_value"):
        t.set_alignment_value(0)
    with pytest.raises(AttributeError, match="read-only or unknown"):
        t.dims = [1]
    with pytest.raises(cudnn.OpTypeError, match="tensor: argument 'colour'"):
        g.tensor([1], colour=3)


def test_duplicate_node_name_is_rejected():
    g = cudnn.pygraph()
    g.exp(g.tensor([2]), name="e")
    with pytest.raises(cudnn.OpValueError, match="not yet used"):
        g.exp(g.tensor([2]), name="e")


def test_out_port_rules():
    g = cudnn.pygraph()
    q = g.tensor([1, 1, 4, 8])
    produced = g.exp(q)
    with pytest.raises(cudnn.OpValueError, match="no other node writes"):
        g.sdpa(q, q, q, rng_dump=produced)
    with pytest.raises(cudnn.OpValueError, match="not read before"):
        g.sdpa(q, q, q, rng_dump=q)


def test_set_uid_moves_the_auto_binding_with_the_tensor():
    np = pytest.importorskip("numpy")
    g = cudnn.pygraph(io_data_type=D.FLOAT)
    a, b = np.ones((2, 3), np.float32), np.zeros((3, 4), np.float32)
    g.matmul(a, b)
    ta, tb = (g.nodes[0].inputs[p] for p in ("A", "B"))
    tb.set_uid(ta.uid)            # B takes A's uid: A is renumbered, both arrays follow
    bindings = g.auto_bindings()
    assert bindings[ta.uid] is a and bindings[tb.uid] is b and len(bindings) == 2
    ta.set_uid(100)
    bindings = g.auto_bindings()
    assert bindings[100] is a and bindings[tb.uid] is b and len(bindings) == 2


@pytest.mark.parametrize("edit", [
    lambda t: t.dim.__setitem__(0, "x"), lambda t: t.dim.append(-1),
    lambda t: t.stride.extend([2**63]), lambda t: t.dim.insert(0, True),
    lambda t: t.dim.__iadd__([1.5]),
])
def test_in_place_layout_edits_take_only_valid_extents(edit):
    g = cudnn.pygraph()
    t = g.tensor([2, 3], name="t")
    g.validate()
    with pytest.raises(cudnn.OpArgumentError, match="tensor 't'"):
        edit(t)
    assert t.dim == [2, 3] and t.stride == [3, 1]
    assert g.state.validated, "a refused edit changes nothing"
    t.dim[0] = 5
    assert t.dim == [5, 3] and not g.state.validated


def test_validate_refuses_output_dims_the_op_cannot_produce():
    g = cudnn.pygraph(io_data_type=D.FLOAT)
    c = g.matmul(g.tensor([2, 5, 7]), g.tensor([2, 7, 3]))
    c.set_dim([1, 1])
    with pytest.raises(cudnn.OpValueError, match=r"matmul: argument 'C': expected dims "
                                                 r"\[2, 5, 3\] for output 'C'"):
        g.validate()
    c.set_dim([2, 5, 3])
    g.validate()


@pytest.mark.parametrize("call", [
    lambda g: g.tensor([2, 2**63]), lambda g: g.tensor([2], uid=2**63),
    lambda g: g.tensor([2]).set_uid(2**64), lambda g: g.tensor([2], stride=[2**63]),
    lambda g: g.gen_index(g.tensor([2, 3]), axis=2**63),
])
def test_values_beyond_int64_fail_in_the_builder(call):
    g = cudnn.pygraph()
    with pytest.raises(cudnn.OpValueError, match="2\\*\\*63|int64"):
        call(g)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
