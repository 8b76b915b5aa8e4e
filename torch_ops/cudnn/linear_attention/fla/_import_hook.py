"""An import hook that patches FLA and transformers model modules imported after
`install()`: it finds the module as Python would (the other finders on sys.meta_path)
and, once the module has run, hands it to a callback (install's patcher).

Only modules named `fla`, `fla.*` or `transformers.models.*` are touched; every other
import is answered by None at once (the next finder takes it).
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from cudnn.linear_attention.fla._replacements import watched


class _PatchingLoader(importlib.abc.Loader):
    """The module's own loader, followed by the callback."""

    def __init__(self, loader: Any, after: Callable[[ModuleType], None]) -> None:
        self._loader = loader
        self._after = after

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._after(module)

    def __getattr__(self, name: str) -> Any:  # get_source, is_package, ... (inspect uses them)
        return getattr(self._loader, name)


class PatchOnImport(importlib.abc.MetaPathFinder):
    def __init__(self, after: Callable[[ModuleType], None]) -> None:
        self._after = after

    def find_spec(self, fullname: str, path: Any, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if not watched(fullname):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchingLoader(spec.loader, self._after)
                return spec
        return None
