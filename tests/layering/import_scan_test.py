"""The backend-import scanner flags every import form it claims to, and nothing else."""

import pytest

from tests.layering.import_scan import forbidden_imports

PKG = "cudnn.linear_attention.cutile"


@pytest.mark.parametrize("source", [
    "import cudnn.backend",
    "import cudnn.backend.lowering as low",
    "import cudnn._pybind_module",
    "from cudnn.backend import adapter",
    "from cudnn import backend",
    "from cudnn import ops, _pybind_module",
    "from ... import backend",
    "from ...backend.adapter import CudnnBackendAdapter",
    "import importlib\nimportlib.import_module('cudnn.backend')",
    "def late():\n    __import__('cudnn._pybind_module')",
    "from importlib import import_module\nimport_module('cudnn.backend.lowering')",
])
def test_flags_backend_imports(source):
    assert forbidden_imports(source, PKG), source


@pytest.mark.parametrize("source", [
    "import cudnn",
    "from cudnn import ops",
    "import cudnn.backends_are_not_this",
    "from .. import ops",
    "from . import backend",          # cudnn.linear_attention.cutile.backend: an engine module
    "importlib.import_module(name)",  # not a literal: cannot be judged statically
    "x = 'cudnn.backend'",
])
def test_leaves_other_imports_alone(source):
    assert forbidden_imports(source, PKG) == [], source


def test_reports_the_line():
    findings = forbidden_imports("import os\n\nfrom cudnn import backend\n", PKG)
    assert [f.line for f in findings] == [3]


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
