"""OpSpec of `matmul` (NodeType MATMUL).

`C = A @ B` over the last two axes; leading (batch) axes broadcast numpy-style.
Signature mirrors the binding: `matmul(A, B, compute_data_type=None, padding=0.0, name="")`.
"""
from __future__ import annotations

from collections.abc import Sequence

from cudnn.ops.node_type import NodeType
from cudnn.ops.op_spec import (AttrKind, AttrSpec, BuilderKeyword, CallStyle, OpCall, OpGroup,
                               OpSpec, OutputSpec, PortSpec, ReturnStyle)
from cudnn.ops.rules import broadcast_shapes


def _infer_c(call: OpCall) -> Sequence[int] | None:
    a, b = call.dim("A"), call.dim("B")
    if a is None or b is None or len(a) < 2 or len(b) < 2:
        return None
    batch = broadcast_shapes((a[:-2], b[:-2]))
    if batch is None:
        return None
    return (*batch, a[-2], b[-1])


def _check(call: OpCall) -> None:
    a, b = call.dim("A"), call.dim("B")
    for port, dims in (("A", a), ("B", b)):
        if dims is not None and len(dims) < 2:
            raise call.fail(port, "rank >= 2", f"{port}.dim {list(dims)}")
    if a is None or b is None:
        return
    if a[-1] != b[-2]:
        raise call.fail("B", f"B.dim[-2] == A.dim[-1] = {a[-1]} (inner dimension)",
                        f"B.dim {list(b)}")
    if broadcast_shapes((a[:-2], b[:-2])) is None:
        raise call.fail("B", f"batch dims broadcast-compatible with A's {list(a[:-2])}",
                        f"B.dim {list(b)}")


MATMUL = OpSpec(
    name="matmul", group=OpGroup.MATMUL, node_type=NodeType.MATMUL,
    ports=(PortSpec("A", required=True), PortSpec("B", required=True)),
    attrs=(AttrSpec("padding", AttrKind.FLOAT, default=0.0, signature_default=0.0),),
    outputs=(OutputSpec("C", infer=_infer_c),),
    call=CallStyle(positional=("A", "B", BuilderKeyword.COMPUTE_DATA_TYPE.value, "padding",
                               BuilderKeyword.NAME.value)),
    returns=ReturnStyle.SINGLE, backend_method="matmul", check=_check,
    summary="C = A @ B with broadcast batch dims")

SPECS: tuple[OpSpec, ...] = (MATMUL,)
