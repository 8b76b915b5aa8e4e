"""The manifest: linear-attention rows, id rules, family routing, and lazy engine loading
(a missing module is a recorded absence, never an error)."""
from __future__ import annotations

import os
import subprocess
import sys
import types

import pytest
from la_graphs import la_graph

import cudnn
from cudnn.engines import engine_ids, manifest
from cudnn.engines.base import BaseEngine
from cudnn.engines.manifest import EngineFamily, EngineSlot
from cudnn.ops.node_type import NodeType

D = cudnn.data_type


def test_linear_attention_rows():
    rows = {(fam.name, fam.engine_id): {name: (s.slot, s.module, s.class_name)
                                        for name, s in fam.slots.items()}
            for fam in manifest.MANIFEST}
    frost, cutile = "cudnn.linear_attention.frost", "cudnn.linear_attention.cutile"
    decode = f"{frost}.decode_engine"
    assert rows == {
        ("gdn", 20100): {"gdn_frost": (0, f"{frost}.gdn_engine", "GdnFrostEngine"),
                         "gdn_cutile": (1, f"{cutile}.gdn_engine", "GdnCuTileEngine"),
                         "gdn_summary_frost": (2, f"{frost}.gdn_summary_engine",
                                               "GdnSummaryFrostEngine"),
                         "gdn_frost_decode": (3, decode, "GdnFrostDecodeEngine")},
        ("kda", 20200): {"kda_frost": (0, f"{frost}.kda_engine", "KdaFrostEngine"),
                         "kda_cutile": (1, f"{cutile}.kda_engine", "KdaCuTileEngine"),
                         "kda_summary_frost": (2, f"{frost}.kda_summary_engine",
                                               "KdaSummaryFrostEngine"),
                         "kda_frost_decode": (3, decode, "KdaFrostDecodeEngine")},
        ("gdn2", 20300): {"gdn2_frost": (0, f"{frost}.gdn2_engine", "Gdn2FrostEngine"),
                          "gdn2_summary_frost": (1, f"{frost}.gdn2_summary_engine",
                                                 "Gdn2SummaryFrostEngine"),
                          "gdn2_frost_decode": (2, decode, "Gdn2FrostDecodeEngine")},
    }


@pytest.mark.parametrize("node_type, family", [
    (NodeType.GDN, "gdn"), (NodeType.GDN_BWD, "gdn"), (NodeType.GDN_SUMMARY_BWD, "gdn"),
    (NodeType.KDA, "kda"), (NodeType.KDA_BWD, "kda"), (NodeType.GDN2, "gdn2"),
    (NodeType.GDN2_BWD, "gdn2"),
])
def test_anchors(node_type, family):
    owners = [f.name for f in manifest.MANIFEST if node_type in f.anchors]
    assert owners == [family]


def test_family_for_a_graph():
    assert manifest.family_for(la_graph("kda_bwd")[0]).name == "kda"
    assert manifest.family_for(la_graph("gdp")[0]) is None  # no engines for GDP here
    g = cudnn.pygraph()
    x = g.tensor([2, 2], data_type=D.FLOAT)
    g.relu(x)
    assert manifest.family_for(g) is None


def _family(*slots, name="gdn", base=engine_ids.GDN_ID_BASE):
    return EngineFamily(name, base, frozenset({NodeType.GDN, NodeType.GDN_BWD}), tuple(slots))


@pytest.mark.parametrize("manifest_rows, match", [
    ((_family(base=20_000),), "reserved block base"),
    ((_family(EngineSlot("a", 0, "m", "A"), EngineSlot("b", 0, "m", "B")),), "distinct"),
    ((_family(EngineSlot("a", 100, "m", "A")),), "distinct and in"),
    ((_family(EngineSlot("a", 0, "m", "A")),
      EngineFamily("kda", engine_ids.KDA_ID_BASE, frozenset(), (EngineSlot("a", 0, "m", "A"),))),
     "appears twice"),
    ((_family(), EngineFamily("kda", engine_ids.KDA_ID_BASE, frozenset({NodeType.GDN}), ())),
     "anchors both"),
])
def test_check_manifest_rejects_broken_rows(manifest_rows, match):
    manifest.check_manifest(manifest.MANIFEST)
    with pytest.raises(ValueError, match=match):
        manifest.check_manifest(manifest_rows)


# -- lazy loading -------------------------------------------------------------------------
class FakeGdnEngine(BaseEngine):
    name = "gdn_fake"


@pytest.fixture
def fake_family(monkeypatch):
    """A gdn family whose slots point at an in-memory module and at missing ones."""
    module = types.ModuleType("fake_gdn_engines")
    module.FakeGdnEngine = FakeGdnEngine
    monkeypatch.setitem(sys.modules, "fake_gdn_engines", module)
    monkeypatch.setitem(sys.modules, "engine_needing_missing_dep", None)
    family = _family(
        EngineSlot("gdn_missing", 0, "no_such_module_anywhere.gdn_engine", "GdnMissingEngine"),
        EngineSlot("gdn_fake", 1, "fake_gdn_engines", "FakeGdnEngine"),
        EngineSlot("gdn_no_class", 2, "fake_gdn_engines", "NotThere"),
        EngineSlot("gdn_dep", 3, "engine_needing_missing_dep", "X"),
    )
    monkeypatch.setattr(manifest, "MANIFEST", (family,))
    manifest.clear_engine_cache()
    yield family
    manifest.clear_engine_cache()


def test_missing_modules_are_recorded_absences(fake_family):
    g, _ = la_graph("gdn")
    engines, absences = manifest.manifest_engines(g)
    assert [type(e) for e in engines] == [FakeGdnEngine]
    assert engines[0].engine_id == engine_ids.GDN_ID_BASE + 1
    assert [(a.name, a.engine_id) for a in absences] == [
        ("gdn_missing", 20100), ("gdn_no_class", 20102), ("gdn_dep", 20103)]
    assert "No module named 'no_such_module_anywhere'" in absences[0].reason
    assert "has no class 'NotThere'" in absences[1].reason
    assert absences[2].reason.startswith("not installed: ")


def test_loaded_engines_are_shared_and_replayable_by_id(fake_family):
    g1, _ = la_graph("gdn")
    g2, _ = la_graph("gdn_bwd")
    e1 = manifest.manifest_engines(g1)[0][0]
    assert manifest.manifest_engines(g2)[0][0] is e1
    assert manifest.engine_for_id(20101) is e1
    assert manifest.engine_for_id(20100) is None  # absent
    assert manifest.engine_for_id(20150) is None and manifest.engine_for_id(30000) is None


def test_nothing_is_imported_for_a_graph_of_no_family(fake_family, monkeypatch):
    monkeypatch.delitem(sys.modules, "fake_gdn_engines")
    g = cudnn.pygraph()
    g.relu(g.tensor([2], data_type=D.FLOAT))
    assert manifest.manifest_engines(g) == ([], [])
    assert "fake_gdn_engines" not in sys.modules


def test_planning_a_family_with_only_absent_engines_reports_them(fake_family, monkeypatch):
    monkeypatch.setattr(manifest, "MANIFEST", (_family(*fake_family.engine_slots[:1]),))
    g, _ = la_graph("gdn")
    with pytest.raises(cudnn.cudnnGraphNotSupportedError, match="gdn_missing \\(20100\\): absent"):
        g.create_execution_plans()


def test_a_bug_while_importing_an_engine_propagates(monkeypatch):
    class Exploding(types.ModuleType):
        def __getattr__(self, name):
            raise RuntimeError("engine module is broken")

    monkeypatch.setitem(sys.modules, "broken_engine_module", Exploding("broken_engine_module"))
    monkeypatch.setattr(manifest, "MANIFEST", (
        _family(EngineSlot("gdn_broken", 0, "broken_engine_module", "GdnBrokenEngine")),))
    manifest.clear_engine_cache()
    with pytest.raises(RuntimeError, match="engine module is broken"):
        manifest.manifest_engines(la_graph("gdn")[0])
    manifest.clear_engine_cache()


def test_an_engine_must_carry_its_manifest_name(fake_family, monkeypatch):
    monkeypatch.setattr(manifest, "MANIFEST", (
        _family(EngineSlot("gdn_renamed", 0, "fake_gdn_engines", "FakeGdnEngine")),))
    manifest.clear_engine_cache()
    with pytest.raises(ValueError, match="declares name 'gdn_fake'"):
        manifest.manifest_engines(la_graph("gdn")[0])


def test_importing_the_router_imports_no_engine_backend_or_torch():
    code = ("import sys, cudnn.engines.graph_api, cudnn.engines.manifest;"
            "bad = [m for m in sys.modules if m.startswith(('torch', 'cudnn.linear_attention',"
            " 'cudnn.backend', 'numpy'))]; print(bad); assert not bad")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
