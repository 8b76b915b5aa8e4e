"""//:demo reports the engine and op tables it finds, and degrades only on missing layers."""

import importlib.abc
import importlib.machinery
import sys
import types

import pytest

import demo


def _spec(name, group):
    return types.SimpleNamespace(name=name, group=group)


def _family(name, base, slots):
    return types.SimpleNamespace(
        name=name, engine_id=base,
        slots={engine: types.SimpleNamespace(slot=s) for engine, s in slots.items()})


@pytest.fixture
def fake_layers(monkeypatch):
    registry = types.ModuleType(demo.OPS_MODULE)
    registry.all_specs = lambda: {
        "add": _spec("add", "pointwise"), "mul": _spec("mul", "pointwise"),
        "relu": _spec("relu", "pointwise"), "matmul": _spec("matmul", "matmul"),
    }
    manifest = types.ModuleType(demo.MANIFEST_MODULE)
    manifest.MANIFEST = (
        _family("cutile", 20000, {"kda_cutile": 1, "gdn_cutile": 0}),
        _family("frost", 20100, {"gdn_frost": 3}),
    )
    monkeypatch.setitem(sys.modules, demo.OPS_MODULE, registry)
    monkeypatch.setitem(sys.modules, demo.MANIFEST_MODULE, manifest)


def test_counts_ops_per_group_and_numbers_engines_from_block_base(fake_layers):
    lines = demo.report(list_ops=True)
    words = [line.split() for line in lines]
    assert "engines: 3 in 2 families" in lines
    assert words.index(["20000", "gdn_cutile"]) < words.index(["20001", "kda_cutile"])
    assert ["20103", "gdn_frost"] in words
    assert "ops: 4 in 2 groups" in lines
    assert ["matmul", "1"] in words and ["pointwise", "3"] in words
    assert words.index(["pointwise", "3"]) < words.index(["relu"])


def test_missing_layers_are_reported_not_raised(monkeypatch):
    # None in sys.modules makes the import fail exactly as a module that does not exist.
    monkeypatch.setitem(sys.modules, demo.OPS_MODULE, None)
    monkeypatch.setitem(sys.modules, demo.MANIFEST_MODULE, None)
    lines = demo.report()
    assert f"ops: {demo.OPS_MODULE} is not present yet" in lines
    assert f"engines: {demo.MANIFEST_MODULE} is not present yet" in lines


class _NeedsMissingDependency(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds MANIFEST_MODULE, whose body fails on an uninstalled dependency."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == demo.MANIFEST_MODULE:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        raise ModuleNotFoundError("No module named 'not_installed_dep'", name="not_installed_dep")


def test_a_present_layer_with_a_missing_dependency_is_an_error(monkeypatch):
    monkeypatch.delitem(sys.modules, demo.MANIFEST_MODULE, raising=False)
    monkeypatch.setattr(sys, "meta_path", [_NeedsMissingDependency()] + sys.meta_path)
    with pytest.raises(ModuleNotFoundError, match="not_installed_dep"):
        demo.optional_import(demo.MANIFEST_MODULE)


def test_report_on_this_tree_names_every_source_root():
    lines = demo.report()
    roots = lines[0].split(": ", 1)[1].split()
    assert "ir" in roots and len(roots) == len(set(roots))
    assert any(line.startswith("engines: ") for line in lines)
    assert any(line.startswith("ops: ") for line in lines)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
