"""Environment switches that take 0 or 1: one parser, so that every such variable reads
and fails the same way (a typo is a ValueError naming the variable, never a silent pick of
one path)."""
from __future__ import annotations

import os


def binary_switch(variable: str, default: bool) -> bool:
    """Whether `variable` is on: "1" yes, "0" no, unset or empty (spaces ignored)
    `default`; any other value is a ValueError naming the variable."""
    value = os.environ.get(variable, "").strip()
    if value not in ("", "0", "1"):
        raise ValueError(f"{variable}: expected 0 or 1; got {value!r}")
    return default if value == "" else value == "1"
