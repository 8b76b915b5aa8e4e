"""A cost in torch's custom-op autograd path that our ops would pay on every call.

torch (2.5 .. 2.13 at least) fills the default arguments back in before it calls an op's
`setup_context` (`torch._library.utils.fill_defaults`), and reads `schema.arguments`
once per argument while doing so. `schema.arguments` builds a fresh list of Argument
objects from C++ each time (~3 us for our 20-argument forward schema), so the fill is
quadratic: ~65 us of the ~110 us a cached autograd call took on the build machine.

`install()` replaces that helper with one that reads each schema's arguments once per
process (kept per schema object, which lives as long as its op) and does the same thing
otherwise (same results for every (args, kwargs); torch_compat_test checks it against
torch's own on our schemas). It is installed when the ops package is imported
and is idempotent; `CUDNN_LA_KEEP_TORCH_FILL_DEFAULTS=1` leaves torch untouched.
"""
from __future__ import annotations

import copy
import os
import threading
from typing import Any

_ORIGINAL_ATTR = "_cudnn_la_original"
#: id(schema) -> (schema, its arguments as (kwarg_only, name, default) tuples); the
#: schema is held so its id cannot be reused by another object.
_ARGUMENTS: dict[int, tuple[Any, tuple[tuple[bool, str, Any], ...]]] = {}
_ARGUMENTS_LOCK = threading.Lock()


def _arguments(schema: Any) -> tuple[tuple[bool, str, Any], ...]:
    entry = _ARGUMENTS.get(id(schema))
    if entry is None or entry[0] is not schema:
        arguments = tuple((a.kwarg_only, a.name, a.default_value) for a in schema.arguments)
        with _ARGUMENTS_LOCK:
            _ARGUMENTS[id(schema)] = entry = (schema, arguments)
    return entry[1]


def _fresh(value: Any) -> Any:
    # torch hands out a new default object per call; keep mutable ones (int[] defaults)
    # from being shared between calls
    return copy.copy(value) if isinstance(value, (list, dict)) else value


def fill_defaults(schema: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
                  ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """(args, kwargs) with every argument the schema has: positional ones past `args`
    and keyword-only ones missing from `kwargs` take their schema default."""
    positional = list(args)
    keyword: dict[str, Any] = {}
    for index, (kwarg_only, name, default) in enumerate(_arguments(schema)):
        if kwarg_only:
            keyword[name] = kwargs[name] if name in kwargs else _fresh(default)
        elif index >= len(args):
            positional.append(_fresh(default))
    return tuple(positional), keyword


def install() -> bool:
    """Use `fill_defaults` in torch's custom-op autograd path; True when installed."""
    if os.environ.get("CUDNN_LA_KEEP_TORCH_FILL_DEFAULTS") == "1":
        return False
    try:
        from torch._library import utils
    except ImportError:  # a torch without torch.library custom ops has no such path
        return False
    current = getattr(utils, "fill_defaults", None)
    if current is None:
        return False
    if current is not fill_defaults:
        fill_defaults.__dict__.setdefault(_ORIGINAL_ATTR, current)
        utils.fill_defaults = fill_defaults
    return True


def original_fill_defaults() -> Any:
    """torch's own helper (for the equivalence test), or None if install() never ran."""
    return fill_defaults.__dict__.get(_ORIGINAL_ATTR)
