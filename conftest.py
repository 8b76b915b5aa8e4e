"""Lets `python -m pytest` from the repository root import this checkout's sources.

The repository root and every source root (tools/pythonpath.py, from the list in
tools/bzl/package.bzl) go first on sys.path, plus tools/gpu for the cuTile cache tools
some engine tests drive. Bazel runs its tests from its own runfiles tree and never reads
this file; tests/conftest.py holds the hooks every test shares.
"""
import importlib.util
import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("pythonpath", _REPO / "tools" / "pythonpath.py")
_pythonpath = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_pythonpath)
sys.path[:0] = [p for p in (*_pythonpath.paths(_REPO), str(_REPO / "tools" / "gpu"))
                if p not in sys.path]
