"""Make cuTile kernels compile as if their sources sat where the GPU machine reads them.

cuTile writes each kernel's source locations (absolute file path, line, column) into the
TileIR bytecode, and its disk-cache key hashes that bytecode: the same kernel imported
from /work/wt/x/engines_cutile/... and from /work/main/engines_cutile/... gets two keys.
The GPU machine runs the lead's checkout at /work/main (the path in every carried cache
entry's remarks), so entries made here must carry that path.  `relocate` rewrites the
file name of every function defined under a local source tree to the same relative path
under the remote root, and puts the local text in `linecache` under the remote name, so
cuTile's front end (inspect.getfile + inspect.findsource) reads this tree's source and
records the remote path.  Nothing on disk changes.
"""
from __future__ import annotations

import linecache
import os
import sys
import types

DEFAULT_REMOTE_ROOT = "/work/main"


def _rewrite_code(code: types.CodeType, old: str, new: str) -> types.CodeType:
    consts = tuple(_rewrite_code(c, old, new) if isinstance(c, types.CodeType) else c
                   for c in code.co_consts)
    return code.replace(co_filename=new if code.co_filename == old else code.co_filename,
                        co_consts=consts)


def _functions_of(module: types.ModuleType):
    """Plain functions and cuTile kernels' Python functions defined in `module`."""
    for value in list(vars(module).values()):
        fn = getattr(getattr(value, "_annotated_function", None), "pyfunc", None) or value
        while isinstance(fn, types.FunctionType):
            yield fn
            fn = getattr(fn, "__wrapped__", None)


def _remote_name(filename: str, local_root: str, remote_root: str) -> str | None:
    rel = os.path.relpath(os.path.abspath(filename), local_root)
    if rel.startswith(".."):
        return None
    return os.path.join(remote_root, rel)


def relocate(module_prefix: str, local_root: str, remote_root: str = DEFAULT_REMOTE_ROOT
             ) -> dict[str, str]:
    """Point every function of the imported modules `module_prefix*` at `remote_root`.

    Returns {local file: remote file} for the files it relocated."""
    local_root = os.path.abspath(local_root)
    moved: dict[str, str] = {}
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not name.startswith(module_prefix) or path is None:
            continue
        remote = _remote_name(path, local_root, remote_root)
        if remote is None or remote == os.path.abspath(path):
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        lines = text.splitlines(keepends=True)
        # mtime None: linecache.checkcache keeps the entry although no such file exists
        # here (or a different one does)
        linecache.cache[remote] = (len(text), None, lines, remote)
        for fn in _functions_of(module):
            if fn.__code__.co_filename == path:
                fn.__code__ = _rewrite_code(fn.__code__, path, remote)
        moved[path] = remote
    # cuTile keeps each function's parsed form (with its file name) per function object
    hir = sys.modules.get("cuda.tile._passes.ast2hir")
    if moved and hir is not None:
        hir.get_function_hir.cache_clear()
    return moved
