"""OpSpecs of the structural ops: reshape, slice, transpose, concatenate, rope, rope_backward.

- reshape: target dims from the caller (out_dims / set_dim), same element count; pushed.
- slice: per axis `len(range(*s.indices(n)))` for the given Python slices; output dtype
  copied from the input.
- transpose: `[input[p] for p in permutation]`.
- concatenate: inputs equal except along `axis`, which adds up (the backend would infer
  the same; inferring it here lets validate() check python-only graphs too).
- rope / rope_backward: output like input / dY.
reshape and concatenate take no compute_data_type in the binding.
"""
from __future__ import annotations

from collections.abc import Sequence

from cudnn.ops.enums import reshape_mode
from cudnn.ops.node_type import NodeType
from cudnn.ops.op_spec import (AttrKind, AttrSpec, BuilderKeyword, CallStyle, OpCall, OpGroup,
                               OpSpec, OutputSpec, PortKind, PortSpec, ReturnStyle)
from cudnn.ops.rules import like

_KW = (BuilderKeyword.NAME.value, BuilderKeyword.COMPUTE_DATA_TYPE.value,
       BuilderKeyword.OUT_DIMS.value)


def _numel(dims: Sequence[int]) -> int:
    total = 1
    for n in dims:
        total *= n
    return total


def _check_reshape(call: OpCall) -> None:
    x, out = call.dim("input"), call.outputs.get("OUT_0")
    if x is not None and out is not None and out.dim and _numel(out.dim) != _numel(x):
        raise call.fail("out_dims", f"{_numel(x)} elements like input {list(x)}",
                        f"{list(out.dim)} ({_numel(out.dim)} elements)")


def _slice_dims(call: OpCall) -> Sequence[int] | None:
    x = call.dim("input")
    if x is None:
        return None
    slices = call.params.get("slices", ())
    return tuple(len(range(*slices[i].indices(n))) if i < len(slices) else n
                 for i, n in enumerate(x))


def _check_slice(call: OpCall) -> None:
    x, slices = call.dim("input"), call.params.get("slices", ())
    if x is not None and len(slices) > len(x):
        raise call.fail("slices", f"at most {len(x)} slices (input rank)", f"{len(slices)} slices")
    for s in slices:
        if s.step == 0:
            raise call.fail("slices", "non-zero steps", repr(s))


def _transpose_dims(call: OpCall) -> Sequence[int] | None:
    x, perm = call.dim("input"), call.params.get("permutation")
    if x is None or perm is None or sorted(perm) != list(range(len(x))):
        return None
    return tuple(x[p] for p in perm)


def _check_transpose(call: OpCall) -> None:
    x, perm = call.dim("input"), call.params.get("permutation")
    if x is not None and perm is not None and sorted(perm) != list(range(len(x))):
        raise call.fail("permutation", f"a permutation of 0..{len(x) - 1}", list(perm))


def _concat_dims(call: OpCall) -> Sequence[int] | None:
    views = call.lists.get("inputs", ())
    axis = call.params.get("axis")
    if not views or axis is None or any(not v.dim for v in views):
        return None
    rank = len(views[0].dim)
    if not -rank <= axis < rank:
        return None
    axis %= rank
    out = list(views[0].dim)
    out[axis] = sum(v.dim[axis] for v in views)
    return tuple(out)


def _check_concat(call: OpCall) -> None:
    views = [v for v in call.lists.get("inputs", ()) if v.dim]
    axis = call.params.get("axis")
    if not views or axis is None:
        return
    first = views[0].dim
    if not -len(first) <= axis < len(first):
        raise call.fail("axis", f"an axis of the rank-{len(first)} inputs", f"axis {axis}")
    axis %= len(first)
    for i, v in enumerate(views[1:], start=1):
        same = len(v.dim) == len(first) and all(
            a == b for k, (a, b) in enumerate(zip(v.dim, first)) if k != axis)
        if not same:
            raise call.fail(f"inputs_{i}", f"dims equal to inputs_0 {list(first)} except axis "
                            f"{axis}", f"{list(v.dim)}")


def _spec(name: str, node_type: NodeType, ports: tuple[PortSpec, ...],
          attrs: tuple[AttrSpec, ...], output: OutputSpec, summary: str, **flags) -> OpSpec:
    return OpSpec(
        name=name, group=OpGroup.STRUCTURAL, node_type=node_type, ports=ports, attrs=attrs,
        outputs=(output,),
        call=CallStyle(positional=tuple(p.name for p in ports) + tuple(a.name for a in attrs),
                       keyword_only=_KW),
        returns=ReturnStyle.SINGLE, backend_method=name, summary=summary, **flags)


_ROPE_ATTRS = (AttrSpec("output_scale", AttrKind.FLOAT, default=1.0),
               AttrSpec("rope_dim", AttrKind.INT, default=0, minimum=0))

RESHAPE = _spec("reshape", NodeType.RESHAPE, (PortSpec("input", required=True),),
                (AttrSpec("reshape_mode", AttrKind.ENUM, default=reshape_mode.VIEW_ONLY,
                          enum_type=reshape_mode),),
                OutputSpec("OUT_0"), "reshape to the dims given with out_dims",
                push_output_dims=True, no_cdt=True, check=_check_reshape)
SLICE = _spec("slice", NodeType.SLICE, (PortSpec("input", required=True),),
              (AttrSpec("slices", AttrKind.SLICE_LIST, default=()),),
              OutputSpec("OUT_0", infer=_slice_dims, dtype_like="input"),
              "slice with one Python slice per leading axis", check=_check_slice)
TRANSPOSE = _spec("transpose", NodeType.TRANSPOSE, (PortSpec("input", required=True),),
                  (AttrSpec("permutation", AttrKind.INT_LIST, required=True),),
                  OutputSpec("OUT_0", infer=_transpose_dims), "permute the axes",
                  check=_check_transpose)
CONCATENATE = _spec("concatenate", NodeType.CONCATENATE,
                    (PortSpec("inputs", required=True, kind=PortKind.TENSOR_LIST),),
                    (AttrSpec("axis", AttrKind.INT, required=True),
                     AttrSpec("in_place_index", AttrKind.INT, minimum=0)),
                    OutputSpec("OUT_0", infer=_concat_dims), "concatenate along axis",
                    no_cdt=True, check=_check_concat)
ROPE = _spec("rope", NodeType.ROPE,
             (PortSpec("input", required=True), PortSpec("freqs", required=True)), _ROPE_ATTRS,
             OutputSpec("OUT_0", infer=like("input")), "rotary position embedding")
ROPE_BACKWARD = _spec("rope_backward", NodeType.ROPE_BWD,
                      (PortSpec("dY", required=True), PortSpec("freqs", required=True)),
                      _ROPE_ATTRS, OutputSpec("OUT_0", infer=like("dY")),
                      "rotary position embedding backward")

SPECS: tuple[OpSpec, ...] = (RESHAPE, SLICE, TRANSPOSE, CONCATENATE, ROPE, ROPE_BACKWARD)
