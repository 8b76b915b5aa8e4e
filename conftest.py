"""Lets `python -m pytest` from the repository root import this checkout's sources.

First on sys.path go the repository root and every source root (tools/pythonpath.py,
from the list in tools/bzl/package.bzl), then what Bazel's test-only libraries put
there: each source root's `tests/` folder (helpers imported by bare name, such as
`la_graphs` or `fake_cudnn`) and tools/gpu (the cuTile cache tools some engine tests
drive). Bazel runs its tests from its own runfiles tree and never reads this file;
tests/conftest.py holds the hooks the tests share.
"""
import importlib.util
import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("pythonpath", _REPO / "tools" / "pythonpath.py")
_pythonpath = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_pythonpath)

_roots = _pythonpath.paths(_REPO)
_helpers = [str(Path(root) / "tests") for root in _roots[1:] if (Path(root) / "tests").is_dir()]
sys.path[:0] = [p for p in (*_roots, *_helpers, str(_REPO / "tools" / "gpu"))
                if p not in sys.path]
