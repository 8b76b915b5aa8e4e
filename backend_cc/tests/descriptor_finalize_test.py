"""Every op kind materializes into descriptors that a real cuDNN 9 finalizes.

Needs libcudnn (e.g. the nvidia-cudnn-cu13 wheel) but no GPU: tensor and operation
descriptors are finalized without a handle. Skips when no libcudnn is reachable.
"""

import pytest

from cudnn.backend import loader

if not loader.is_available():
    pytest.skip("no libcudnn: " + loader.unavailable_reason(), allow_module_level=True)

EXT = loader.load()
FLOAT, HALF, INT32, BOOLEAN = 1, 3, 5, 12
TRAINING, INFERENCE = 2, 1


class Builder:
    """A graph whose tensors get consecutive uids, as the IR would push them."""

    def __init__(self):
        self.g = EXT.backend_graph(io_data_type=HALF, intermediate_data_type=FLOAT,
                                   compute_data_type=FLOAT)
        self.next_uid = 1

    def uid(self):
        self.next_uid += 1
        return self.next_uid

    def t(self, dim, **kw):
        return self.g.tensor(uid=self.uid(), dim=dim, **kw)

    def scalar(self, value):
        return self.g.tensor_scalar(uid=self.uid(), value=value, data_type=FLOAT)

    def outputs(self, *tensors, data_type=None):
        for t in tensors:
            if t is None:
                continue
            t.set_uid(self.uid()).set_output(True)
            if data_type is not None:
                t.set_data_type(data_type)
        return tensors


def nhwc(n, c, h, w):
    return dict(dim=[n, c, h, w], stride=[c * h * w, 1, w * c, c])


def bshd(b, h, s, d):
    return dict(dim=[b, h, s, d], stride=[s * h * d, d, h * d, 1])


def pointwise_case(method):
    def build(b):
        schema = next(s for s in EXT.op_schemas() if s["method"] == method)
        logical = method.startswith("logical")
        inputs = []
        for port in schema["inputs"]:
            dt = BOOLEAN if logical or port["name"] == "mask" else FLOAT
            inputs.append(b.t([2, 8, 16], data_type=dt))
        kw = {"leaky_relu": {"negative_slope": 0.1}, "leaky_relu_backward": {"negative_slope": 0.1},
              "relu": {"lower_clip": 0.0, "upper_clip": 6.0}, "swish": {"swish_beta": 1.5},
              "gen_index": {"axis": 1}}.get(method, {})
        out = getattr(b.g, method)(*inputs, **kw)
        dt = INT32 if method == "gen_index" else BOOLEAN if method.startswith(("cmp_", "logical")) else None
        b.outputs(out, data_type=dt)
    return build


def matmul_bias_relu(b):
    c = b.g.matmul(b.t([1, 16, 32]), b.t([1, 32, 8]))
    y = b.g.relu(b.g.add(c, b.t([1, 1, 8])))
    b.outputs(y)
    c.set_uid(b.uid())
    b.g.ops()[1]["outputs"]["OUT_0"].set_uid(b.uid())


def conv_fprop(b):
    b.outputs(b.g.conv_fprop(b.t(**nhwc(4, 16, 8, 8)), b.t(**nhwc(32, 16, 3, 3)), padding=[1, 1]))


def conv_dgrad(b):
    b.outputs(b.g.conv_dgrad(loss=b.t(**nhwc(4, 32, 8, 8)), filter=b.t(**nhwc(32, 16, 3, 3)), padding=[1, 1]))


def conv_wgrad(b):
    dw = b.g.conv_wgrad(image=b.t(**nhwc(4, 16, 8, 8)), loss=b.t(**nhwc(4, 32, 8, 8)), padding=[1, 1])
    b.outputs(dw.set_dim([32, 16, 3, 3]))


def reduction(b):
    b.outputs(b.g.reduction(b.t([4, 64, 32], data_type=FLOAT), mode=1).set_dim([4, 64, 1]), data_type=FLOAT)


def layernorm(phase):
    def build(b):
        y, mean, inv = b.g.layernorm(b.t([8, 128, 1, 1]), b.t([1, 128, 1, 1], data_type=FLOAT),
                                     b.t([1, 128, 1, 1], data_type=FLOAT), b.scalar(1e-5),
                                     norm_forward_phase=phase)
        b.outputs(y)
        b.outputs(mean, inv, data_type=FLOAT)
    return build


def rmsnorm(phase):
    def build(b):
        y, inv = b.g.rmsnorm(input=b.t([8, 128, 1, 1]), scale=b.t([1, 128, 1, 1], data_type=FLOAT),
                             epsilon=b.scalar(1e-5), norm_forward_phase=phase)
        b.outputs(y)
        b.outputs(inv, data_type=FLOAT)
    return build


def layernorm_backward(b):
    stat = dict(dim=[8, 1, 1, 1], data_type=FLOAT)
    dx, ds, db = b.g.layernorm_backward(grad=b.t([8, 128, 1, 1]), input=b.t([8, 128, 1, 1]),
                                        scale=b.t([1, 128, 1, 1], data_type=FLOAT),
                                        mean=b.t(**stat), inv_variance=b.t(**stat))
    b.outputs(dx)
    b.outputs(ds, db, data_type=FLOAT)


def rmsnorm_backward(b):
    dx, ds, db = b.g.rmsnorm_backward(grad=b.t([8, 128, 1, 1]), input=b.t([8, 128, 1, 1]),
                                      scale=b.t([1, 128, 1, 1], data_type=FLOAT),
                                      inv_variance=b.t([8, 1, 1, 1], data_type=FLOAT), has_dbias=False)
    assert db is None
    b.outputs(dx)
    b.outputs(ds, data_type=FLOAT)


def batchnorm(b):
    channel = dict(dim=[1, 32, 1, 1], data_type=FLOAT)
    outs = b.g.batchnorm(input=b.t(**nhwc(8, 32, 4, 4)), scale=b.t(**channel), bias=b.t(**channel),
                         in_running_mean=b.t(**channel), in_running_var=b.t(**channel),
                         epsilon=b.scalar(1e-5), momentum=b.scalar(0.1))
    b.outputs(outs[0])
    b.outputs(*outs[1:], data_type=FLOAT)


def batchnorm_backward(b):
    channel = dict(dim=[1, 32, 1, 1], data_type=FLOAT)
    dx, ds, db = b.g.batchnorm_backward(grad=b.t(**nhwc(8, 32, 4, 4)), input=b.t(**nhwc(8, 32, 4, 4)),
                                        scale=b.t(**channel), mean=b.t(**channel), inv_variance=b.t(**channel))
    b.outputs(dx)
    b.outputs(ds, db, data_type=FLOAT)


def instancenorm(b):
    channel = dict(dim=[1, 32, 1, 1], data_type=FLOAT)
    y, mean, inv = b.g.instancenorm(b.t(**nhwc(8, 32, 4, 4)), b.t(**channel), b.t(**channel),
                                    b.scalar(1e-5), norm_forward_phase=TRAINING)
    b.outputs(y)
    b.outputs(mean, inv, data_type=FLOAT)


def adalayernorm(b):
    y, mean, inv = b.g.adalayernorm(b.t([2, 64, 128]), b.t([2, 1, 128], data_type=FLOAT),
                                    b.t([2, 1, 128], data_type=FLOAT), b.scalar(1e-5),
                                    norm_forward_phase=TRAINING)
    b.outputs(y)
    b.outputs(mean, inv, data_type=FLOAT)
    b.g.validate()
    assert mean.get_dim() == [2, 64, 1]  # axis 0 is never reduced


def genstats(b):
    b.outputs(*b.g.genstats(b.t(**nhwc(8, 32, 4, 4))), data_type=FLOAT)


def reshape(b):
    b.outputs(b.g.reshape(b.t([8, 32])).set_dim([8, 4, 8]))


def concatenate(b):
    y = b.g.concatenate([b.t([8, 32]), b.t([8, 16])], axis=1)
    b.outputs(y)


def sdpa(stats, padding=False):
    def build(b):
        kw = dict(attn_scale=b.scalar(0.125), generate_stats=stats)
        if padding:
            kw.update(use_padding_mask=True, seq_len_q=b.t([2, 1, 1, 1], data_type=INT32),
                      seq_len_kv=b.t([2, 1, 1, 1], data_type=INT32))
        o, st = b.g.sdpa(b.t(**bshd(2, 4, 128, 64)), b.t(**bshd(2, 4, 128, 64)), b.t(**bshd(2, 4, 128, 64)), **kw)
        b.outputs(o, st)
    return build


SDPA_BWD_GATE = next(s for s in EXT.op_schemas()
                     if s["method"] == "sdpa_backward")["min_runtime_version"]


def sdpa_backward(b):
    q, k, v, o, do = (b.t(**bshd(2, 4, 128, 64)) for _ in range(5))
    stats = b.t([2, 4, 128, 1], data_type=FLOAT)
    args = (q, k, v, o, do, stats)
    if EXT.cudnn_version() < SDPA_BWD_GATE:  # an older library: declined, saying why
        with pytest.raises(EXT.graph_not_supported_error(), match=r"needs cuDNN >= 9\.21\.0"):
            b.g.sdpa_backward(*args, attn_scale=b.scalar(0.125))
        b.outputs(b.g.relu(q))  # something to finalize
        return
    b.outputs(*b.g.sdpa_backward(*args, attn_scale=b.scalar(0.125)))


CASES = {
    **{f"pointwise_{s['method']}": pointwise_case(s["method"])
       for s in EXT.op_schemas() if s["kind"] == "pointwise"},
    "matmul_bias_relu": matmul_bias_relu,
    "conv_fprop_nhwc": conv_fprop,
    "conv_dgrad_nhwc": conv_dgrad,
    "conv_wgrad_nhwc": conv_wgrad,
    "reduction_add": reduction,
    "layernorm_training": layernorm(TRAINING),
    "layernorm_inference": layernorm(INFERENCE),
    "rmsnorm_training": rmsnorm(TRAINING),
    "rmsnorm_inference": rmsnorm(INFERENCE),
    "layernorm_backward": layernorm_backward,
    "rmsnorm_backward_no_dbias": rmsnorm_backward,
    "batchnorm_running_stats": batchnorm,
    "batchnorm_backward": batchnorm_backward,
    "instancenorm": instancenorm,
    "adalayernorm": adalayernorm,
    "genstats": genstats,
    "reshape": reshape,
    "concatenate": concatenate,
    "sdpa_stats": sdpa(True),
    "sdpa_inference": sdpa(False),
    "sdpa_padding_mask": sdpa(True, padding=True),
    "sdpa_backward": sdpa_backward,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_op_descriptors_finalize(case):
    b = Builder()
    CASES[case](b)
    b.g.finalize_op_descriptors()
    assert b.g.is_validated()
    with pytest.raises(RuntimeError, match="frozen"):
        b.g.ops()[0]["outputs"][next(iter(b.g.ops()[0]["outputs"]))].set_name("late")


def test_cudnn_rejection_names_the_descriptor_and_leaves_the_graph_mutable():
    b = Builder()
    c = b.g.matmul(b.t([2, 16, 32]), b.t([2, 32, 8]))
    b.outputs(c.set_dim([2, 16, 9]))
    with pytest.raises(EXT.CudnnBackendError,
                       match=r"cudnnBackendFinalize\(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR\) "
                             r"for op 'matmul.0' \(matmul\) failed: CUDNN_STATUS_BAD_PARAM"):
        b.g.finalize_op_descriptors()
    c.set_dim([2, 16, 8])  # still mutable: the failed attempt kept nothing
    b.g.finalize_op_descriptors()


def test_operation_graph_needs_a_gpu_handle_or_yields_engine_configs():
    b = Builder()
    matmul_bias_relu(b)
    try:
        b.g.build_operation_graph()
    except EXT.CudnnBackendError as err:  # no GPU here: cudnnCreate is the first GPU call
        assert "cudnnCreate failed" in str(err)
        return
    entries = b.g.create_execution_plans([0])  # heur_mode A
    assert entries == list(range(b.g.get_execution_plan_count()))
    for i in entries:
        engine_id, knobs = b.g.get_engine_and_knobs_at_index(i)
        assert 0 <= engine_id < 10000 and all(isinstance(k, int) for k in knobs)
        assert b.g.get_plan_name_at_index(i).startswith(f"eng{engine_id}")


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
