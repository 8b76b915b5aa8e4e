#!/usr/bin/env python3
"""Where this checkout's Python sources are, for pytest and for scripts run from source.

`paths()` is the repository root (for `tests.*`, `bench/` helpers) followed by every
source root of tools/bzl/package.bzl (ops/, ir/, router/, ...: each holds a `cudnn/...`
tree, as Bazel's `imports = ["."]` puts them on the path). The root conftest.py puts them
on sys.path, so `python -m pytest` from the repository root needs no PYTHONPATH. For a
script outside pytest, print them:

    PYTHONPATH=$(python3 tools/pythonpath.py) python3 bench/bench_linear_attention.py
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def paths(repo: Path = REPO) -> list[str]:
    spec = importlib.util.spec_from_file_location(
        "starlark_values", repo / "tools" / "bzl" / "starlark_values.py")
    values = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(values)
    roots = values.read_values(repo / "tools" / "bzl" / "package.bzl")["SOURCE_ROOTS"]
    return [str(repo)] + [str(repo / root) for root in roots]


if __name__ == "__main__":
    print(os.pathsep.join(paths()))
