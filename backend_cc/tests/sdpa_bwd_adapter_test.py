"""sdpa_backward through the router and the CudnnBackendAdapter on CPU (fake_cudnn.py
answers for the GPU): the device behind the graph's handle picks the lowering, the plan's
workspace covers the composite graph's scratch, and execute binds only the caller's
tensors (the extension binds the scratch itself).
"""
import json

import pytest

import cudnn
from cudnn.backend.adapter import CudnnBackendAdapter
from fake_cudnn import REAL, CudnnScript, FakeAccess, FakeExtension, install_adapter

DT = cudnn.data_type
A, FALLBACK = cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK


def install(monkeypatch, device_ver):
    script = CudnnScript(proposals={A.value: [(6, {}), (7, {})]}, workspace={6: 4096, 7: 0},
                         device_json=None if device_ver is None else
                         json.dumps({"deviceVer": device_ver}))
    ext = FakeExtension(script)
    install_adapter(monkeypatch, CudnnBackendAdapter(FakeAccess(ext, handle=0xABC)))
    return ext


def backward_graph(b=1, h=2, s=64, d=32):
    g = cudnn.pygraph(io_data_type=DT.HALF, intermediate_data_type=DT.FLOAT,
                      compute_data_type=DT.FLOAT)
    q, k, v, o, do = (g.tensor(dim=[b, h, s, d], name=n) for n in ("q", "k", "v", "o", "dO"))
    stats = g.tensor(dim=[b, h, s, 1], data_type=DT.FLOAT, name="stats")
    grads = g.sdpa_backward(q, k, v, o, do, stats, attn_scale=0.125)
    for t in grads:
        t.set_output(True)
    return g, (q, k, v, o, do, stats), grads


def methods(ext):
    (graph,) = ext.graphs
    return {op["method"] for op in graph.real.ops()}


@pytest.mark.parametrize("device_ver", [900, None], ids=["sm_90", "device_unknown"])
def test_hopper_or_an_unknown_device_plans_and_runs_the_composite_graph(monkeypatch,
                                                                        device_ver):
    ext = install(monkeypatch, device_ver)
    g, inputs, grads = backward_graph()
    g.create_execution_plans()
    g.build_plans()
    assert "sdpa_backward" not in methods(ext) and {"matmul", "reduction"} <= methods(ext)
    (note,) = g.lifecycle.planning.lowered.notes
    assert "composite" in note
    (graph,) = ext.graphs
    scratch = graph.real.workspace_tensors()
    assert len(scratch) == 2
    scratch_bytes = graph.real.workspace_tensor_bytes()
    assert scratch_bytes >= sum(t["bytes"] for t in scratch) > 0
    assert g.get_workspace_size() == scratch_bytes + 4096  # plan 0 is engine 6
    pack = {t: 0x1000 * (i + 1) for i, t in enumerate((*inputs, *grads))}
    g.execute(pack, 0x90000)
    name, (sent, workspace, index, handle) = graph.calls[-1]
    assert name == "execute_plan_at_index" and handle == 0xABC
    assert sent == {t.uid: p for t, p in pack.items()} and workspace == 0x90000


def test_a_library_and_device_the_native_engines_serve_lower_natively(monkeypatch):
    if (REAL.cudnn_version() or 0) < 92100:
        pytest.skip("the loaded cuDNN predates 9.21: sdpa_backward is composite everywhere")
    ext = install(monkeypatch, 1000)
    g, *_ = backward_graph()
    g.create_execution_plans()
    assert methods(ext) == {"sdpa_backward"}
    assert g.lifecycle.planning.lowered.notes == ()


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
