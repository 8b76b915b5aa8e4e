"""The backend seam: what the router asks the adapter, when, and what it does with the
answer (no framework, no real backend)."""
from __future__ import annotations

import importlib.abc
import sys
import types

import pytest
from la_graphs import la_graph

import cudnn
from cudnn.engines import backend_source
from cudnn.engines.base import PlanConfig
from cudnn.engines.variant_pack import buffer_bytes

D = cudnn.data_type
MODULE = "router_test_backend_adapter"


class Adapter:
    name = "test_backend"

    def __init__(self, entries=(), unavailable=None, error=None):
        self.entries, self.unavailable, self.error = list(entries), unavailable, error
        self.asked = []

    def unavailable_reason(self):
        return self.unavailable

    def backend_plan_entries(self, graph, heuristics):
        self.asked.append((graph.name, heuristics))
        if self.error is not None:
            raise self.error
        return self.entries


@pytest.fixture
def use_adapter(monkeypatch):
    def install(adapter):
        module = types.ModuleType(MODULE)
        module.CudnnBackendAdapter = lambda: adapter
        monkeypatch.setitem(sys.modules, MODULE, module)
        monkeypatch.setattr(backend_source, "ADAPTER_MODULE", MODULE)
        backend_source.reset_backend_adapter()
        return adapter
    yield install
    backend_source.reset_backend_adapter()


def matmul_graph(name="mm"):
    g = cudnn.pygraph(name=name, io_data_type=D.FLOAT)
    g.matmul(g.tensor([2, 3], name="a"), g.tensor([3, 4], name="b")).set_output(True)
    g.validate()
    g.lifecycle.freeze()
    return g


def test_entries_are_asked_once_per_graph_with_the_heuristics(use_adapter):
    adapter = use_adapter(Adapter([PlanConfig(3, cpp_index=0), PlanConfig(-1)]))
    g = matmul_graph()
    g.lifecycle.planning.heuristics = (cudnn.heur_mode.B,)
    first = backend_source.backend_plan_entries(g)
    assert first == [PlanConfig(3, cpp_index=0), PlanConfig(-1)]
    assert backend_source.backend_plan_entries(g) is first
    assert adapter.asked == [("mm", (cudnn.heur_mode.B,))]
    backend_source.backend_plan_entries(matmul_graph("other"))
    assert len(adapter.asked) == 2


def test_python_only_graphs_never_import_the_adapter(monkeypatch):
    class Tripwire(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == MODULE:
                raise AssertionError("the adapter was imported for a python-only graph")
            return None

    monkeypatch.setattr(sys, "meta_path", [Tripwire(), *sys.meta_path])
    monkeypatch.setattr(backend_source, "ADAPTER_MODULE", MODULE)
    backend_source.reset_backend_adapter()
    g, _ = la_graph("kda")
    answer = backend_source.backend_answer(g)
    assert answer.entries == [] and answer.adapter is None
    assert answer.declined.startswith("No valid engine configs for KDA: kda has no backend "
                                      "lowering")
    backend_source.reset_backend_adapter()


def test_a_missing_adapter_means_no_entries_and_a_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, MODULE, None)
    monkeypatch.setattr(backend_source, "ADAPTER_MODULE", MODULE)
    backend_source.reset_backend_adapter()
    answer = backend_source.backend_answer(matmul_graph())
    assert answer.entries == [] and "backend adapter not installed" in answer.declined
    backend_source.reset_backend_adapter()


def test_an_unavailable_backend_is_not_asked(use_adapter):
    adapter = use_adapter(Adapter([PlanConfig(3)], unavailable="libcudnn.so.9 not found"))
    answer = backend_source.backend_answer(matmul_graph())
    assert answer.entries == [] and answer.declined == "libcudnn.so.9 not found"
    assert adapter.asked == []


def test_a_backend_decline_is_recorded(use_adapter):
    use_adapter(Adapter(error=cudnn.cudnnGraphNotSupportedError("no engine configs")))
    answer = backend_source.backend_answer(matmul_graph())
    assert answer.entries == []
    assert answer.declined == "cudnnGraphNotSupportedError: no engine configs"


@pytest.mark.parametrize("adapter, error, match", [
    (Adapter(error=RuntimeError("CUDA failure")), RuntimeError, "CUDA failure"),
    (Adapter([PlanConfig(20100)]), ValueError, "python engine id 20100"),
    (Adapter(["plan"]), TypeError, "expected PlanConfig"),
])
def test_backend_bugs_propagate(use_adapter, adapter, error, match):
    use_adapter(adapter)
    with pytest.raises(error, match=match):
        backend_source.backend_answer(matmul_graph())


def test_asking_through_the_graph_validates_and_freezes_lowerable_graphs(use_adapter):
    use_adapter(Adapter([PlanConfig(3)]))
    g = cudnn.pygraph(io_data_type=D.FLOAT)
    g.matmul(g.tensor([2, 3]), g.tensor([3, 4])).set_output(True)
    assert g.backend_plan_entries() == [PlanConfig(3)] and g.is_frozen
    la, _ = la_graph("gdn")
    assert la.backend_plan_entries() == [] and not la.is_frozen


class Cai:
    def __init__(self, shape, typestr):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (0, 0)}


def test_buffer_sizes_are_read_without_a_framework():
    assert buffer_bytes(Cai((4, 8), "<f2")) == 64
    assert buffer_bytes(types.SimpleNamespace(nbytes=96)) == 96
    assert buffer_bytes(0xDEAD0000) is None and buffer_bytes(None) == 0


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
