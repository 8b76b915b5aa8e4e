"""`install()`: make existing FLA callers and transformers models run this library's kernels.

After `cudnn.linear_attention.fla.install()`, every loaded module attribute that is one
of FLA 0.6's public GDN / KDA / GDN-2 ops, or one of the torch fallbacks transformers
models call in their place (_replacements.py), is this package's function of that name;
modules imported later are patched as they load (_import_hook.py). So
`Qwen3NextGatedDeltaNet.forward`, which looks `torch_chunk_gated_delta_rule` up in its
module on every call, runs `cudnn.linear_attention.ops.gated_delta_net` from the next call
on, whether the model was built before or after install(), with or without FLA installed.
`uninstall()` puts every replaced attribute back and removes the hook; `installed()` is
the pair as a context manager. Importing cudnn or this package changes nothing: only
install() does.
"""
from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from cudnn.linear_attention.fla._import_hook import PatchOnImport
from cudnn.linear_attention.fla._replacements import replacement_for

_lock = threading.RLock()
_hook: PatchOnImport | None = None
#: (module, attribute, the object it held) for every replacement, to undo them.
_replaced: list[tuple[ModuleType, str, Any]] = []


def _patch(module: ModuleType) -> int:
    namespace = getattr(module, "__dict__", None)
    if not isinstance(namespace, dict):
        return 0
    count = 0
    for name, obj in list(namespace.items()):
        drop_in = replacement_for(obj)
        if drop_in is not None and obj is not drop_in:
            with _lock:
                _replaced.append((module, name, obj))
                namespace[name] = drop_in
            count += 1
    return count


def install() -> int:
    """Route FLA's GDN / KDA / GDN-2 ops and transformers' fallbacks for them to this
    library (see the module docstring). Returns how many attributes it replaced now;
    calling it again is harmless."""
    global _hook
    with _lock:
        if _hook is None:
            _hook = PatchOnImport(_patch)
            sys.meta_path.insert(0, _hook)
        return sum(_patch(m) for m in list(sys.modules.values()) if m is not None)


def uninstall() -> None:
    """Undo install(): the replaced attributes hold their originals again."""
    global _hook
    with _lock:
        if _hook is not None and _hook in sys.meta_path:
            sys.meta_path.remove(_hook)
        _hook = None
        while _replaced:
            module, name, original = _replaced.pop()
            current = module.__dict__.get(name)
            if replacement_for(original) is current:  # not re-bound by someone else since
                module.__dict__[name] = original


def is_installed() -> bool:
    return _hook is not None


@contextlib.contextmanager
def installed() -> Iterator[None]:
    """install() for the duration of a `with` block (tests, scoped use)."""
    was = is_installed()
    install()
    try:
        yield
    finally:
        if not was:
            uninstall()
