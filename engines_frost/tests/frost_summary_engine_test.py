"""The FROST summary engines (summary_engine.py, summary_gates.py) on a CPU.

- ranking: with the runtime probe forced to "Hopper with the CuTe DSL", each family's
  summary and summary-backward graphs plan exactly `<family>_summary_frost`; the forward
  engines decline summaries and the summary engines decline everything else;
- declines name the feature (safe gate, head dims, state dtypes, head rules);
- execute through the graph API with plans built for the CPU and the float64 kernel
  stand-ins (frost_summary_fakes.py): the results equal the float64 summary references,
  with the workspace the plan reports;
- buffers the kernels cannot take raise ValueError naming the port.
"""
import types

import pytest
from frost_graphs import op_graph
from frost_summary_fakes import install

import cudnn
from cudnn.linear_attention.frost import la_engine, runtime_probe, summary_engine
from tests.reference.compare import assert_rel_close
from tests.reference.preprocess import Family, Options
from tests.reference.summary import summary_bwd_reference, summary_reference

torch = pytest.importorskip("torch")
D = cudnn.data_type
CUDA0 = torch.device("cuda", 0)
FAMILIES = ("gdn", "kda", "gdn2")


@pytest.fixture
def frost_on(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(runtime_probe, "device_sm", lambda device=None: 90)
    monkeypatch.setattr(runtime_probe, "cutlass_dsl_version", lambda: ((4, 8, 1), "4.8.1"))


def _graph(op, device=CUDA0, **kw):
    return op_graph(op, handle=types.SimpleNamespace(device=device, stream=None), **kw)


def _plans(graph):
    ex = graph.explain_plans()
    return [p.name for p in ex.plans], {r.name: r for r in ex.engines}, ex


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kind, attrs", [
    ("summary", dict(output_transition=True, with_h0=True)),
    ("summary", dict(use_qk_l2norm=True)),
    ("summary_bwd", dict(output_transition=True, extra_inputs=("d_final_state",))),
    ("summary_bwd", dict(H=8, HV=4, HK=8)),
])
def test_the_summary_engine_is_the_plan(frost_on, family, kind, attrs):
    names, rows, ex = _plans(_graph(f"{family}_{kind}", **attrs)[0])
    assert names == [f"{family}_summary_frost"], ex.render()
    assert "summary nodes are not implemented" in rows[f"{family}_frost"].reason


@pytest.mark.parametrize("op", ["gdn", "gdn_bwd"])
def test_summary_engines_decline_other_nodes(frost_on, op):
    _, rows, _ = _plans(_graph(op)[0])
    assert "serves gdn_summary and gdn_summary_bwd nodes, not gdn" in \
        rows["gdn_summary_frost"].reason


@pytest.mark.parametrize("op, kw, needle", [
    ("kda_summary", dict(safe_gate=True), "safe_gate=True is not implemented by the FROST"),
    ("gdn_summary", dict(K=256), "head dim K = 256"),
    ("gdn2_summary_bwd", dict(out_dtypes={"d_initial_state": D.HALF}),
     "'d_initial_state' dtype must be FLOAT or BFLOAT16"),
    ("gdn_summary", dict(dtypes={"beta": D.BFLOAT16}), "'beta' dtype must be FLOAT"),
])
def test_declines_name_the_feature(frost_on, op, kw, needle):
    names, rows, ex = _plans(_graph(op, **kw)[0])
    assert names == [], ex.render()
    assert needle in rows[f"{op.split('_')[0]}_summary_frost"].reason


def _cpu_buffers(graph, node, inputs):
    """{graph tensor: buffer} for the wired ports, inputs from `inputs`, outputs empty."""
    pack, outs = {}, {}
    for port, t in node.inputs.items():
        pack[t] = inputs[port]
    for port, t in node.outputs.items():
        dtype = torch.float32 if t.data_type in (None, D.FLOAT) else torch.bfloat16
        pack[t] = outs[port] = torch.full(tuple(t.dim), float("nan"), dtype=dtype)
    return pack, outs


def _aligned_workspace(size):
    raw = torch.zeros(size + 128, dtype=torch.uint8)
    skip = (-raw.data_ptr()) % 128
    return raw[skip:skip + size]


def _inputs(family, T, N, H, HK, HV, K, V, seed=0):
    gen = torch.Generator().manual_seed(seed)
    rnd = lambda *s: torch.randn(*s, generator=gen)  # noqa: E731
    HO = max(H, HV)
    vector = family != "gdn"
    norm = lambda x: torch.nn.functional.normalize(x, dim=-1).bfloat16()  # noqa: E731
    x = dict(q=norm(rnd(T, H, K)), k=norm(rnd(T, HK, K)), v=rnd(T, HV, V).bfloat16(),
             g=torch.nn.functional.logsigmoid(rnd(*((T, HO, K) if vector else (T, HO)))),
             cu_seqlens=torch.tensor([0, 9, 9, T], dtype=torch.int32)[:N + 1],
             dO=rnd(T, HO, V).bfloat16(), initial_state=rnd(N, HO, V, K),
             d_final_state=rnd(N, HO, V, K))
    x["beta"] = (torch.sigmoid(rnd(T, HO, K)).bfloat16() if family == "gdn2"
                 else torch.sigmoid(rnd(T, HO)))
    x["w"] = torch.sigmoid(rnd(T, HO, V)).bfloat16()
    return x


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kind", ["summary", "summary_bwd"])
def test_execute_equals_the_references(frost_on, monkeypatch, family, kind):
    install(monkeypatch)
    monkeypatch.setattr(la_engine, "_build_device", lambda handle, engine: torch.device("cpu"))
    monkeypatch.setattr(summary_engine, "torch_stream", lambda stream, device: None)
    T, N, H, HK, HV, K, V = 20, 3, 2, 2, 2, 64, 128
    extra = dict(with_h0=True) if kind == "summary" else dict(extra_inputs=("d_final_state",))
    graph, node = _graph(f"{family}_{kind}", T=T, N=N, H=H, HK=HK,
                         HV=HV, K=K, V=V, output_transition=True, use_qk_l2norm=True, **extra)
    graph.build_plans()
    x = _inputs(family, T, N, H, HK, HV, K, V)
    pack, outs = _cpu_buffers(graph, node, x)
    graph.execute(pack, _aligned_workspace(graph.get_workspace_size()))
    fam, opts = Family(family), Options(use_qk_l2norm=True)
    w = x["w"] if family == "gdn2" else None
    if kind == "summary":
        state, transition = summary_reference(fam, x["k"], x["v"], x["g"], x["beta"],
                                              x["cu_seqlens"], w=w, opts=opts,
                                              initial_state=x["initial_state"])
        port = "final_state"
    else:
        state, transition = summary_bwd_reference(fam, x["q"], x["k"], x["g"], x["beta"],
                                                  x["cu_seqlens"], x["dO"], opts=opts,
                                                  d_final_state=x["d_final_state"])
        port = "d_initial_state"
    assert_rel_close(port, outs[port], state, 1e-6)
    assert_rel_close("transition", outs["transition"], transition, 1e-6)


def test_buffers_the_kernels_cannot_take_name_the_port(frost_on):
    graph, node = _graph("kda_summary", output_transition=True)
    graph.build_plans()
    x = _inputs("kda", 40, 3, 4, 4, 4, 64, 64)
    pack, _ = _cpu_buffers(graph, node, {**x, "cu_seqlens": torch.tensor([0, 9, 9, 40],
                                                                          dtype=torch.int32)})
    with pytest.raises(ValueError, match="input 'k' is on cpu; the kernels need CUDA"):
        graph.execute(pack, torch.zeros(graph.get_workspace_size(), dtype=torch.uint8))


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
