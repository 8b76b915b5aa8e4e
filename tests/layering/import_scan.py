"""Finds imports of forbidden modules (by default the cuDNN backend) in Python source,
static or by literal module name.

Catches `import cudnn.backend`, `from cudnn import _pybind_module`, relative forms such as
`from ...backend import x` (resolved against the file's own package), and
`importlib.import_module("cudnn.backend")` / `__import__("cudnn._pybind_module")`.
"""

import ast
from typing import List, NamedTuple

FORBIDDEN = ("cudnn.backend", "cudnn._pybind_module")


class Finding(NamedTuple):
    line: int
    module: str


def _is_forbidden(module: str, forbidden: tuple) -> bool:
    return any(module == f or module.startswith(f + ".") for f in forbidden)


def _resolve(package: str, level: int, module: str) -> str:
    """Absolute name of `from <level dots><module> import ...` written in `package`."""
    if level == 0:
        return module
    parts = package.split(".")
    base = parts[: len(parts) - (level - 1)] if level - 1 <= len(parts) else []
    return ".".join(base + ([module] if module else []))


def _literal_import_target(node: ast.Call) -> str:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name not in ("import_module", "__import__") or not node.args:
        return ""
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else ""


def forbidden_imports(source: str, package: str, filename: str = "<source>",
                      forbidden: tuple = FORBIDDEN) -> List[Finding]:
    """Imports of `forbidden` modules (and their submodules) in `source`, a module of the
    dotted `package`."""
    findings = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(package, node.level, node.module or "")
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Call):
            names = [_literal_import_target(node)]
        else:
            continue
        findings.extend(Finding(node.lineno, n) for n in names
                        if n and _is_forbidden(n, forbidden))
    return findings
