"""`graph.explain_plans()` on linear-attention graphs, with stand-in engines in the gdn
family slots that gate on the graph's one node."""
from __future__ import annotations

import sys
import types

import pytest
from la_graphs import la_graph

import cudnn
from cudnn.engines import backend_source, manifest
from cudnn.engines.base import BaseEngine, PlanConfig
from cudnn.engines.manifest import EngineFamily, EngineSlot

D = cudnn.data_type


def single_node(graph, engine):
    """The graph's only node; a decline naming the node count otherwise."""
    if len(graph.nodes) != 1:
        raise NotImplementedError(f"{engine}: serves single-node graphs; this graph has "
                                  f"{len(graph.nodes)} nodes")
    return graph.nodes[0]


class GdnWideEngine(BaseEngine):
    """Claims forward GDN with K <= 64, two configs."""
    name = "gdn_wide"

    def check_support(self, graph):
        node = single_node(graph, self.name)
        if node.node_type is not cudnn.NodeType.GDN:
            raise NotImplementedError(f"{self.name}: forward only")
        if node.inputs["q"].dim[-1] > 64:
            raise NotImplementedError(f"{self.name}: K = {node.inputs['q'].dim[-1]} > 64")

    def propose_plans(self, graph):
        self.check_support(graph)
        return [PlanConfig(self.engine_id, {"BT": 64}), PlanConfig(self.engine_id, {"BT": 32})]

    def execute(self, graph, data, ctx):
        pass


class GdnBf16Engine(BaseEngine):
    name = "gdn_bf16"

    def check_support(self, graph):
        io = single_node(graph, self.name).inputs["q"].data_type
        if io is not D.BFLOAT16:
            raise cudnn.cudnnGraphNotSupportedError(f"{self.name}: io dtype {io.name}")

    def execute(self, graph, data, ctx):
        pass


@pytest.fixture(autouse=True)
def stand_in_family(monkeypatch):
    module = types.ModuleType("explain_test_engines")
    module.GdnWideEngine, module.GdnBf16Engine = GdnWideEngine, GdnBf16Engine
    monkeypatch.setitem(sys.modules, "explain_test_engines", module)
    monkeypatch.setitem(sys.modules, "explain_test_no_backend", None)
    monkeypatch.setattr(backend_source, "ADAPTER_MODULE", "explain_test_no_backend")
    family = EngineFamily("gdn", 20100, frozenset({cudnn.NodeType.GDN, cudnn.NodeType.GDN_BWD}), (
        EngineSlot("gdn_absent", 0, "explain_test_missing.gdn_engine", "GdnAbsentEngine"),
        EngineSlot("gdn_wide", 1, "explain_test_engines", "GdnWideEngine"),
        EngineSlot("gdn_bf16", 2, "explain_test_engines", "GdnBf16Engine"),
    ))
    monkeypatch.setattr(manifest, "MANIFEST", (family,))
    manifest.clear_engine_cache()
    backend_source.reset_backend_adapter()
    yield
    manifest.clear_engine_cache()
    backend_source.reset_backend_adapter()


def test_claims_declines_absences_and_ranks():
    g, _ = la_graph("gdn")
    ex = g.explain_plans()
    assert g.state.planned and ex.error is None and ex.family == "gdn"
    rows = {r.name: r for r in ex.engines}
    assert rows["gdn_absent"].status == "absent" and "explain_test_missing" in rows["gdn_absent"].reason
    assert rows["gdn_wide"].status == "claimed"
    assert [(p.rank, p.knobs) for p in rows["gdn_wide"].proposed] == [(0, "{'BT': 64}"),
                                                                      (1, "{'BT': 32}")]
    assert rows["gdn_bf16"].status == "claimed" and rows["gdn_bf16"].proposed[0].rank == 2
    assert ex.backend.declined.startswith("No valid engine configs for GDN")
    assert [(p.rank, p.engine_id, p.side) for p in ex.plans] == [
        (0, 20101, "python"), (1, 20101, "python"), (2, 20102, "python")]
    text = str(ex)
    assert "claimed   gdn_wide [20101, manifest]" in text
    assert "absent    gdn_absent [20100, manifest]: not installed" in text
    assert "*  0  gdn_wide[BT=64]  [python 20101]" in text


def test_an_unplannable_graph_is_explained_not_raised():
    g, _ = la_graph("gdn_bwd", dtypes={"q": D.HALF, "k": D.HALF, "v": D.HALF, "dO": D.HALF})
    ex = g.explain_plans()
    rows = {r.name: r for r in ex.engines}
    assert rows["gdn_wide"].status == "declined" and "forward only" in rows["gdn_wide"].reason
    assert rows["gdn_bf16"].reason == "cudnnGraphNotSupportedError: gdn_bf16: io dtype HALF"
    assert ex.plans == () and "no engine (python or backend) proposed a plan" in ex.error
    assert "plan list: empty (cudnnGraphNotSupportedError: no engine proposed a plan" \
        in ex.render()
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="gdn_wide \\(20101\\): declined"):
        g.create_execution_plans()


def test_a_graph_every_engine_declines_is_explained():
    g = cudnn.pygraph()
    dims = {"q": [8, 2, 16], "k": [8, 2, 16], "v": [8, 2, 8], "g": [8, 2], "beta": [8, 2],
            "cu_seqlens": [3]}
    t = {p: g.tensor(d, data_type=D.INT32 if p == "cu_seqlens" else D.BFLOAT16, name=p)
         for p, d in dims.items()}
    g.gdn(**t)
    g.relu(t["g"])  # a second node: linear-attention engines serve single-node graphs
    ex = g.explain_plans()
    declined = [r for r in ex.engines if r.status == "declined"]
    assert len(declined) == 2
    assert all("single-node graphs; this graph has 2 nodes" in r.reason for r in declined)


def test_a_graph_that_does_not_validate_is_explained():
    g = cudnn.pygraph()
    dims = {"q": [8, 2, 16], "k": [8, 2, 16], "v": [8, 2, 8], "g": [8, 2], "beta": [8, 2],
            "cu_seqlens": [3]}
    t = {p: g.tensor(d, data_type=D.INT32 if p == "cu_seqlens" else D.BFLOAT16, name=p)
         for p, d in dims.items()}
    g.gdn(**t, allow_neg_eigval=True)  # needs use_beta_sigmoid: validate() refuses
    ex = g.explain_plans()
    assert ex.engines == () and "allow_neg_eigval requires use_beta_sigmoid" in ex.error
    assert "plan list: none, the graph did not validate: cudnnGraphNotSupportedError" in str(ex)
    assert not g.is_frozen


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
