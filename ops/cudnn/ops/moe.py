"""OpSpecs of the MoE grouped matmul forward and backward (group "moe").

Forward, per mode (docs/OP_SURFACE.md, "MoE grouped matmul modes"; E experts, R routed
rows, S tokens, R = S * top_k under routing):
- NONE: token [1, R, K] already grouped by expert; OUT_0 [1, R, N].
- GATHER: token [1, S, K] in token order, token_index [1, R, 1] names the token each routed
  row reads; OUT_0 [1, R, N] in routed (expert) order. token_ks and top_k are not read.
- SCATTER: token [1, R, K] in routed order; routed row r lands in output row
  token_index[r] * top_k + token_ks[r]; OUT_0 [1, R, N] in token order.
- COMBINE: OUT_0 [1, top_k_scores[-2], N] (no backend lowering; the rows are the scores').
weight is [E, K, N], first_token_offset holds one row start per expert ([B * E, 1, 1]).
Backward: dweight = [E, H, N] = [first_token_offset[0], token[-1], doutput[-1]] (pushed to
the backend). The binding's compute dtype defaults to FLOAT.
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
_MODE = moe_grouped_matmul_mode
_ROWS_FROM = {_MODE.COMBINE: "top_k_scores", _MODE.GATHER: "token_index"}
#: the routing tensors each mode reads; any other routing tensor given is an error
_ROUTING = {_MODE.NONE: (), _MODE.GATHER: ("token_index",),
            _MODE.SCATTER: ("token_index", "token_ks"), _MODE.COMBINE: ()}


def _out_dims(call: OpCall) -> Sequence[int] | None:
    rows_port = _ROWS_FROM.get(call.param("mode"), "token")
    rows, weight = call.dim(rows_port), call.dim("weight")
    if rows is None or weight is None or len(rows) < 2:
        return None
    return (1, rows[-2], weight[-1])


def _check_routing(call: OpCall, mode: moe_grouped_matmul_mode) -> None:
    """token_index / token_ks: present exactly in the modes that read them, [1, R, 1]."""
    for port in ("token_index", "token_ks"):
        wanted = port in _ROUTING[mode]
        if wanted and not call.has(port):
            raise call.fail(port, f"a [1, R, 1] INT32 tensor (mode {mode.name} reads it)", "None")
        if not wanted and call.has(port):
            readers = [m.name for m, ports in _ROUTING.items() if port in ports]
            who = f"modes {' and '.join(readers)} read" if len(readers) > 1 else \
                f"mode {readers[0]} reads"
            raise call.fail(port, f"None (only {who} it; mode is {mode.name})", "a tensor")
        dims = call.dim(port)
        if dims is not None and (len(dims) != 3 or dims[0] != 1 or dims[2] != 1):
            raise call.fail(port, "dims [1, R, 1] (one entry per routed row)", f"dims {list(dims)}")
    token, index, ks = (call.dim(p) for p in ("token", "token_index", "token_ks"))
    if mode != _MODE.SCATTER or token is None:
        return
    # SCATTER: the routed rows are the token rows, and they fill R = S * top_k output slots.
    for port, dims in (("token_index", index), ("token_ks", ks)):
        if dims is not None and dims[1] != token[1]:
            raise call.fail(port, f"dims [1, {token[1]}, 1] (one entry per token row in mode "
                                  "SCATTER)", f"dims {list(dims)}")
    top_k = call.param("top_k")
    if top_k <= 0 or token[1] % top_k:
        raise call.fail("top_k", f"a divisor > 0 of the {token[1]} routed rows (mode SCATTER "
                                 "writes output row token_index * top_k + token_ks)", top_k)


def _check(call: OpCall) -> None:
    token, weight, offsets = call.dim("token"), call.dim("weight"), call.dim("first_token_offset")
    mode = call.param("mode")
    if mode != _MODE.COMBINE and token is not None and (len(token) != 3 or token[0] != 1):
        raise call.fail("token", "dims [1, rows, K]", f"dims {list(token)}")
    if weight is not None and len(weight) != 3:
        raise call.fail("weight", "dims [E, K, N] (one K x N matrix per expert)",
                        f"dims {list(weight)}")
    if token is not None and weight is not None and token[-1] != weight[-2]:
        raise call.fail("weight", f"weight.dim[-2] == token.dim[-1] = {token[-1]}",
                        f"weight.dim {list(weight)}")
    if offsets is not None and weight is not None and weight[0] > 0 and (
            offsets[0] % weight[0] or any(d != 1 for d in offsets[1:])):
        raise call.fail("first_token_offset", f"dims [B * {weight[0]}, 1, 1] (one row start "
                                              "per expert and batch)", f"dims {list(offsets)}")
    needed = _ROWS_FROM.get(mode)
    if mode == _MODE.COMBINE:
        if not call.has(needed):
            raise call.fail(needed, f"a tensor (required by mode {mode.name})", "None")
        return
    _check_routing(call, mode)


def _bwd_dims(call: OpCall) -> Sequence[int] | None:
    offsets, token, dout = (call.dim(p) for p in ("first_token_offset", "token", "doutput"))
    if offsets is None or token is None or dout is None:
        return None
    return (offsets[0], token[-1], dout[-1])


MOE_GROUPED_MATMUL = OpSpec(
    name="moe_grouped_matmul", group=OpGroup.MOE, node_type=NodeType.MOE_GROUPED_MATMUL,
    ports=(PortSpec("token", required=True), PortSpec("weight", required=True),
           PortSpec("first_token_offset", required=True, dtypes=INDEX),
           PortSpec("token_index", dtypes=INDEX), PortSpec("token_ks", dtypes=INDEX),
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
