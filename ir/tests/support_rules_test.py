"""validate() raises cudnnGraphNotSupportedError for graphs no engine can run, and the
graph reports which nodes keep it off the backend (python-only)."""
import re

import pytest

import cudnn

D = cudnn.data_type


def _la(graph, op="gdn", T=6, H=2, K=8, V=4, **extra):
    t = graph.tensor
    ports = dict(q=t([T, H, K]), k=t([T, H, K]), v=t([T, H, V]), g=t([T, H]),
                 cu_seqlens=t([3], data_type=D.INT32))
    if op.startswith("mamba2"):
        ports["a"] = t([H])
    else:
        ports["beta"] = t([T, H])
    if op.endswith("_bwd"):
        ports["dO"] = t([T, H, V])
    ports.update(extra)
    return getattr(graph, op)(**ports)


LA_RULES = {
    "a_log_without_safe_gate": (lambda g: _la(g, a_log=g.tensor([2])),
                                "a_log requires safe_gate=True"),
    "linear_gate_with_safe_gate": (lambda g: _la(g, gate_domain="linear", safe_gate=True),
                                   "incompatible with safe_gate"),
    "neg_eigval_without_sigmoid": (lambda g: _la(g, allow_neg_eigval=True),
                                   "allow_neg_eigval requires use_beta_sigmoid"),
    "overwrite_without_final_state": (
        lambda g: _la(g, initial_state=g.tensor([2, 2, 4, 8]), overwrite_initial_state=True),
        "overwrite_initial_state requires"),
    "state_indices_without_initial_state": (
        lambda g: _la(g, state_indices=g.tensor([2], data_type=D.INT32)),
        "state_indices requires initial_state"),
    "bwd_checkpoints_without_input": (
        lambda g: _la(g, "gdn_bwd", checkpoint_every_n_tokens=4),
        "requires the state_checkpoints input"),
    "values_without_checkpoints": (lambda g: _la(g, output_values=True),
                                   "output_values requires checkpoint_every_n_tokens > 0"),
    "bwd_values_without_checkpoints": (
        lambda g: _la(g, "gdn_bwd", values=g.tensor([6, 2, 4])),
        "values requires the state_checkpoints input"),
    "lower_bound_without_safe_gate": (
        lambda g: _la(g, "kda", g=g.tensor([6, 2, 8]), gate_lower_bound=-3.0),
        "gate_lower_bound requires safe_gate"),
    "mamba_dt_range": (lambda g: _la(g, "mamba2", dt_min=1.0, dt_max=0.5),
                       "dt_min (1.0) must be <= dt_max (0.5)"),
    "mamba_pre_gate_without_z": (lambda g: _la(g, "mamba2", output_pre_gate=True),
                                 "output_pre_gate requires the z gate"),
}


@pytest.mark.parametrize("build,reason", LA_RULES.values(), ids=LA_RULES.keys())
def test_linear_attention_rules(build, reason):
    g = cudnn.pygraph(io_data_type=D.BFLOAT16, intermediate_data_type=D.FLOAT)
    build(g)
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match=re.escape(reason)):
        g.validate()
    assert not g.state.validated


def test_linear_attention_valid_combination_passes():
    g = cudnn.pygraph(io_data_type=D.BFLOAT16, intermediate_data_type=D.FLOAT)
    _la(g, a_log=g.tensor([2]), safe_gate=True, use_beta_sigmoid=True, allow_neg_eigval=True,
        initial_state=g.tensor([2, 2, 4, 8]), output_final_state=True,
        overwrite_initial_state=True)
    g.validate()
    assert g.state.validated


def test_linear_attention_values_round_trip_validates():
    """The forward's values output ([T, HO, V]) and the backward reading them with the
    checkpoints; a values input of the wrong shape names the port."""
    g = cudnn.pygraph(io_data_type=D.BFLOAT16, intermediate_data_type=D.FLOAT)
    outs = _la(g, checkpoint_every_n_tokens=4, output_values=True)
    assert list(outs[3].dim) == [6, 2, 4]
    g.validate()
    g = cudnn.pygraph(io_data_type=D.BFLOAT16, intermediate_data_type=D.FLOAT)
    _la(g, "gdn_bwd", checkpoint_every_n_tokens=4, state_checkpoints=g.tensor([3, 2, 4, 8]),
        values=g.tensor([6, 2, 4]))
    g.validate()
    g = cudnn.pygraph(io_data_type=D.BFLOAT16, intermediate_data_type=D.FLOAT)
    with pytest.raises(cudnn.OpValueError, match=re.escape("argument 'values': expected dims [6, 2, 4]")):
        _la(g, "gdn_bwd", checkpoint_every_n_tokens=4, state_checkpoints=g.tensor([3, 2, 4, 8]),
            values=g.tensor([6, 2, 5]))
        g.validate()


def _qkv(g, n=3, dims=(1, 2, 8, 16)):
    return [g.tensor(list(dims)) for _ in range(n)]


SDPA_RULES = {
    "bias_on_fp8": (lambda g: g.sdpa_fp8(*_qkv(g), *_qkv(g, 6, (1, 1, 1, 1)),
                                         bias=g.tensor([1, 2, 8, 8])),
                    "bias is not supported on sdpa_fp8"),
    "dsink_without_sink": (lambda g: g.sdpa_backward(*_qkv(g, 5), g.tensor([1, 2, 8, 1]),
                                                     dSink_token=g.tensor([1, 2, 1, 1])),
                           "dSink_token requires sink_token"),
    "lengths_without_padding_mask": (
        lambda g: g.sdpa(*_qkv(g), seq_len_q=g.tensor([1], data_type=D.INT32),
                         seq_len_kv=g.tensor([1], data_type=D.INT32)),
        "require use_padding_mask=True"),
    "one_sided_lengths": (
        lambda g: g.sdpa(*_qkv(g), seq_len_q=g.tensor([1], data_type=D.INT32),
                         use_padding_mask=True),
        "must be given together"),
    "prefolded_with_scale": (lambda g: g.sdpa(*_qkv(g), attn_scale=0.5,
                                              attn_scale_prefolded=True),
                             "attn_scale to stay unset"),
}


@pytest.mark.parametrize("build,reason", SDPA_RULES.values(), ids=SDPA_RULES.keys())
def test_sdpa_rules(build, reason):
    g = cudnn.pygraph(io_data_type=D.HALF, intermediate_data_type=D.FLOAT)
    build(g)
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match=re.escape(reason)):
        g.validate()


def test_python_only_reasons():
    g = cudnn.pygraph()
    q, k, v = _qkv(g)
    g.sdpa(q, k, v)
    assert g.python_only_reasons() == []
    g.sdpa(q, k, v, softmax_precision=D.FLOAT, name="fp32_softmax")
    assert g.python_only_reasons() == [
        "node 'fp32_softmax': attr 'softmax_precision' is python-only"]
    g.sdpa(q, k, v, kv_mask=g.tensor([1, 1, 1, 16], data_type=D.BOOLEAN), name="masked")
    assert "node 'masked': port 'kv_mask' is python-only" in g.python_only_reasons()
    h = cudnn.pygraph()
    _la(h)
    assert h.python_only_reasons() == ["gdn has no backend lowering"]
    c = cudnn.pygraph()
    c.block_scale_dequantize(c.tensor([1, 4, 2, 3, 3]), c.tensor([1, 4, 2, 3, 3]),
                             block_size=[1, 1, 1, 1, 1])
    assert c.python_only_reasons() == []
    c.conv_fprop(c.tensor([1, 4, 5, 5]), c.tensor([2, 4, 3, 3]))
    assert any("5-element block_size" in r for r in c.python_only_reasons())


def test_validate_reports_missing_dims_with_node_and_port():
    g = cudnn.pygraph(io_data_type=D.HALF)
    g.reduction(g.tensor([2, 3]), mode=cudnn.reduction_mode.MAX, name="r")
    with pytest.raises(ValueError, match="node 'r' \\(reduction\\), output port 'OUT_0'.*no dims"):
        g.validate()


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
