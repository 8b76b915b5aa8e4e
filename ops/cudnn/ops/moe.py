"""OpSpecs of the MoE grouped matmul forward and backward (group "moe").

Forward: OUT_0 = [1, R, weight[-1]] with R rows: top_k_scores[-2] under mode COMBINE,
token_index[-2] under GATHER, token[-2] otherwise. Backward: dweight = [E, H, N] =
[first_token_offset[0], token[-1], doutput[-1]] (pushed to the backend).
The binding's compute dtype defaults to FLOAT.
"""
from __future__ import annotations

from collections.abc import Sequence

from cudnn.ops.data_types import INDEX
from cudnn.ops.enums import moe_grouped_matmul_mode
from cudnn.ops.node_type import NodeType
from cudnn.ops.op_spec import (AttrKind, AttrSpec, BuilderKeyword, CallStyle, OpCall, OpGroup,
                               OpSpec, OutputSpec, PortSpec, ReturnStyle)

_KW = (BuilderKeyword.NAME.value, BuilderKeyword.COMPUTE_DATA_TYPE.value,
       BuilderKeyword.OUT_DIMS.value)
_ROWS_FROM = {moe_grouped_matmul_mode.COMBINE: "top_k_scores",
              moe_grouped_matmul_mode.GATHER: "token_index"}


def _out_dims(call: OpCall) -> Sequence[int] | None:
    rows_port = _ROWS_FROM.get(call.param("mode"), "token")
    rows, weight = call.dim(rows_port), call.dim("weight")
    if rows is None or weight is None or len(rows) < 2:
        return None
    return (1, rows[-2], weight[-1])


def _check(call: OpCall) -> None:
    token, weight = call.dim("token"), call.dim("weight")
    if token is not None and weight is not None and len(weight) >= 2 and token[-1] != weight[-2]:
        raise call.fail("weight", f"weight.dim[-2] == token.dim[-1] = {token[-1]}",
                        f"weight.dim {list(weight)}")
    needed = _ROWS_FROM.get(call.param("mode"))
    if needed is not None and not call.has(needed):
        raise call.fail(needed, f"a tensor (required by mode {call.param('mode').name})", "None")


def _bwd_dims(call: OpCall) -> Sequence[int] | None:
    offsets, token, dout = (call.dim(p) for p in ("first_token_offset", "token", "doutput"))
    if offsets is None or token is None or dout is None:
        return None
    return (offsets[0], token[-1], dout[-1])


MOE_GROUPED_MATMUL = OpSpec(
    name="moe_grouped_matmul", group=OpGroup.MOE, node_type=NodeType.MOE_GROUPED_MATMUL,
    ports=(PortSpec("token", required=True), PortSpec("weight", required=True),
           PortSpec("first_token_offset", required=True, dtypes=INDEX),
           PortSpec("token_index", dtypes=INDEX), PortSpec("token_ks"),
           PortSpec("top_k_scores")),
    attrs=(AttrSpec("mode", AttrKind.ENUM, default=moe_grouped_matmul_mode.NONE,
                    enum_type=moe_grouped_matmul_mode),
           AttrSpec("top_k", AttrKind.INT, default=0, minimum=0)),
    outputs=(OutputSpec("OUT_0", infer=_out_dims),),
    call=CallStyle(positional=("token", "weight", "first_token_offset", "token_index",
                               "token_ks", "mode", "top_k"),
                   keyword_only=("top_k_scores",) + _KW),
    returns=ReturnStyle.SINGLE, backend_method="moe_grouped_matmul", check=_check,
    summary="MoE grouped matmul of tokens by per-expert weights")

MOE_GROUPED_MATMUL_BWD = OpSpec(
    name="moe_grouped_matmul_bwd", group=OpGroup.MOE, node_type=NodeType.MOE_GROUPED_MATMUL_BWD,
    ports=(PortSpec("doutput", required=True), PortSpec("token", required=True),
           PortSpec("first_token_offset", required=True, dtypes=INDEX)),
    attrs=(),
    outputs=(OutputSpec("dweight", infer=_bwd_dims),),
    call=CallStyle(positional=("doutput", "token", "first_token_offset"), keyword_only=_KW),
    returns=ReturnStyle.SINGLE, backend_method="moe_grouped_matmul_bwd", push_output_dims=True,
    summary="MoE grouped matmul weight gradient")

SPECS: tuple[OpSpec, ...] = (MOE_GROUPED_MATMUL, MOE_GROUPED_MATMUL_BWD)
