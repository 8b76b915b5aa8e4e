"""The distribution's metadata is consistent: tools/bzl/package.bzl (read by Bazel's wheel
and setup.py) against the package itself and its own rules."""

import importlib.util
import re
import sys
from pathlib import Path

import pytest

import cudnn

REPO = Path(__file__).resolve().parent.parent
TOOLS = REPO / "tools" / "bzl"


def _values(path: Path) -> dict:
    spec = importlib.util.spec_from_file_location("starlark_values", TOOLS / "starlark_values.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.read_values(path)


def _package() -> dict:
    return _values(TOOLS / "package.bzl")


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


def test_no_extra_goes_through_the_cuda_toolkit_metapackage():
    # torch's CUDA 13 wheels pin cuda-toolkit==13.0.2; cuda-tile[tileiras] and any direct
    # cuda-toolkit requirement ask for another release of it, and pip then finds no
    # solution next to the user's torch (seen on the H200 machine). The compiler wheels are
    # named one by one instead, and the cuTile engine must find what they install.
    extras = _package()["EXTRA_REQUIRES"]
    for name, reqs in extras.items():
        for req in reqs:
            assert not req.startswith("cuda-toolkit"), (name, req)
            assert not req.startswith("cuda-tile["), (name, req)
    cutile = {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0] for r in extras["cutile"]}
    assert {"nvidia-cuda-tileiras", "nvidia-cuda-nvcc", "nvidia-nvvm"} <= cutile


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib is new in Python 3.11")
def test_an_isolated_build_brings_the_headers_setup_py_looks_for():
    # pip's isolated build sees only the build requirements: each header's first-choice
    # wheel must be one of them, or `pip install .` fails on a machine without cuDNN
    import tomllib

    build = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]
    required = {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in build["requires"]}
    assert {"setuptools", "pybind11"} <= required
    headers = _values(REPO / "backend_cc" / "sources.bzl")["EXTERNAL_HEADERS"]
    assert "cudnn_graph.h" in headers
    for header, wheels in headers.items():
        assert wheels[0] in required, (header, wheels[0])


def test_the_extras_ask_for_the_cudnn_the_build_compiles_against():
    # the `cudnn` extra and the header wheel are one CUDA flavour
    headers = _values(REPO / "backend_cc" / "sources.bzl")["EXTERNAL_HEADERS"]
    extra = _package()["EXTRA_REQUIRES"]["cudnn"]
    assert any(req.startswith(headers["cudnn_graph.h"][0]) for req in extra), extra


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
