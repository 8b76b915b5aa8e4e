"""The plan list of gdn/kda/gdn2 graphs with the FROST and cuTile engines, read from the
explainer: FROST (slot 0) first, forward and backward, wherever it claims the graph;
cuTile wherever FROST declines.

Both engines' runtime probes are forced (a CPU machine can run neither): "available"
means the probe finds a Hopper GPU with the DSL installed, "unavailable" that it finds a
device without a FROST kernel build or no CuTe DSL. Support decisions on the graph
itself are the engines' real gates.
"""
import pytest
from frost_graphs import op_graph

from cudnn.linear_attention.cutile import la_engine as cutile_engine
from cudnn.linear_attention.frost import runtime_probe

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def cutile_available(monkeypatch):
    monkeypatch.setattr(cutile_engine, "runtime_reason", lambda engine: None)


@pytest.fixture
def frost_on(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(runtime_probe, "device_sm", lambda device=None: 90)
    monkeypatch.setattr(runtime_probe, "cutlass_dsl_version", lambda: ((4, 8, 1), "4.8.1"))


def plan_names(graph):
    ex = graph.explain_plans()
    return [p.name for p in ex.plans], {r.name: r for r in ex.engines}, ex


@pytest.mark.parametrize("op, attrs, expected", [
    ("gdn", {}, ["gdn_frost", "gdn_cutile"]),
    ("gdn", dict(with_h0=True, output_final_state=True), ["gdn_frost", "gdn_cutile"]),
    ("kda", {}, ["kda_frost", "kda_cutile"]),
    ("kda", dict(use_qk_l2norm=True, H=4, HV=16), ["kda_frost", "kda_cutile"]),
    ("gdn2", dict(use_qk_l2norm=True), ["gdn2_frost"]),
    ("gdn", dict(H=4, HK=8, HV=8), ["gdn_frost"]),    # k grouped with v: cuTile declines
    ("gdn", dict(use_qk_l2norm=True), ["gdn_frost", "gdn_cutile"]),
])
def test_frost_ranks_first_for_forward(frost_on, op, attrs, expected):
    """Prefill-shaped graphs (T > 16 N): the chunked kernels first, the recurrent kernel
    (frost_decode_ranking_test.py) last."""
    names, _, ex = plan_names(op_graph(op, T=1024, **attrs)[0])
    assert names[-1] == f"{op}_frost_decode", ex.render()
    names = names[:-1]
    assert names == expected, ex.render()
    assert ex.selected_index == 0


@pytest.mark.parametrize("op, attrs, expected", [
    ("gdn_bwd", {}, ["gdn_frost", "gdn_cutile"]),
    ("gdn_bwd", dict(with_h0=True, use_qk_l2norm=True), ["gdn_frost", "gdn_cutile"]),
    ("kda_bwd", dict(with_h0=True), ["kda_frost", "kda_cutile"]),
    ("gdn2_bwd", dict(use_qk_l2norm=True), ["gdn2_frost"]),
])
def test_frost_ranks_first_for_backward(frost_on, op, attrs, expected):
    """The FROST backward is the first plan; cuTile's stays behind it, reachable by name."""
    names, _, ex = plan_names(op_graph(op, **attrs)[0])
    assert names == expected, ex.render()
    assert ex.selected_index == 0


@pytest.mark.parametrize("op, attrs, expected, frost_reason", [
    ("kda", dict(K=256, V=128), ["kda_cutile"], "head dim K = 256 is not one of (64, 128)"),
    ("kda_bwd", dict(K=256, V=128), ["kda_cutile"], "head dim K = 256 is not one of (64, 128)"),
])
def test_cutile_serves_what_frost_declines(frost_on, op, attrs, expected, frost_reason):
    names, rows, ex = plan_names(op_graph(op, **attrs)[0])
    assert names == expected, ex.render()
    frost = rows[f"{op.split('_')[0]}_frost"]
    assert frost.status == "declined" and frost_reason in frost.reason, frost.reason


@pytest.mark.parametrize("sm, cutlass, needle", [
    (100, ((4, 8, 1), "version 4.8.1"), "no kernel build for sm_100"),
    (90, (None, "not importable (ModuleNotFoundError: No module named 'cutlass')"),
     "needs nvidia-cutlass-dsl (module 'cutlass') >= 4.7"),
])
@pytest.mark.parametrize("op", ["gdn", "kda"])
def test_without_frost_the_cutile_engine_is_chosen(monkeypatch, op, sm, cutlass, needle):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(runtime_probe, "device_sm", lambda device=None: sm)
    monkeypatch.setattr(runtime_probe, "cutlass_dsl_version", lambda: cutlass)
    names, rows, ex = plan_names(op_graph(op)[0])
    assert names == [f"{op}_cutile"], ex.render()
    assert needle in rows[f"{op}_frost"].reason


def test_without_cuda_nothing_is_offered_by_frost(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    names, rows, _ = plan_names(op_graph("gdn2")[0])
    assert names == [] and rows["gdn2_frost"].reason.endswith("no CUDA device is visible")


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))


@pytest.mark.parametrize("op", ["gdn_bwd", "kda_bwd", "gdn2_bwd"])
def test_backward_declines_only_for_the_missing_device(op):
    """On a machine without a GPU the explainer names the missing device as the FROST
    backward's only reason (the graph itself is served)."""
    _, rows, ex = plan_names(op_graph(op, with_h0=True, use_qk_l2norm=True)[0])
    frost = rows[f"{op.split('_')[0]}_frost"]
    assert frost.status == "declined", ex.render()
    assert frost.reason.endswith("no CUDA device is visible"), frost.reason
