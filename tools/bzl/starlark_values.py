"""Reads the literal values a .bzl file assigns at top level, for Python tools.

Lists that both Bazel and plain-Python builds need (the source roots, the extension's
sources, the package metadata) are written once, as Starlark assignments of literals in a
.bzl file; Bazel loads the file, and `read_values(path)` gives the same values to
setup.py, the root conftest.py and the tools. Anything but `NAME = <literal>` (and the
file's docstring) is an error: these files stay plain data.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Any


def read_values(path: str | Path) -> dict[str, Any]:
    """{name: value} of every top-level `NAME = <literal>` in the .bzl file at `path`."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"), str(path))
    values: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            raise ValueError(f"{path}:{node.lineno}: only `NAME = <literal>` assignments "
                             "may appear in a file both Bazel and Python read")
        values[node.targets[0].id] = ast.literal_eval(node.value)
    return values
