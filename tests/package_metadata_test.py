"""The distribution's metadata is consistent: tools/bzl/package.bzl (read by Bazel's wheel
and setup.py) against the package itself and its own rules."""

import importlib.util
from pathlib import Path

import pytest

import cudnn

TOOLS = Path(__file__).resolve().parent.parent / "tools" / "bzl"


def _package() -> dict:
    spec = importlib.util.spec_from_file_location("starlark_values", TOOLS / "starlark_values.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.read_values(TOOLS / "package.bzl")


def test_the_package_reports_the_distribution_version():
    assert cudnn.__version__ == _package()["VERSION"]


def test_all_is_the_union_of_the_other_extras():
    extras = _package()["EXTRA_REQUIRES"]
    others = {req for name, reqs in extras.items() if name != "all" for req in reqs}
    assert sorted(extras["all"]) == sorted(others)


def test_every_engine_extra_brings_torch():
    # the engines launch on torch streams: an extra without torch installs an engine that
    # can only decline
    extras = _package()["EXTRA_REQUIRES"]
    for name in ("cutile", "frost"):
        assert any(req.startswith("torch") for req in extras[name]), name


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
