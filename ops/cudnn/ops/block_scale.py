"""OpSpecs of block-scale quantize / dequantize (group "block_scale").

quantize: Y like input; `scale` = input dims with dims[axis] = ceil(dims[axis] / block_size)
(axis None or -1 = the last axis). Its `group_offset` port is read by the python
GEMM/conv engines only; the backend binding has no such parameter.
dequantize: OUT_0 like input; `block_size` is one int per blocked axis.
"""
from __future__ import annotations

from collections.abc import Sequence

from cudnn.ops.data_types import INDEX
from cudnn.ops.node_type import NodeType
from cudnn.ops.op_spec import (AttrKind, AttrSpec, BuilderKeyword, CallStyle, OpCall, OpGroup,
                               OpSpec, OutputSpec, PortSpec, ReturnStyle)
from cudnn.ops.rules import like

_KW = (BuilderKeyword.NAME.value, BuilderKeyword.COMPUTE_DATA_TYPE.value,
       BuilderKeyword.OUT_DIMS.value)


def _axis(call: OpCall, rank: int) -> int:
    axis = call.params.get("axis")
    return rank - 1 if axis is None or axis == -1 else axis


def _scale_dims(call: OpCall) -> Sequence[int] | None:
    x = call.dim("input")
    if x is None or not 0 <= _axis(call, len(x)) < len(x):
        return None
    axis, block = _axis(call, len(x)), call.params["block_size"]
    return tuple(-(-n // block) if i == axis else n for i, n in enumerate(x))


def _check_quantize(call: OpCall) -> None:
    x = call.dim("input")
    if x is not None and not 0 <= _axis(call, len(x)) < len(x):
        raise call.fail("axis", f"an axis of the rank-{len(x)} input, or -1/None",
                        f"axis {call.params.get('axis')}")


def _check_dequantize(call: OpCall) -> None:
    x, block = call.dim("input"), call.params.get("block_size", ())
    if any(b < 1 for b in block):
        raise call.fail("block_size", "block sizes >= 1", list(block))
    if x is not None and len(block) > len(x):
        raise call.fail("block_size", f"at most {len(x)} values (input rank)", list(block))


BLOCK_SCALE_QUANTIZE = OpSpec(
    name="block_scale_quantize", group=OpGroup.BLOCK_SCALE,
    node_type=NodeType.BLOCK_SCALE_QUANTIZE,
    ports=(PortSpec("input", required=True),
           PortSpec("group_offset", dtypes=INDEX, to_backend=False)),
    attrs=(AttrSpec("block_size", AttrKind.INT, required=True, minimum=1),
           AttrSpec("axis", AttrKind.INT, minimum=-1),
           AttrSpec("transpose", AttrKind.BOOL, default=False)),
    outputs=(OutputSpec("Y", infer=like("input")), OutputSpec("scale", infer=_scale_dims)),
    call=CallStyle(positional=("input", "group_offset", "block_size", "axis", "transpose"),
                   keyword_only=_KW),
    returns=ReturnStyle.LIST, backend_method="block_scale_quantize", check=_check_quantize,
    summary="quantize with one scale per block of block_size along axis")

BLOCK_SCALE_DEQUANTIZE = OpSpec(
    name="block_scale_dequantize", group=OpGroup.BLOCK_SCALE,
    node_type=NodeType.BLOCK_SCALE_DEQUANTIZE,
    ports=(PortSpec("input", required=True), PortSpec("descale", required=True)),
    attrs=(AttrSpec("block_size", AttrKind.INT_LIST, required=True),
           AttrSpec("is_negative_scale", AttrKind.BOOL, default=False)),
    outputs=(OutputSpec("OUT_0", infer=like("input")),),
    call=CallStyle(positional=("input", "descale", "block_size", "is_negative_scale"),
                   keyword_only=_KW),
    returns=ReturnStyle.SINGLE, backend_method="block_scale_dequantize",
    check=_check_dequantize, summary="dequantize with per-block scales")

SPECS: tuple[OpSpec, ...] = (BLOCK_SCALE_QUANTIZE, BLOCK_SCALE_DEQUANTIZE)
