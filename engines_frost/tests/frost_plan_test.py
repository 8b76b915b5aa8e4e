"""CPU tests of FROST plans: build per device, exact workspace, pass-through execute, and
the ValueErrors for buffers the kernels cannot take (la_engine.py, workspace.py, and
engines_common's port_buffers.py).

The runtime probe is forced to "Hopper with the CuTe DSL" and the kernel launcher is
replaced by a recorder: these tests check what reaches the launcher, never numerics
(those are tests/numerics/test_la_frost_engines.py, on the GPU).
"""
import types

import pytest
from frost_graphs import op_graph

import cudnn
from cudnn.linear_attention.common.port_dtypes import IO
from cudnn.linear_attention.frost import decode_engine, la_engine, runtime_probe
from cudnn.linear_attention.frost.gdn_engine import GdnFrostEngine
from cudnn.linear_attention.frost.kda_engine import KdaFrostEngine
from cudnn.linear_attention.frost.kernels import fwd as kernels_fwd
from cudnn.linear_attention.common.port_buffers import PortBuffer
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig
from cudnn.linear_attention.frost.workspace import ALIGN, carve_scratch

torch = pytest.importorskip("torch")
D = cudnn.data_type
CUDA0 = torch.device("cuda", 0)
STREAM = object()          # the handle's stream: must reach the launcher untouched
TORCH = {D.BFLOAT16: torch.bfloat16, D.HALF: torch.float16, D.FLOAT: torch.float32,
         D.INT32: torch.int32, D.INT64: torch.int64}


@pytest.fixture
def launches(monkeypatch):
    """Hopper + CuTe DSL as far as the gates know; frost_fwd records its keyword args.
    The recurrent engine (ranked first for these short graphs) is turned off: these are the
    chunked plans' tests (frost_decode_plan_test.py has the recurrent one's)."""
    monkeypatch.setattr(runtime_probe, "runtime_reason", lambda engine, device=None: None)
    monkeypatch.setattr(decode_engine, "decline_reason", lambda f, traits, engine: f"{engine}: off")
    monkeypatch.setattr(runtime_probe, "device_sm", lambda device=None: 90)
    calls = []
    monkeypatch.setattr(kernels_fwd, "frost_fwd", lambda **kw: calls.append(kw))
    return calls


@pytest.fixture
def cpu_plans(monkeypatch):
    """Plans built for the CPU, so CPU tensors pass the device check (plumbing only)."""
    monkeypatch.setattr(la_engine, "_build_device", lambda handle, engine: torch.device("cpu"))


def built(op="gdn", device=CUDA0, **kw):
    g, node = op_graph(op, handle=types.SimpleNamespace(device=device, stream=STREAM), **kw)
    g.create_execution_plans()
    g.build_plans()
    return g, node


def buffers(node, skip=()):
    """A CPU tensor for every wired port at its declared dims and dtype (bf16 if unset)."""
    out = {}
    for port, t in {**node.inputs, **node.outputs}.items():
        if port in skip:
            continue
        dtype = TORCH[t.data_type] if t.data_type else torch.bfloat16
        out[port] = (torch.zeros(t.dim, dtype=dtype) if port != "cu_seqlens" else
                     torch.tensor([0, 10, 25, 40], dtype=torch.int32))
    if "final_state" in out and "initial_state" in out:
        out["final_state"] = torch.zeros_like(out["initial_state"])
    return out


def pack(node, bufs):
    tensors = {**node.inputs, **node.outputs}
    return {tensors[p]: b for p, b in bufs.items()}


# -- workspace ------------------------------------------------------------------------
@pytest.mark.parametrize("op, per_channel", [("gdn", (False, False)), ("kda", (True, False)),
                                             ("gdn2", (True, True))])
def test_workspace_size_is_exactly_what_the_launcher_reports(launches, monkeypatch, op,
                                                             per_channel):
    asked = []

    def size(**kw):
        asked.append(kw)
        return 1000 + kw["total_tokens"] * kw["heads_v"]
    monkeypatch.setattr(kernels_fwd, "frost_workspace_size", size)
    g, _ = built(op, T=40, N=3, H=4, HK=8, HV=8, K=128, V=64)
    assert g.get_workspace_size() == 1000 + 40 * 8
    assert asked[-1] == dict(total_tokens=40, num_seqs=3, heads_q=4, heads_k=8, heads_v=8,
                             head_dim_k=128, head_dim_v=64, gate_per_channel=per_channel[0],
                             beta_per_channel=per_channel[1])


def test_oracle_launcher_needs_no_workspace(launches):
    g, _ = built("kda")
    assert g.get_workspace_size() == kernels_fwd.frost_workspace_size(
        total_tokens=40, num_seqs=3, heads_q=4, heads_k=4, heads_v=4, head_dim_k=64,
        head_dim_v=64, gate_per_channel=True, beta_per_channel=False)


def test_build_declines_a_device_without_a_kernel_build(launches, monkeypatch):
    g, _ = op_graph("gdn", handle=types.SimpleNamespace(device=CUDA0, stream=STREAM))
    monkeypatch.setattr(runtime_probe, "device_sm", lambda device=None: 100)
    with pytest.raises(NotImplementedError, match=r"no kernel build for sm_100 \(cuda:0\)"):
        GdnFrostEngine().build_plan(g, None)


def test_build_declines_a_non_cuda_build_handle(launches):
    g, _ = op_graph("kda")
    ctx = types.SimpleNamespace(handle=types.SimpleNamespace(device=torch.device("cpu")))
    with pytest.raises(NotImplementedError, match="kda_frost: runs on CUDA devices; the "
                                                  "handle is on cpu"):
        KdaFrostEngine().build_plan(g, None, ctx)


def test_plans_are_built_for_the_build_handles_device(launches):
    g, _ = op_graph("kda", handle=types.SimpleNamespace(device=CUDA0, stream=STREAM))
    ctx = types.SimpleNamespace(handle=types.SimpleNamespace(device=torch.device("cuda", 2)))
    assert KdaFrostEngine().build_plan(g, None, ctx).device == torch.device("cuda", 2)


# -- execute: buffers the kernels cannot take ------------------------------------------
def test_cpu_buffers_raise_value_error_naming_the_port(launches):
    g, node = built("gdn2", with_h0=True)
    with pytest.raises(ValueError, match=r"gdn2_frost: input 'q' is on cpu; the kernels need "
                                         r"CUDA buffers on cuda:0"):
        g.execute(pack(node, buffers(node)), torch.empty(128, dtype=torch.uint8))
    assert not launches


# dims and declared dtypes are the router's check (node_buffers.py, any engine); the
# rest is the kernels' own (engines_common's port_buffers.py): q's dtype for the io
# ports whose graph dtype is unset, the innermost stride, the device.
@pytest.mark.parametrize("port, bad, needle", [
    ("k", lambda t: t[:, :, :32], "node 'kda': the buffer for input port 'k' (tensor 'k', "
                                  "uid 2) has dims [40, 4, 32]; the graph declares "
                                  "[40, 4, 64]"),
    ("g", lambda t: t.bfloat16(), "input port 'g' (tensor 'g', uid 4) has dtype BFLOAT16; "
                                  "the graph declares FLOAT"),
    ("v", lambda t: t.half(), "input port 'v' (tensor 'v', uid 3) has dtype HALF; the graph "
                              "declares BFLOAT16"),
    ("O", lambda t: t.float(), "kda_frost: output 'O' has dtype FLOAT; the kernel reads "
                               "BFLOAT16"),
    ("v", lambda t: torch.zeros(40, 4, 128, dtype=t.dtype)[:, :, ::2],
     "kda_frost: input 'v' has innermost stride 2; the kernels need a stride-1 innermost "
     "dim"),
])
def test_bad_buffers_raise_value_error_naming_the_port(launches, cpu_plans, port, bad, needle):
    g, node = built("kda")
    bufs = buffers(node)
    bufs[port] = bad(bufs[port])
    with pytest.raises(ValueError) as err:
        g.execute(pack(node, bufs))
    assert needle in str(err.value)
    assert not launches


def test_padded_outer_dims_reach_the_launcher(launches, cpu_plans):
    # docs/LINEAR_ATTENTION.md §4: only the innermost dim must be stride-1; the launcher checks what its
    # kernel layer needs beyond that.
    g, node = built("gdn")
    bufs = buffers(node)
    bufs["q"] = torch.zeros(40, 6, 64, dtype=torch.bfloat16)[:, 1:5]   # strided head dim
    g.execute(pack(node, bufs))
    assert launches[0]["q"] is bufs["q"]


def test_a_buffer_on_another_cuda_device_is_refused():
    spec = PortBuffer("input", "q", (4, 2, 64), (D.BFLOAT16,))
    other = types.SimpleNamespace(device=torch.device("cuda", 1))
    with pytest.raises(ValueError, match=r"gdn_frost: input 'q' is on cuda:1 but this plan "
                                         r"runs on cuda:0 \(plans are per device"):
        spec.check("gdn_frost", other, CUDA0, None)


def test_io_ports_follow_the_q_buffer_dtype():
    spec = PortBuffer("output", "O", (2, 3), IO)
    spec.check("e", torch.zeros(2, 3, dtype=torch.float16), torch.device("cpu"), D.HALF)
    with pytest.raises(ValueError, match="output 'O' has dtype BFLOAT16; the kernel reads HALF"):
        spec.check("e", torch.zeros(2, 3, dtype=torch.bfloat16), torch.device("cpu"), D.HALF)


def test_unset_state_dtypes_must_still_match_at_execute(launches, cpu_plans):
    g, node = built("gdn", with_h0=True, output_final_state=True,
                    dtypes={"initial_state": D.BFLOAT16})
    bufs = buffers(node)
    bufs["final_state"] = bufs["final_state"].float()
    with pytest.raises(ValueError, match=r"gdn_frost: initial_state \(torch.bfloat16\) and "
                                         r"final_state \(torch.float32\) buffers must share"):
        g.execute(pack(node, bufs))


def test_unbound_output_o_is_an_error(launches, cpu_plans):
    g, node = built("gdn")
    with pytest.raises(ValueError, match="'O'"):
        g.execute(pack(node, buffers(node, skip=("O",))))


def test_shape_overrides_are_refused(launches, cpu_plans):
    g, node = built("gdn")
    q = node.inputs["q"]
    with pytest.raises(ValueError, match="gdn_frost: execute-time shape/stride overrides"):
        g.execute(pack(node, buffers(node)), override_uids=[q.uid],
                  override_shapes=[[20, 4, 64]], override_strides=[[256, 64, 1]])
    assert not launches


# -- execute: what reaches the launcher -------------------------------------------------
@pytest.mark.parametrize("op, flags", [
    ("gdn", dict(gate_per_channel=False, beta_per_channel=False, use_l2norm=False)),
    ("gdn", dict(gate_per_channel=False, beta_per_channel=False, use_l2norm=True)),
    ("kda", dict(gate_per_channel=True, beta_per_channel=False, use_l2norm=True)),
    ("gdn2", dict(gate_per_channel=True, beta_per_channel=True, use_l2norm=True)),
])
def test_caller_buffers_reach_the_launcher_untouched(launches, cpu_plans, op, flags):
    attrs = {"use_qk_l2norm": True} if flags["use_l2norm"] else {}
    g, node = built(op, with_h0=True, output_final_state=True, scale=0.25, **attrs)
    bufs = buffers(node)
    g.execute(pack(node, bufs))
    (kw,) = launches
    for port, arg in (("q", "q"), ("k", "k"), ("v", "v"), ("g", "g"), ("beta", "beta"),
                      ("cu_seqlens", "cu_seqlens"), ("O", "out"),
                      ("initial_state", "initial_state"), ("final_state", "final_state")):
        assert kw[arg] is bufs[port], port
    assert (kw["w"] is bufs["w"]) if op == "gdn2" else kw["w"] is None
    assert {k: kw[k] for k in flags} == flags
    assert kw["scale"] == 0.25 and kw["stream"] is STREAM and "workspace" not in kw


def test_default_scale_and_absent_final_state(launches, cpu_plans):
    g, node = built("gdn", K=128, V=64)
    g.execute(pack(node, buffers(node)))
    assert launches[0]["scale"] == pytest.approx(128 ** -0.5)
    assert launches[0]["final_state"] is None and launches[0]["initial_state"] is None


def test_scratch_is_carved_from_the_callers_workspace(launches, cpu_plans, monkeypatch):
    monkeypatch.setattr(kernels_fwd, "frost_workspace_size", lambda **kw: 300)
    g, node = built("kda")
    ws = torch.empty(1024, dtype=torch.uint8)
    offset = (-ws.data_ptr()) % ALIGN
    aligned = ws[offset:offset + 512]
    g.execute(pack(node, buffers(node)), aligned)
    scratch = launches[0]["workspace"]
    assert scratch.numel() == 300 and scratch.data_ptr() == aligned.data_ptr()


# -- state checkpoints (cadence 64) ----------------------------------------------------
def test_forward_plan_hands_the_checkpoint_buffer_to_the_kernel(launches, cpu_plans):
    g, node = built("gdn", checkpoint_every_n_tokens=64, with_h0=True)
    bufs = buffers(node)
    assert list(bufs["state_checkpoints"].shape) == [40 // 64 + 3, 4, 64, 64]
    g.execute(pack(node, bufs))
    assert launches[0]["state_checkpoints"] is bufs["state_checkpoints"]
    g, node = built("gdn")
    g.execute(pack(node, buffers(node)))
    assert launches[1]["state_checkpoints"] is None


@pytest.mark.parametrize("with_checkpoints", [False, True])
def test_backward_plan_reads_checkpoints_and_sizes_its_workspace(launches, cpu_plans, monkeypatch,
                                                                 with_checkpoints):
    from cudnn.linear_attention.frost.kernels import bwd as kernels_bwd

    calls = []
    monkeypatch.setattr(kernels_bwd, "frost_bwd", lambda **kw: calls.append(kw))
    extra = dict(checkpoint_every_n_tokens=64, extra_inputs=("state_checkpoints",)) if with_checkpoints else {}
    g, node = built("kda_bwd", with_h0=True, **extra,
                    out_dtypes={"dG": D.FLOAT, "dBeta": D.FLOAT, "d_initial_state": D.FLOAT})
    want = kernels_bwd.frost_bwd_workspace_size(total_tokens=40, num_seqs=3, heads_q=4, heads_k=4, heads_v=4,
                                                head_dim_k=64, head_dim_v=64, checkpoints=with_checkpoints)
    assert g.get_workspace_size() == want
    bufs = buffers(node)
    ws = _aligned(want)
    g.execute(pack(node, bufs), ws)
    assert calls[0]["state_checkpoints"] is bufs.get("state_checkpoints")
    assert (calls[0]["state_checkpoints"] is not None) == with_checkpoints


def test_forward_plan_hands_the_values_buffer_to_the_kernel(launches, cpu_plans):
    g, node = built("gdn", checkpoint_every_n_tokens=64, output_values=True)
    bufs = buffers(node)
    assert list(bufs["values"].shape) == [40, 4, 64]
    g.execute(pack(node, bufs))
    assert launches[0]["values"] is bufs["values"]
    assert launches[0]["state_checkpoints"] is bufs["state_checkpoints"]


def test_backward_plan_reads_values_and_sizes_its_workspace(launches, cpu_plans, monkeypatch):
    """With the forward's values next to its checkpoints the workspace loses the U region too."""
    from cudnn.linear_attention.frost.kernels import bwd as kernels_bwd

    calls = []
    monkeypatch.setattr(kernels_bwd, "frost_bwd", lambda **kw: calls.append(kw))
    g, node = built("gdn_bwd", checkpoint_every_n_tokens=64, extra_inputs=("state_checkpoints", "values"),
                    out_dtypes={"dG": D.FLOAT, "dBeta": D.FLOAT})
    kw = dict(total_tokens=40, num_seqs=3, heads_q=4, heads_k=4, heads_v=4, head_dim_k=64, head_dim_v=64,
              checkpoints=True)
    want = kernels_bwd.frost_bwd_workspace_size(**kw, values=True)
    assert g.get_workspace_size() == want < kernels_bwd.frost_bwd_workspace_size(**kw)
    bufs = buffers(node)
    g.execute(pack(node, bufs), _aligned(want))
    assert calls[0]["values"] is bufs["values"]
    assert calls[0]["state_checkpoints"] is bufs["state_checkpoints"]


# -- carve_scratch ---------------------------------------------------------------------
CPU = torch.device("cpu")


def _aligned(nbytes, shift=0):
    raw = torch.empty(nbytes + 2 * ALIGN, dtype=torch.uint8)
    start = (-raw.data_ptr()) % ALIGN + shift
    return raw[start:start + nbytes]


def test_carve_needs_nothing_for_zero_bytes():
    assert carve_scratch("e", None, 0, CPU) is None


@pytest.mark.parametrize("workspace, needle", [
    (None, "e: this plan needs a workspace of 256 bytes; none was passed"),
    (lambda: _aligned(200), "e: workspace too small: 200 bytes given, 256 needed"),
    (lambda: _aligned(512, shift=4), "e: the workspace must be 128-byte aligned"),
    (lambda: _aligned(1024).view(2, 512)[:, :256], "e: the workspace must be contiguous"),
])
def test_carve_refuses_unusable_workspaces(workspace, needle):
    with pytest.raises(ValueError, match=needle.replace("(", r"\(")):
        carve_scratch("e", workspace() if workspace else None, 256, CPU)


def test_carve_refuses_a_workspace_on_another_device():
    with pytest.raises(ValueError, match="e: the workspace is on cpu; this plan was built "
                                         "for cuda:0"):
        carve_scratch("e", _aligned(512), 256, CUDA0)


def test_carve_views_the_callers_memory():
    ws = _aligned(512).view(torch.float32)     # any dtype: scratch is bytes
    view = carve_scratch("e", ws, 300, CPU)
    assert view.dtype == torch.uint8 and view.numel() == 300
    assert view.data_ptr() == ws.data_ptr()


# -- execute is checked every call; direct_launch binds one layout for its caller --------
class _RecordingKernel:
    """Stands in for compiled_kernel.CompiledKernel: records each launch (either calling
    convention: `fn` takes TVM-FFI's plain ints, `launch` torch tensors)."""

    def __init__(self, log, ffi):
        self.log, self.ffi = log, ffi

    def launch(self, tensors, T, N, scale, stream):
        self.log.append((tensors, stream.cuda_stream))

    def fn(self, *args):
        self.log.append(args)


@pytest.fixture
def binds(monkeypatch, launches):
    """bind_fwd records what it was asked to check and returns a BoundLaunch over a
    recording kernel (convention from `binds["ffi"]`)."""
    calls = {"bind": [], "fast": [], "ffi": "cute"}

    def bind_fwd(**kw):
        calls["bind"].append(kw)
        operands = {name: kw[name] for name in kernels_fwd.OPERANDS}
        # only the ABI's operand list is read off the config (pointer_launch)
        config = FrostFwdConfig("bfloat16", None, 4, 4, 4, 64, 64, False, False, False, False,
                                False, False,
                                write_checkpoints=kw.get("state_checkpoints") is not None)
        return kernels_fwd.BoundLaunch(config, _RecordingKernel(calls["fast"], calls["ffi"]),
                                       kernels_fwd.operand_signature(operands), 40, 3,
                                       kw["scale"])
    monkeypatch.setattr(kernels_fwd, "bind_fwd", bind_fwd)
    return calls


def test_every_execute_is_checked(launches, cpu_plans):
    g, node = built("kda", with_h0=True, output_final_state=True)
    bufs = buffers(node)
    g.execute(pack(node, bufs))
    g.execute(pack(node, bufs))
    assert len(launches) == 2          # the plan keeps nothing between calls


def test_direct_launch_repeats_the_checked_call_for_its_caller(binds, cpu_plans):
    from cudnn.engines.bound_executor import bind_executor

    g, node = built("kda", with_h0=True, output_final_state=True)
    bufs = buffers(node)
    by_uid = {t.uid: b for t, b in pack(node, bufs).items()}
    direct = bind_executor(g).plan.direct_launch(g, by_uid)
    (asked,) = binds["bind"]
    assert asked["q"] is bufs["q"] and asked["out"] is bufs["O"] and asked["w"] is None
    assert not direct.takes_addresses and len(direct.uids) == len(bufs)
    assert direct.alignment == tuple(by_uid[u].data_ptr() & 15 for u in direct.uids)
    direct.launch([by_uid[u] for u in direct.uids], None, 7)
    (operands, stream), = binds["fast"]
    assert stream == 7
    for port, name in (("q", "q"), ("g", "g"), ("O", "out"), ("final_state", "final_state")):
        assert operands[name] is bufs[port], port


def test_tvm_kernels_launch_from_addresses(binds, cpu_plans):
    from cudnn.engines.bound_executor import bind_executor

    binds["ffi"] = "tvm"
    g, node = built("gdn")
    bufs = buffers(node)
    by_uid = {t.uid: b for t, b in pack(node, bufs).items()}
    direct = bind_executor(g).plan.direct_launch(g, by_uid)
    assert direct.takes_addresses
    direct.launch([by_uid[u].data_ptr() for u in direct.uids], None, 9)
    (args,) = binds["fast"]
    slot = kernels_fwd.OPERANDS.index("q")
    assert args[slot] == bufs["q"].data_ptr() and args[-1] == 9 and args[-4:-1] == (40, 3,
                                                                                   asked_scale(g))


def asked_scale(graph):
    from cudnn.linear_attention.common.facts import linear_attention_facts
    return linear_attention_facts(graph).flags.scale


def test_no_direct_launch_for_buffers_that_are_not_plain_tensors(binds, cpu_plans):
    from cudnn.engines.bound_executor import bind_executor

    g, node = built("gdn")
    bufs = buffers(node)
    by_uid = {t.uid: b for t, b in pack(node, bufs).items()}
    by_uid[node.inputs["g"].uid] = bufs["g"].numpy()  # DLPack: execute converts it
    assert bind_executor(g).plan.direct_launch(g, by_uid) is None and binds["bind"] == []


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
