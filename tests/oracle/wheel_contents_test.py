"""The installable wheel ships the router, the extension, the command line and the
license, and no test code (the contract oracle above all).

Runs under Bazel, which builds `//:wheel` (a folder holding the wheel) and passes its path
in CUDNN_WHEEL; elsewhere set CUDNN_WHEEL to a built wheel or its folder, or the test
skips saying so.
"""
from __future__ import annotations

import os
import sysconfig
import zipfile

import pytest

WHEEL = os.environ.get("CUDNN_WHEEL")


def _wheel_file(path: str) -> str:
    if os.path.isdir(path):
        (name,) = [n for n in os.listdir(path) if n.endswith(".whl")]
        return os.path.join(path, name)
    return path

# Test-only modules (file names) that must never be packaged.
TEST_ONLY = ("torch_matmul_engine.py", "fake_backend.py", "la_graphs.py")


@pytest.fixture(scope="module")
def names():
    if not WHEEL:
        pytest.skip("CUDNN_WHEEL is not set (run under bazel: //tests/oracle:wheel_contents_test)")
    with zipfile.ZipFile(_wheel_file(WHEEL)) as wheel:
        return wheel.namelist()


def test_the_wheel_holds_the_router(names):
    for module in ("base", "engine_ids", "manifest", "heuristics", "router", "explain",
                   "graph_api"):
        assert f"cudnn/engines/{module}.py" in names
    assert "cudnn/linear_attention/common/facts.py" in names


def test_the_wheel_holds_the_extension_the_cli_and_the_license(names):
    assert f"cudnn/_pybind_module{sysconfig.get_config_var('EXT_SUFFIX')}" in names
    assert "cudnn/__main__.py" in names and "cudnn/cli/main.py" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    tag = os.path.basename(_wheel_file(WHEEL)).split("-", 2)[2]
    assert tag.startswith("cp3") and "manylinux_2_" in tag and tag.endswith("x86_64.whl"), tag


def test_the_wheel_holds_the_fla_drop_in(names):
    for module in ("__init__", "install", "gated_delta_rule", "kda", "gdn2"):
        assert f"cudnn/linear_attention/fla/{module}.py" in names


def test_the_wheel_holds_no_test_code(names):
    shipped_tests = [n for n in names if n.startswith("tests/") or "/tests/" in n
                     or n.endswith("_test.py") or n.rsplit("/", 1)[-1] in TEST_ONLY]
    assert shipped_tests == []
    assert not [n for n in names if "oracle" in n]


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
