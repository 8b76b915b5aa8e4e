"""CPU dry run of the native GPU suites (test_native_backend_lowering.py,
test_classic_ops_backend.py, test_fp8_attention_backend.py).

Every test of the suites runs here with inputs on the CPU and its graphs planned through
the router onto the real lowering and the real cuDNN adapter; only what needs a GPU is
answered by the recording stand-in (backend_cc/tests/fake_cudnn.py): heuristics, plan
builds, executes. When a libcudnn loads, cuDNN still checks every descriptor. The suite's
backend-path assertions run unchanged. Nothing executes, so numerics are not checked
here; what is checked is that each graph lowers, that the feeds and output buffers cover
every graph input and output, and that each compared output has the reference's size. The
stand-in describes its device as sm_90 (the H200), so ops gated on the GPU decline as they
do there; ops gated on the cuDNN version follow the library loaded here.
"""
import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="the suite builds its inputs with torch")

import cudnn  # noqa: E402
from cudnn.backend.adapter import CudnnBackendAdapter  # noqa: E402

try:
    import fake_cudnn
except ImportError:  # outside Bazel: the helper sits beside the backend's own tests
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir,
                                    os.pardir, "backend_cc", "tests"))
    import fake_cudnn
from tests.backend import moe_modes_probe, native_runner  # noqa: E402
from tests.backend import test_classic_ops_backend as classic  # noqa: E402
from tests.backend import test_fp8_attention_backend as fp8  # noqa: E402
from tests.backend import test_native_backend_lowering as suite  # noqa: E402

SUITES = (suite, classic, fp8)
#: the stand-in's device: an H200 (compute capability 9.0) as cuDNN describes it
DEVICE_SM, DEVICE_JSON, HANDLE = 90, '{"deviceVer": 900}', 0x5EED


def suite_cases():
    """(id, test function, kwargs) for every test of the suites, parametrizations expanded."""
    cases = []
    for module in SUITES:
        prefix = module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
        for name, fn in sorted(vars(module).items()):
            if not (name.startswith("test_") and callable(fn)):
                continue
            marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "parametrize"]
            if not marks:
                cases.append(pytest.param(fn, {}, id=f"{prefix}.{name}"))
                continue
            (mark,) = marks
            names = [n.strip() for n in mark.args[0].split(",")]
            for i, values in enumerate(mark.args[1]):
                values = (values,) if len(names) == 1 else values  # one name: bare values
                cases.append(pytest.param(fn, dict(zip(names, values)),
                                          id=f"{prefix}.{name}[{i}]"))
    return cases


class RefusingExtension(fake_cudnn.FakeExtension):
    """cuDNN's heuristics propose nothing for graphs holding one of `methods`."""

    def __init__(self, script, methods):
        super().__init__(script)
        self.methods = set(methods)

    def backend_graph(self, **kwargs):
        graph = super().backend_graph(**kwargs)
        answer = graph.create_execution_plans

        def create_execution_plans(modes):
            if {op["method"] for op in graph.real.ops()} & self.methods:
                graph.calls.append(("create_execution_plans", list(modes)))
                return []
            return answer(modes)

        graph.create_execution_plans = create_execution_plans
        return graph


class DryRun:
    def __init__(self, refuse=()):
        script = fake_cudnn.CudnnScript(proposals={0: [(1, {})], 2: [(2, {})]},
                                        device_json=DEVICE_JSON)
        self.ext = RefusingExtension(script, refuse)
        self.runs = []
        self.checks = []

    def run_on_backend(self, graph, feeds, outputs, heuristics=None):
        outputs = list(outputs)
        plan = native_runner.plan_on_backend(graph, heuristics)
        fed = {t.uid for t in feeds}
        needed = {t.uid for t in graph.get_inputs()
                  if not (t.is_pass_by_value and t.pass_by_value is not None)}
        assert needed <= fed, f"inputs without a buffer: {sorted(needed - fed)}"
        assert {t.uid for t in graph.get_outputs()} == {t.uid for t in outputs}
        self.runs.append(graph)
        dtypes = native_runner.TORCH_DTYPE
        return [torch.zeros(tuple(t.dim), dtype=dtypes[t.data_type]) for t in outputs], plan

    def check(self, op, got, ref, bound, plan=""):
        assert got.numel() == ref.numel(), f"{op}: output {tuple(got.shape)} vs reference " \
            f"{tuple(ref.shape)}"
        self.checks.append(op)


def install(monkeypatch, dry, sdpa_backward_lowering="composite"):
    access = fake_cudnn.FakeAccess(dry.ext, handle=HANDLE)
    fake_cudnn.install_adapter(monkeypatch, CudnnBackendAdapter(access))
    for module in SUITES:
        monkeypatch.setattr(module, "DEVICE", "cpu")
        monkeypatch.setattr(module, "run_on_backend", dry.run_on_backend)
        monkeypatch.setattr(module, "check", dry.check)
        if hasattr(module, "device_sm"):
            monkeypatch.setattr(module, "device_sm", lambda: DEVICE_SM)
    # an sm_90 device: the lowering takes the composite sdpa_backward graph
    monkeypatch.setattr(suite, "expected_sdpa_backward_lowering", lambda: sdpa_backward_lowering)


@pytest.mark.parametrize("test, kwargs", suite_cases())
def test_suite_graphs_lower_and_plan_on_the_backend_path(monkeypatch, test, kwargs):
    """Each test either runs its graphs on the backend path or records the decline it
    expects here (and asserts the backend gave that reason)."""
    dry = DryRun()
    install(monkeypatch, dry)
    native_runner.ROWS.clear()
    test(None, **kwargs)
    if declined_rows():
        assert not dry.runs or dry.checks, "a decline after runs that checked nothing"
    else:
        assert dry.runs and dry.checks
    assert len(dry.ext.graphs) >= len(dry.runs)
    ran = [g for g in dry.ext.graphs if ("build_operation_graph", None) in g.calls]
    assert len(ran) == len(dry.runs)
    native_runner.ROWS.clear()


def declined_rows():
    return [r for r in native_runner.ROWS if r.declined]


def test_a_layout_cudnn_refuses_reaches_the_suite_as_a_recorded_clean_decline(monkeypatch):
    dry = DryRun(refuse={"relu"})
    install(monkeypatch, dry)
    native_runner.ROWS.clear()
    suite.test_pointwise_chain_in_a_layout_cudnn_refuses_is_a_clean_decline(None)
    (row,) = declined_rows()
    # the router's message, from the adapter's delegating entry, reached the table
    assert "cuDNN proposed no engine config" in row.plan
    assert "CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=stderr" in row.plan
    assert " decl " in native_runner.table() and not dry.checks
    native_runner.ROWS.clear()


@pytest.mark.parametrize("case", ["mha_bshd_fwd_chain", "gqa_bhsd"])
def test_sdpa_backward_lowers_to_the_composite_graph_without_a_native_engine(monkeypatch,
                                                                             case):
    dry = DryRun()
    install(monkeypatch, dry)
    suite.test_sdpa_backward(None, case)
    backward = dry.ext.graphs[-1]
    methods = [op["method"] for op in backward.real.ops()]
    assert "sdpa_backward" not in methods and methods.count("matmul") == 5
    assert dry.checks[-3:] == [f"sdpa bwd {case} {n}" for n in ("dQ", "dK", "dV")]


def test_sdpa_backward_on_the_wrong_lowering_fails(monkeypatch):
    install(monkeypatch, DryRun(), sdpa_backward_lowering="native")
    with pytest.raises(AssertionError):
        suite.test_sdpa_backward(None, "mha_bshd_fwd_chain")


def test_sdpa_backward_cudnn_refuses_is_a_failure_not_an_expected_one(monkeypatch):
    install(monkeypatch, DryRun(refuse={"reduction"}))  # only the backward graph has one
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="no engine config"):
        suite.test_sdpa_backward(None, "gqa_bhsd")


@pytest.mark.parametrize("name", sorted(moe_modes_probe.CASES))
def test_moe_mode_probe_graphs_lower_on_the_backend_path(monkeypatch, name):
    """The graphs test_moe_modes_backend.py runs (one process each, moe_modes_probe.py)
    plan on the backend path with the mode's routing tensors, and the float64 reference
    has the output's shape."""
    dry = DryRun()
    install(monkeypatch, dry)
    case = moe_modes_probe.CASES[name]
    routing, tensors = moe_modes_probe.inputs(case, "cpu")
    g = cudnn.pygraph(io_data_type=cudnn.data_type.HALF,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    y, feeds = moe_modes_probe.graph_of(g, case, tensors)
    (got,), _ = dry.run_on_backend(g, feeds, [y])
    (op,) = dry.ext.graphs[-1].real.ops()
    routed = {"NONE": [], "GATHER": ["token_index"], "SCATTER": ["token_index", "token_ks"]}
    assert list(op["inputs"]) == ["token", "weight", "first_token_offset"] + routed[case.mode]
    assert got.shape == moe_modes_probe.reference(case, routing, tensors).shape


def test_the_dry_run_covers_the_whole_suite():
    assert len(suite_cases()) >= 11 + 12 + 4


def test_the_result_table_shows_failures():
    native_runner.ROWS.clear()
    got, ref = torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5])
    with pytest.raises(AssertionError, match="relative error 2.000e-01"):
        native_runner.check("demo op", got, ref, 1e-3, "eng0")
    native_runner.check("exact op", ref, ref, 1e-3, "eng1")
    text = native_runner.table()
    assert "demo op" in text and " NO " in text and "exact op" in text and " yes " in text
    with pytest.raises(AssertionError):
        native_runner.check("unwritten", torch.tensor([float("nan")]), ref[:1], 1.0)
    native_runner.ROWS.clear()


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
