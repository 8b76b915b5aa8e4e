"""OpSpecs of the convolutions: conv_fprop, conv_dgrad, conv_wgrad (group "conv").

Layout `[N, C, spatial...]`, weight `[K, C/groups, spatial...]`. Attrs are per spatial
axis: `pre_padding` + `post_padding` (given together), or symmetric `padding`; `stride`
and `dilation` default to 1, paddings to 0.
- fprop: Y = [N, K, o_i], o_i = (x_i + pre_i + post_i - ((w_i - 1) dil_i + 1)) // s_i + 1
- dgrad: DX = [N, C, (dy_i - 1) s_i + (w_i - 1) dil_i + 1 - pre_i - post_i] (ambiguous for
  stride > 1: set out_dims to pick another extent); wgrad: DW is not inferred.
dgrad and wgrad push their output dims to the backend (it cannot infer them).
"""
from __future__ import annotations

from collections.abc import Sequence

from cudnn.ops.enums import convolution_mode
from cudnn.ops.node_type import NodeType
from cudnn.ops.op_spec import (AttrKind, AttrSpec, BuilderKeyword, CallStyle, Check, OpCall,
                               OpGroup, OpSpec, OutputSpec, PortSpec, ReturnStyle, ShapeRule)

_LISTS = ("padding", "pre_padding", "post_padding", "stride", "dilation")
_ATTRS = tuple(AttrSpec(n, AttrKind.INT_LIST, default=()) for n in _LISTS) + (
    AttrSpec("convolution_mode", AttrKind.ENUM, default=convolution_mode.CROSS_CORRELATION,
             enum_type=convolution_mode),)
_KW = (BuilderKeyword.NAME.value, BuilderKeyword.COMPUTE_DATA_TYPE.value,
       BuilderKeyword.OUT_DIMS.value)


def _geometry(call: OpCall, spatial: int) -> tuple[list[int], list[int], list[int], list[int]]:
    def per_axis(name: str, fallback: Sequence[int], default: int) -> list[int]:
        values = call.params.get(name) or fallback
        return list(values) if values else [default] * spatial
    pad = call.params.get("padding") or ()
    return (per_axis("pre_padding", pad, 0), per_axis("post_padding", pad, 0),
            per_axis("stride", (), 1), per_axis("dilation", (), 1))


def _fprop_dims(call: OpCall) -> Sequence[int] | None:
    x, w = call.dim("image"), call.dim("weight")
    if x is None or w is None or len(x) != len(w):
        return None
    pre, post, stride, dil = _geometry(call, len(x) - 2)
    out = [(x[i + 2] + pre[i] + post[i] - ((w[i + 2] - 1) * dil[i] + 1)) // stride[i] + 1
           for i in range(len(x) - 2)]
    return (x[0], w[0], *out)


def _dgrad_dims(call: OpCall) -> Sequence[int] | None:
    dy, w = call.dim("loss"), call.dim("filter")
    if dy is None or w is None or len(dy) != len(w):
        return None
    pre, post, stride, dil = _geometry(call, len(dy) - 2)
    out = [(dy[i + 2] - 1) * stride[i] + (w[i + 2] - 1) * dil[i] + 1 - pre[i] - post[i]
           for i in range(len(dy) - 2)]
    return (dy[0], w[1], *out)


def _make_check(ports: tuple[str, str], infer: ShapeRule | None) -> Check:
    def check(call: OpCall) -> None:
        dims = [call.dim(p) for p in ports]
        for port, d in zip(ports, dims):
            if d is not None and (len(d) < 3 or min(d) <= 0):
                raise call.fail(port, "rank >= 3 with all extents > 0", f"{port}.dim {list(d)}")
        if dims[0] is not None and dims[1] is not None and len(dims[0]) != len(dims[1]):
            raise call.fail(ports[1], f"rank {len(dims[0])} like {ports[0]}",
                            f"{ports[1]}.dim {list(dims[1])}")
        if ports == ("image", "weight") and None not in dims and dims[0][1] % dims[1][1]:
            raise call.fail("weight", f"weight.dim[1] dividing the {dims[0][1]} image channels "
                            "(C / groups)", f"weight.dim {list(dims[1])}")
        has_pre, has_post = "pre_padding" in call.params, "post_padding" in call.params
        if has_pre != has_post:
            raise call.fail("post_padding" if has_pre else "pre_padding",
                            "pre_padding and post_padding given together", "only one of them")
        spatial = next((len(d) - 2 for d in dims if d is not None), None)
        for name in _LISTS:
            values = call.params.get(name)
            if values and spatial is not None and len(values) != spatial:
                raise call.fail(name, f"{spatial} values (one per spatial axis)", list(values))
            if values and name in ("stride", "dilation") and min(values) < 1:
                raise call.fail(name, "values >= 1", list(values))
        out = infer(call) if infer is not None else None
        if out is not None and min(out) <= 0:
            raise call.fail(ports[1], "a window that fits the padded input",
                            f"output extents {list(out)}")
    return check


def _conv(name: str, node_type: NodeType, ports: tuple[str, str], output: str,
          infer: ShapeRule | None, push: bool, summary: str) -> OpSpec:
    return OpSpec(
        name=name, group=OpGroup.CONV, node_type=node_type,
        ports=tuple(PortSpec(p, required=True) for p in ports), attrs=_ATTRS,
        outputs=(OutputSpec(output, infer=infer),),
        call=CallStyle(positional=ports + tuple(a.name for a in _ATTRS), keyword_only=_KW),
        returns=ReturnStyle.SINGLE, backend_method=name, push_output_dims=push,
        check=_make_check(ports, infer), summary=summary)


CONV_FPROP = _conv("conv_fprop", NodeType.CONV_FPROP, ("image", "weight"), "Y", _fprop_dims,
                   False, "convolution forward")
CONV_DGRAD = _conv("conv_dgrad", NodeType.CONV_DGRAD, ("loss", "filter"), "DX", _dgrad_dims,
                   True, "convolution data gradient")
CONV_WGRAD = _conv("conv_wgrad", NodeType.CONV_WGRAD, ("image", "loss"), "DW", None, True,
                   "convolution weight gradient (set DW dims with out_dims)")

SPECS: tuple[OpSpec, ...] = (CONV_FPROP, CONV_DGRAD, CONV_WGRAD)
