"""Exceptions of the graph IR.

Owns: `cudnnGraphNotSupportedError` (a graph or node that no engine can run: validation
of support rules, engine declines), the bad-argument errors raised by op builders, which
always name the op, the argument, what was expected and what was given, and
`GraphFrozenError` (any mutation after lowering/planning).
"""
from __future__ import annotations

from typing import Any


class cudnnGraphNotSupportedError(Exception):  # noqa: N801 - classic public name
    """The graph (or one node of it) is valid input but cannot be run."""


class OpArgumentError(Exception):
    """Mixin carrying the structured parts of a bad-argument error."""

    op: str
    argument: str
    expected: str
    given: str

    def __init__(self, op: str, argument: str, expected: str, given: str) -> None:
        self.op, self.argument, self.expected, self.given = op, argument, expected, given
        super().__init__(f"{op}: argument '{argument}': expected {expected}; got {given}")


class OpTypeError(OpArgumentError, TypeError):
    """A builder argument of the wrong kind (wrong type, unknown or missing keyword)."""


class OpValueError(OpArgumentError, ValueError):
    """A builder argument of the right kind with a wrong value (rank, shape, dtype)."""


class GraphFrozenError(RuntimeError):
    """A mutation was attempted after the graph was lowered or planned."""

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(
            f"cannot {what} after lowering/planning: the graph is frozen "
            "(planning is one-shot; build a new graph)")


def show(value: Any) -> str:
    """Short description of a given value for error messages."""
    if value is None:
        return "None"
    dims = getattr(value, "dim", None)
    if type(value).__name__ == "Tensor" and dims is not None:
        return f"Tensor '{getattr(value, 'name', '?')}' dims {list(dims)}"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"
