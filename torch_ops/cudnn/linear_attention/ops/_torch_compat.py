"""A cost in torch's custom-op autograd path that our ops would pay on every call.

torch (2.5 .. 2.13 at least) fills the default arguments back in before it calls an op's
`setup_context` (`torch._library.utils.fill_defaults`), and reads `schema.arguments`
once per argument while doing so. `schema.arguments` builds a fresh list of Argument
objects from C++ each time (~3 us for our 20-argument forward schema), so the fill is
quadratic: ~65 us of the ~110 us a cached autograd call took on the build machine.

`install()` replaces that helper with one that reads the argument list once and does the
same thing otherwise (same results for every (args, kwargs); fill_defaults_test checks
it against torch's own on our schemas). It is installed when the ops package is imported
and is idempotent; `CUDNN_LA_KEEP_TORCH_FILL_DEFAULTS=1` leaves torch untouched.
"""
from __future__ import annotations

import os
from typing import Any

_ORIGINAL_ATTR = "_cudnn_la_original"


def fill_defaults(schema: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
                  ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """(args, kwargs) with every argument the schema has: positional ones past `args`
    and keyword-only ones missing from `kwargs` take their schema default."""
    positional: list[Any] = []
    keyword: dict[str, Any] = {}
    for index, argument in enumerate(schema.arguments):  # read once, not per argument
        if argument.kwarg_only:
            name = argument.name
            keyword[name] = kwargs[name] if name in kwargs else argument.default_value
        elif index < len(args):
            positional.append(args[index])
        else:
            positional.append(argument.default_value)
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
