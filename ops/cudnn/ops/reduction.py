"""OpSpec of `reduction` (group "reduction").

The output is not inferred: the caller gives its dims (out_dims= or set_dim); each
extent must equal the input's or be 1 (a reduced axis). Lowering pushes the dims.
"""
from __future__ import annotations

from cudnn.ops.data_types import INDEX
from cudnn.ops.enums import reduction_mode
from cudnn.ops.node_type import NodeType
from cudnn.ops.op_spec import (AttrKind, AttrSpec, BuilderKeyword, CallStyle, OpCall, OpGroup,
                               OpSpec, OutputSpec, PortSpec, ReturnStyle)


def _check(call: OpCall) -> None:
    x = call.dim("input")
    out = call.outputs.get("OUT_0")
    if x is None or out is None or not out.dim:
        return
    y = out.dim
    if len(y) != len(x) or any(o not in (1, i) for i, o in zip(x, y)):
        raise call.fail("out_dims", f"input dims {list(x)} with reduced axes set to 1",
                        f"{list(y)}")


REDUCTION = OpSpec(
    name="reduction", group=OpGroup.REDUCTION, node_type=NodeType.REDUCTION,
    ports=(PortSpec("input", required=True), PortSpec("group_offset", dtypes=INDEX)),
    attrs=(AttrSpec("mode", AttrKind.ENUM, required=True, enum_type=reduction_mode),),
    outputs=(OutputSpec("OUT_0"),),
    call=CallStyle(positional=("input", "group_offset", "mode"),
                   keyword_only=(BuilderKeyword.NAME.value, BuilderKeyword.COMPUTE_DATA_TYPE.value,
                                 BuilderKeyword.OUT_DIMS.value)),
    returns=ReturnStyle.SINGLE, backend_method="reduction", push_output_dims=True,
    check=_check, summary="reduction over the axes where the output extent is 1")

SPECS: tuple[OpSpec, ...] = (REDUCTION,)
