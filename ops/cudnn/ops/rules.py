"""Small reusable building blocks for OpSpec rules.

Owns: shape-rule factories (`like`, `broadcast`), presence-condition factories
(`when_input`, `when_true`, ...) and helpers that checks use to compare extents.
Every shape rule returns None when an extent it needs is not known yet; it never raises
(incompatibilities are reported by the op's check, with the op and argument named).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from cudnn.ops.op_spec import Check, Condition, OpCall, OpSpec, ShapeRule


# -- shape rules -------------------------------------------------------------------
def like(port: str) -> ShapeRule:
    """Output dims copied from an input port."""
    def rule(call: OpCall) -> Sequence[int] | None:
        return call.dim(port)
    return rule


def broadcast_shapes(shapes: Iterable[Sequence[int]]) -> tuple[int, ...] | None:
    """Right-aligned numpy broadcast; None if two extents differ and neither is 1."""
    shapes = [tuple(s) for s in shapes]
    if shapes and shapes.count(shapes[0]) == len(shapes):  # equal shapes: the common case
        return shapes[0]
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for i, n in enumerate(s, start=rank - len(s)):
            if out[i] == 1:
                out[i] = n
            elif n not in (1, out[i]):
                return None
    return tuple(out)


def broadcast(*ports: str) -> ShapeRule:
    """Broadcast of the listed ports that are wired (all of them need known dims).

    The rule carries `broadcast_of = ports`: where all of them are wired with the same
    known dims the result is those dims, which the IR's one-pass builders use without
    calling the rule."""
    def rule(call: OpCall) -> Sequence[int] | None:
        dims = [call.dim(p) for p in ports if call.has(p)]
        if not dims or any(d is None for d in dims):
            return None
        return broadcast_shapes(d for d in dims if d is not None)
    rule.broadcast_of = ports  # type: ignore[attr-defined]
    return rule


def decided_by_equal_dims(spec: OpSpec) -> bool:
    """Whether, for `spec`, a call whose input ports all have the same known dims passes
    the check and gets those dims for its one output: every port is a required tensor
    port, the output (always present) is `broadcast` over all of them, and the check is
    None or marked `passes_equal_dims`. The IR's builders and validate() then skip both."""
    names = tuple(p.name for p in spec.ports)
    if len(spec.outputs) != 1 or not names or not all(p.required for p in spec.ports):
        return False
    out = spec.outputs[0]
    if out.present is not None or tuple(getattr(out.infer, "broadcast_of", ())) != names:
        return False
    return spec.check is None or getattr(spec.check, "passes_equal_dims", False)


def passes_equal_dims(check: Check) -> Check:
    """Mark an OpSpec check that accepts every call whose input ports are all wired with
    the same known dims, whatever its params (a pure broadcast check): the IR's one-pass
    builders skip it for such calls. ops/tests checks the claim for each marked spec."""
    check.passes_equal_dims = True  # type: ignore[attr-defined]
    return check


def fixed(*dims: int) -> ShapeRule:
    def rule(call: OpCall) -> Sequence[int] | None:
        return dims
    return rule


# -- presence conditions -------------------------------------------------------------
def when_input(port: str) -> Condition:
    return Condition(f"{port} given", lambda call: call.has(port))


def when_true(attr: str) -> Condition:
    return Condition(f"{attr} is True", lambda call: bool(call.param(attr)))


def when_positive(attr: str) -> Condition:
    return Condition(f"{attr} > 0", lambda call: (call.param(attr) or 0) > 0)


def all_of(*conds: Condition) -> Condition:
    return Condition(" and ".join(c.text for c in conds),
                     lambda call: all(c(call) for c in conds))


# -- helpers for checks -----------------------------------------------------------
def check_equal(call: OpCall, what: str, pairs: Iterable[tuple[str, int, str, int]]) -> None:
    """Each (port_a, axis_a, port_b, axis_b) must have equal extents where both known."""
    for pa, aa, pb, ab in pairs:
        da, db = call.dim(pa), call.dim(pb)
        if da is None or db is None or len(da) <= max(aa, -aa - 1) or len(db) <= max(ab, -ab - 1):
            continue
        if da[aa] != db[ab]:
            raise call.fail(pb, f"{pb}.dim[{ab}] == {pa}.dim[{aa}] = {da[aa]} ({what})",
                            f"{pb}.dim {list(db)}")


def check_dims(call: OpCall, port: str, expected: Sequence[Any], what: str) -> None:
    """Compare a port's dims with an expected list where None entries are wildcards."""
    got = call.dim(port)
    if got is None:
        return
    ok = len(got) == len(expected) and all(e is None or e == g for e, g in zip(expected, got))
    if not ok:
        shown = ["*" if e is None else e for e in expected]
        raise call.fail(port, f"dims {shown} ({what})", f"{port}.dim {list(got)}")


def check_set_outputs(call: OpCall) -> None:
    """Outputs whose dims the caller set must have the dims the op's shape rules give
    (where they can tell): for ops whose engines write exactly those extents."""
    for out in call.spec.outputs:
        view = call.outputs.get(out.name)
        if view is None or out.infer is None:
            continue
        inferred = out.infer(call)
        if inferred is not None and tuple(view.dim) != tuple(inferred):
            raise call.fail(out.name, f"dims {list(inferred)} (what the op writes)",
                            f"{out.name}.dim {list(view.dim)}")


def first_known(call: OpCall, options: Iterable[tuple[str, int]]) -> int | None:
    """The extent at (port, axis) of the first wired port with known dims."""
    for port, axis in options:
        d = call.dim(port)
        if d is not None and len(d) > (axis if axis >= 0 else -axis - 1):
            return d[axis]
    return None


def param_is(attr: str, pred: Callable[[Any], bool]) -> Callable[[OpCall], bool]:
    return lambda call: pred(call.param(attr))
