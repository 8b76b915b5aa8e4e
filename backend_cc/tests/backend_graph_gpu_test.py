"""GPU tests: backend_graph graphs built directly, planned by cuDNN's heuristics, executed
with torch CUDA buffers, and checked against float64 references on fresh random inputs.

Run on a GPU machine, from the repository root, after building the extension in place
(`pip install --no-build-isolation -e .`):
  python3 -m pytest backend_cc/tests/backend_graph_gpu_test.py -q
"""

import math

import pytest

torch = pytest.importorskip("torch", reason="GPU tests need torch")

from cudnn.backend import loader  # noqa: E402
from cudnn.backend.sdpa_bwd_route import choose_route, sm_from_device_json  # noqa: E402

# skip marks rather than module-level skips: Bazel runs this file as a script first
if not torch.cuda.is_available():
    _SKIP = "no CUDA device"
elif not loader.is_available():
    _SKIP = "no libcudnn: " + loader.unavailable_reason()
else:
    _SKIP = None
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_SKIP is not None, reason=str(_SKIP))]

EXT = loader.load() if _SKIP is None else None
FLOAT, HALF, INT32 = 1, 3, 5
HEUR_A, HEUR_FALLBACK = 0, 2
TRAINING = 2
# fp16 storage (eps 2^-11) with fp32 accumulation: a few fp16 ulps of the largest value.
REL_TOL = {"fp16_out": 4e-3, "fp16_grad": 2e-2}


@pytest.fixture(scope="module")
def handle():
    h = EXT.create_handle()
    EXT.set_stream(h, torch.cuda.current_stream().cuda_stream)
    yield h
    EXT.destroy_handle(h)


def rel_err(out, ref):
    out64 = out.double()
    return ((out64 - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()


class Runner:
    """Builds a graph whose uids are pushed from here, and executes it with torch tensors."""

    def __init__(self, handle):
        self.handle = handle
        self.g = EXT.backend_graph(io_data_type=HALF, intermediate_data_type=FLOAT,
                                   compute_data_type=FLOAT, handle=handle)
        self.buffers = {}
        self.next_uid = 100

    def uid(self):
        self.next_uid += 1
        return self.next_uid

    def input(self, value, data_type=HALF):
        t = self.g.tensor(uid=self.uid(), dim=list(value.shape), stride=list(value.stride()),
                          data_type=data_type)
        self.buffers[t.get_uid()] = value
        return t

    def scalar(self, value):
        return self.g.tensor_scalar(uid=self.uid(), value=value, data_type=FLOAT)

    def outputs(self, *specs):
        """Marks outputs; each spec is a tensor (fp16) or (tensor, torch dtype, data_type).

        Every output gets its uid before validate() runs (which refuses uid-less tensors);
        buffers are then laid out from the dims/strides the graph inferred.
        """
        specs = [s if isinstance(s, tuple) else (s, torch.float16, None) for s in specs]
        for t, _, data_type in specs:
            t.set_uid(self.uid()).set_output(True)
            if data_type is not None:
                t.set_data_type(data_type)
        self.g.validate()
        buffers = []
        for t, torch_dtype, _ in specs:
            buf = torch.empty_strided(t.get_dim(), t.get_stride(), dtype=torch_dtype, device="cuda")
            self.buffers[t.get_uid()] = buf
            buffers.append(buf)
        return buffers

    def virtual(self, t):
        t.set_uid(self.uid())
        return t

    def run(self):
        self.g.build_operation_graph()
        created = self.g.create_execution_plans([HEUR_A, HEUR_FALLBACK])
        assert created, "cuDNN proposed no engine config"
        selected = self.g.build_plans()
        self.execute(selected)
        return selected

    def execute(self, index, graph=None):
        graph = graph or self.g
        size = graph.get_workspace_size_plan_at_index(index)
        workspace = torch.empty(max(size, 1), dtype=torch.uint8, device="cuda")
        pack = {uid: buf.data_ptr() for uid, buf in self.buffers.items()}
        graph.execute_plan_at_index(pack, workspace.data_ptr() if size else 0, index, self.handle)
        torch.cuda.synchronize()


def randn(*shape, scale=1.0):
    return (torch.randn(*shape, device="cuda") * scale).half()


def test_matmul_bias_relu(handle):
    r = Runner(handle)
    a, b, bias = randn(3, 64, 128), randn(3, 128, 96), randn(1, 1, 96)
    c = r.virtual(r.g.matmul(r.input(a), r.input(b)))
    d = r.virtual(r.g.add(c, r.input(bias)))
    (out,) = r.outputs(r.g.relu(d))
    r.run()
    ref = torch.relu(a.double() @ b.double() + bias.double())
    assert rel_err(out, ref) < REL_TOL["fp16_out"]


def test_replay_and_serialize_reproduce_the_result(handle):
    r = Runner(handle)
    a, b = randn(2, 64, 64), randn(2, 64, 32)
    (out,) = r.outputs(r.g.matmul(r.input(a), r.input(b)))
    selected = r.run()
    first = out.clone()
    engine_id, knobs = r.g.get_engine_and_knobs_at_index(selected)
    replay = r.g.create_execution_plan(engine_id, knobs)
    assert r.g.get_engine_and_knobs_at_index(replay) == (engine_id, knobs)
    out.zero_()
    r.execute(replay)
    assert torch.equal(out, first)

    blob = r.g.serialize(selected)
    fresh = EXT.backend_graph(handle=handle)
    index = fresh.deserialize(blob)
    out.zero_()
    r.execute(index, graph=fresh)
    assert torch.equal(out, first)


def test_conv_fprop_nhwc(handle):
    r = Runner(handle)
    x = randn(4, 32, 16, 16).to(memory_format=torch.channels_last)
    w = randn(64, 32, 3, 3, scale=0.2).to(memory_format=torch.channels_last)
    (out,) = r.outputs(r.g.conv_fprop(r.input(x), r.input(w), padding=[1, 1], stride=[1, 1], dilation=[1, 1]))
    assert out.is_contiguous(memory_format=torch.channels_last)
    r.run()
    ref = torch.nn.functional.conv2d(x.double(), w.double(), padding=1)
    assert rel_err(out, ref) < REL_TOL["fp16_out"]


def test_layernorm_training_forward(handle):
    r = Runner(handle)
    n, c = 16, 256
    x = randn(n, c, 1, 1)
    scale = torch.rand(1, c, 1, 1, device="cuda") + 0.5
    bias = torch.randn(1, c, 1, 1, device="cuda")
    y, mean, inv = r.g.layernorm(r.input(x), r.input(scale, FLOAT), r.input(bias, FLOAT),
                                 r.scalar(1e-5), norm_forward_phase=TRAINING)
    out, mean_out, inv_out = r.outputs(y, (mean, torch.float32, FLOAT), (inv, torch.float32, FLOAT))
    r.run()
    x64 = x.double().reshape(n, c)
    mu = x64.mean(dim=1)
    var = x64.var(dim=1, unbiased=False)
    ref = ((x64 - mu[:, None]) / torch.sqrt(var[:, None] + 1e-5)) * scale.double().reshape(1, c) \
        + bias.double().reshape(1, c)
    assert rel_err(out.reshape(n, c), ref) < REL_TOL["fp16_out"]
    assert rel_err(mean_out.reshape(n), mu) < 1e-4
    assert rel_err(inv_out.reshape(n), 1.0 / torch.sqrt(var + 1e-5)) < 1e-4


def test_rmsnorm_inference_forward(handle):
    r = Runner(handle)
    n, c = 8, 512
    x = randn(n, c, 1, 1)
    scale = torch.rand(1, c, 1, 1, device="cuda") + 0.5
    y, inv = r.g.rmsnorm(input=r.input(x), scale=r.input(scale, FLOAT), epsilon=r.scalar(1e-6),
                         norm_forward_phase=1)
    assert inv is None
    (out,) = r.outputs(y)
    r.run()
    x64 = x.double().reshape(n, c)
    ref = x64 / torch.sqrt((x64 * x64).mean(dim=1, keepdim=True) + 1e-6) * scale.double().reshape(1, c)
    assert rel_err(out.reshape(n, c), ref) < REL_TOL["fp16_out"]


def bshd(b, h, s, d):
    # Logical [B, H, S, D] over a [B, S, H, D] buffer, as attention kernels prefer.
    return torch.randn(b, s, h, d, device="cuda").half().permute(0, 2, 1, 3)


def attention_reference(q, k, v, scale):
    s = (q.double() @ k.double().transpose(-1, -2)) * scale
    p = torch.softmax(s, dim=-1)
    return p @ v.double(), torch.logsumexp(s, dim=-1, keepdim=True)


def sdpa_forward(handle, q, k, v, scale):
    r = Runner(handle)
    o, stats = r.g.sdpa(r.input(q), r.input(k), r.input(v), attn_scale=r.scalar(scale),
                        generate_stats=True)
    o_buf, stats_buf = r.outputs(o, (stats, torch.float32, None))
    r.run()
    return o_buf, stats_buf


def test_sdpa_forward_native(handle):
    b, h, s, d = 2, 4, 256, 64
    q, k, v = bshd(b, h, s, d), bshd(b, h, s, d), bshd(b, h, s, d)
    scale = 1.0 / math.sqrt(d)
    o, stats = sdpa_forward(handle, q, k, v, scale)
    ref_o, ref_lse = attention_reference(q, k, v, scale)
    assert rel_err(o, ref_o) < REL_TOL["fp16_out"]
    assert rel_err(stats, ref_lse) < 1e-3


def device_sm():
    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor


def test_cudnn_describes_this_gpu(handle):
    """The lowering picks sdpa_backward's route from this description (sdpa_bwd_route.py)."""
    if EXT.cudnn_version() < 90800:
        pytest.skip("the DEVICEPROP descriptor needs cuDNN 9.8")
    assert sm_from_device_json(EXT.device_properties_json(handle)) == device_sm()


def test_sdpa_backward_native(handle):
    route = choose_route(EXT.cudnn_version(), device_sm())
    if route.composite:
        pytest.skip(f"the native SDPA_BWD descriptor does not run here ({route.reason}); the "
                    "composite graph is tested in tests/backend")
    b, h, s, d = 2, 4, 128, 64
    q, k, v = bshd(b, h, s, d), bshd(b, h, s, d), bshd(b, h, s, d)
    scale = 1.0 / math.sqrt(d)
    o, stats = sdpa_forward(handle, q, k, v, scale)
    do = bshd(b, h, s, d)

    r = Runner(handle)
    dq, dk, dv = r.g.sdpa_backward(r.input(q), r.input(k), r.input(v), r.input(o), r.input(do),
                                   r.input(stats, FLOAT), attn_scale=r.scalar(scale))
    bufs = r.outputs(dq, dk, dv)
    r.run()

    q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
    ref_o, _ = attention_reference(q64, k64, v64, scale)
    ref_o.backward(do.double())
    for got, ref in zip(bufs, (q64.grad, k64.grad, v64.grad)):
        assert rel_err(got, ref) < REL_TOL["fp16_grad"]


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
