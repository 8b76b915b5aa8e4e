"""Backend plan knobs: cuDNN's own numbering <-> the public `cudnn.knob_type` vocabulary.

A backend entry keeps its knobs as the extension reports them, `{cudnnBackendKnobType_t:
value}` (native, what `create_execution_plan` takes back). Autotune records use the public
vocabulary: the two numberings share names, not values, so the mapping goes by name,
using the extension's `backend_knob_types()` ({name: cuDNN value}) of the headers it was
built with. cuDNN knobs with no public name (legacy ones such as SPLIT_K) are reported as
`UNNAMED_KNOB_BASE + cuDNN value`, a band no public knob uses, so they still replay exactly.
"""
from __future__ import annotations

import numbers
from collections.abc import Mapping

from cudnn.ops.enums import FRONTEND_KNOB_TYPE_BASE, knob_type

#: public key of a cuDNN knob that has no `knob_type` name: this base + its cuDNN value.
UNNAMED_KNOB_BASE = 2000


def _public_names() -> dict[str, knob_type]:
    return {k.name: k for k in knob_type if 0 < k.value < FRONTEND_KNOB_TYPE_BASE}


def to_public(native: Mapping[int, int] | None,
              backend_names: Mapping[str, int]) -> dict[knob_type | int, int]:
    """`{cuDNN knob: value}` -> `{knob_type (or UNNAMED_KNOB_BASE + n): value}`."""
    if not native:
        return {}
    by_value = {int(v): name for name, v in backend_names.items()}
    public = _public_names()
    out: dict[knob_type | int, int] = {}
    for key, value in native.items():
        name = by_value.get(int(key))
        out[public[name] if name in public else UNNAMED_KNOB_BASE + int(key)] = int(value)
    return out


def to_native(knobs: Mapping[object, int] | None,
              backend_names: Mapping[str, int]) -> dict[int, int]:
    """Public knobs (knob_type members, their int values, or the unnamed band) -> native."""
    if not knobs:
        return {}
    out: dict[int, int] = {}
    for key, value in knobs.items():
        if isinstance(key, bool) or not isinstance(key, numbers.Integral):
            raise TypeError(f"backend knobs: keys must be cudnn.knob_type members or ints, got "
                            f"{type(key).__name__} {key!r}")
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"backend knobs: the value of knob {key!r} must be an int, got "
                            f"{type(value).__name__} {value!r}")
        code = int(key)
        if code >= UNNAMED_KNOB_BASE:
            out[code - UNNAMED_KNOB_BASE] = int(value)
            continue
        if code >= FRONTEND_KNOB_TYPE_BASE:
            raise ValueError(f"backend knobs: {code} is in the python-engine knob band "
                             f"[{FRONTEND_KNOB_TYPE_BASE}, {UNNAMED_KNOB_BASE}); cuDNN backend "
                             "engines do not take it")
        try:
            name = knob_type(code).name
        except ValueError:
            raise ValueError(f"backend knobs: {code} is not a cudnn.knob_type value") from None
        if name not in backend_names:
            raise ValueError(f"backend knobs: knob {name} does not exist in the cuDNN headers "
                             "this extension was built with")
        out[int(backend_names[name])] = int(value)
    return out
