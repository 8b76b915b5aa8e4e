"""The only Python way into the C++ extension `cudnn._pybind_module`.

The extension is imported lazily, on the first question asked here, and libcudnn is then
dlopen()ed by the extension from the candidates this module lists: $CUDNN_LIBRARY_PATH,
the nvidia-cudnn-cu13/-cu12 wheel (nvidia/cudnn/lib, nvidia/cu13/lib, nvidia/cu12/lib),
then the system soname libcudnn.so.9. Nothing here runs at import time, so `import cudnn`
never depends on the extension, on cuDNN or on a GPU; when any of them is missing,
`is_available()` is False and `unavailable_reason()` says which one and why.

Declines raised by the extension use the IR's `cudnn.cudnnGraphNotSupportedError` when the
IR defines it (installed into the extension on first load).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import threading
from types import ModuleType
from typing import Callable, List, Optional, Sequence

# The BINDING_API_VERSION this Python code was written against (bindings/module.cc).
EXPECTED_BINDING_API_VERSION = 3

EXTENSION_MODULE = "cudnn._pybind_module"
CUDNN_SONAME = "libcudnn.so.9"
# Where the pip wheels put libcudnn, relative to a root of the `nvidia` namespace package.
_WHEEL_LIBRARY_DIRS = ("cudnn/lib", "cu13/lib", "cu12/lib")


class BackendUnavailableError(RuntimeError):
    """The extension or libcudnn cannot be used here; the message says why."""


def library_candidates() -> List[str]:
    """Paths (or sonames) the extension tries to dlopen, in order."""
    candidates: List[str] = []
    explicit = os.environ.get("CUDNN_LIBRARY_PATH")
    if explicit:
        candidates.append(explicit)
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations or ()) if spec is not None else []
    for root in roots:
        for sub in _WHEEL_LIBRARY_DIRS:
            path = os.path.join(root, sub, CUDNN_SONAME)
            if os.path.isfile(path) and path not in candidates:
                candidates.append(path)
    candidates.append(CUDNN_SONAME)
    return candidates


class BackendLoader:
    """Lazy, thread-safe access to the extension and its libcudnn.

    Tests build their own instance with another module name or candidate list; product code
    uses the module-level functions, which share one instance.
    """

    def __init__(
        self,
        module_name: str = EXTENSION_MODULE,
        candidates: Callable[[], Sequence[str]] = library_candidates,
    ) -> None:
        self._module_name = module_name
        self._candidates = candidates
        self._lock = threading.Lock()
        self._module: Optional[ModuleType] = None
        self._reason: Optional[str] = None  # why the extension itself is unusable
        self._imported = False
        self._available: Optional[bool] = None  # the first answer stands for the process

    def extension(self) -> Optional[ModuleType]:
        """The extension module, or None when it cannot be imported or is stale."""
        with self._lock:
            if not self._imported:
                self._imported = True
                self._module, self._reason = self._import()
            return self._module

    def _import(self):
        try:
            module = importlib.import_module(self._module_name)
        except ImportError as err:  # missing .so, or one built for another Python/libstdc++
            return None, f"the C++ extension {self._module_name} cannot be imported: {err}"
        version = getattr(module, "BINDING_API_VERSION", None)
        if version != EXPECTED_BINDING_API_VERSION:
            return None, (
                f"the C++ extension {self._module_name} is stale: it reports "
                f"BINDING_API_VERSION={version!r}, this Python code expects "
                f"{EXPECTED_BINDING_API_VERSION}; rebuild it (Bazel, or `pip install -e .` without Bazel)"
            )
        _install_graph_not_supported_error(module)
        return module, None

    def is_available(self) -> bool:
        """True when the extension imports and a cuDNN 9 library is loaded."""
        module = self.extension()
        if module is None:
            return False
        with self._lock:
            if self._available is None:
                self._available = bool(module.load_cudnn(list(self._candidates())))
            return self._available

    def unavailable_reason(self) -> str:
        """Why the backend cannot be used, or '' when it can."""
        if self.is_available():
            return ""
        if self._module is None:
            return self._reason or "the C++ extension is not available"
        return self._module.unavailable_reason()

    def load(self) -> ModuleType:
        """The extension with libcudnn loaded; raises BackendUnavailableError otherwise."""
        if not self.is_available():
            raise BackendUnavailableError(self.unavailable_reason())
        assert self._module is not None
        return self._module

    def cudnn_version(self) -> Optional[int]:
        """cudnnGetVersion() of the loaded library (e.g. 91900), or None."""
        return self._module.cudnn_version() if self.is_available() else None

    def graph_not_supported_error(self) -> type:
        """The exception class the extension raises for declines."""
        module = self.extension()
        if module is not None:
            return module.graph_not_supported_error()
        return _ir_graph_not_supported_error() or BackendUnavailableError


def _ir_graph_not_supported_error() -> Optional[type]:
    try:
        import cudnn  # the package root lives in ir/; importing it loads no engine
    except ImportError:
        return None
    cls = getattr(cudnn, "cudnnGraphNotSupportedError", None)
    return cls if isinstance(cls, type) and issubclass(cls, Exception) else None


def _install_graph_not_supported_error(module: ModuleType) -> None:
    cls = _ir_graph_not_supported_error()
    if cls is not None:
        module.set_graph_not_supported_error(cls)


_DEFAULT = BackendLoader()


def extension() -> Optional[ModuleType]:
    """The extension module (libcudnn not necessarily loaded), or None."""
    return _DEFAULT.extension()


def is_available() -> bool:
    return _DEFAULT.is_available()


def unavailable_reason() -> str:
    return _DEFAULT.unavailable_reason()


def load() -> ModuleType:
    return _DEFAULT.load()


def cudnn_version() -> Optional[int]:
    return _DEFAULT.cudnn_version()


def graph_not_supported_error() -> type:
    return _DEFAULT.graph_not_supported_error()
