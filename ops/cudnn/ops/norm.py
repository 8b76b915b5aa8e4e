"""OpSpecs of the normalizations (11) and genstats (group "norm").

Statistics outputs (mean, inv_var, running stats, SUM/SQ_SUM) keep some axes of the
input and set the others to 1:
- rmsnorm / layernorm: keep the axes where scale's extent is 1 (no scale: keep axis 0);
  layernorm copies a sibling statistic whose dims the caller set;
- adalayernorm: as rmsnorm, but axis 0 is always kept;
- instancenorm: keep axes 0 and 1 (N, C); batchnorm and genstats: keep axis 1 (C).
Forward statistics exist unless `norm_forward_phase` is INFERENCE (unset = training).
Backward ops give DX like input and DScale/DBias like scale.
`epsilon` and `momentum` are tensors (usually `tensor_scalar` pass-by-value).
"""
from __future__ import annotations

from collections.abc import Sequence

from cudnn.ops.enums import norm_forward_phase
from cudnn.ops.node_type import NodeType
from cudnn.ops.op_spec import (AttrKind, AttrSpec, BuilderKeyword, CallStyle, Condition, OpCall,
                               OpGroup, OpSpec, OutputSpec, PortKind, PortSpec, ReturnStyle,
                               ShapeRule)
from cudnn.ops.rules import all_of, broadcast_shapes, like, when_input

_KW = (BuilderKeyword.NAME.value, BuilderKeyword.COMPUTE_DATA_TYPE.value,
       BuilderKeyword.OUT_DIMS.value)
_PHASE = AttrSpec("norm_forward_phase", AttrKind.ENUM, default=norm_forward_phase.TRAINING,
                  enum_type=norm_forward_phase,
                  doc="INFERENCE drops the statistics outputs; unset counts as TRAINING")
_TRAINING = Condition("norm_forward_phase != INFERENCE",
                      lambda call: call.param("norm_forward_phase")
                      is not norm_forward_phase.INFERENCE)


def _keep_axes(axes: Sequence[int]) -> ShapeRule:
    def rule(call: OpCall) -> Sequence[int] | None:
        x = call.dim("input")
        if x is None:
            return None
        return tuple(n if i in axes else 1 for i, n in enumerate(x))
    return rule


def _scale_stats(keep_batch: bool, sibling: str | None = None) -> ShapeRule:
    def rule(call: OpCall) -> Sequence[int] | None:
        if sibling is not None and sibling in call.outputs:
            return call.outputs[sibling].dim
        x, scale = call.dim("input"), call.dim("scale")
        if x is None:
            return None
        if scale is None:
            return tuple(n if i == 0 else 1 for i, n in enumerate(x))
        pad = (1,) * (len(x) - len(scale)) + tuple(scale)
        return tuple(n if (s == 1 or (keep_batch and i == 0)) else 1
                     for i, (n, s) in enumerate(zip(x, pad)))
    return rule


def _check(call: OpCall) -> None:
    x = call.dim("input")
    if x is None:
        return
    if len(x) < 2:
        raise call.fail("input", "rank >= 2", f"input.dim {list(x)}")
    grad = call.dim("grad")
    if grad is not None and grad != x:
        raise call.fail("grad", f"dims equal to input's {list(x)}", f"grad.dim {list(grad)}")
    for port in ("scale", "bias"):
        dims = call.dim(port)
        if dims is not None and (len(dims) > len(x) or broadcast_shapes((x, dims)) != x):
            raise call.fail(port, f"dims broadcastable to input's {list(x)}",
                            f"{port}.dim {list(dims)}")


def _norm(name: str, node_type: NodeType, ports: tuple[PortSpec, ...],
          attrs: tuple[AttrSpec, ...], outputs: tuple[OutputSpec, ...], summary: str) -> OpSpec:
    return OpSpec(
        name=name, group=OpGroup.NORM, node_type=node_type, ports=ports, attrs=attrs,
        outputs=outputs,
        call=CallStyle(positional=tuple(p.name for p in ports) + tuple(a.name for a in attrs),
                       keyword_only=_KW),
        returns=ReturnStyle.SINGLE if len(outputs) == 1 else ReturnStyle.LIST,
        backend_method=name, check=_check, summary=summary)


def _req(*names: str) -> tuple[PortSpec, ...]:
    return tuple(PortSpec(n, required=True) for n in names)


def _opt(*names: str) -> tuple[PortSpec, ...]:
    return tuple(PortSpec(n) for n in names)


_PEER = PortSpec("peer_stats", kind=PortKind.TENSOR_LIST, doc="multi-GPU peer statistics")


def _stats(rule: ShapeRule, present: Condition | None = _TRAINING) -> tuple[OutputSpec, ...]:
    return (OutputSpec("mean", suffix="MEAN", present=present, infer=rule, free_dims=True),
            OutputSpec("inv_var", suffix="INV_VARIANCE", present=present, infer=rule,
                       free_dims=True))


def _grads(scale_optional: bool, suffixes: tuple[str, str] = ("DSCALE", "DBIAS"),
           dbias: Condition | None = None) -> tuple[OutputSpec, ...]:
    has_scale = when_input("scale") if scale_optional else None
    bias_cond = dbias if dbias is not None else has_scale
    return (OutputSpec("DX", infer=like("input")),
            OutputSpec("DScale", suffix=suffixes[0], present=has_scale, infer=like("scale")),
            OutputSpec("DBias", suffix=suffixes[1], present=bias_cond, infer=like("scale")))


_Y = OutputSpec("Y", infer=like("input"))
_HAS_DBIAS = all_of(when_input("scale"),
                    Condition("has_dbias is not False", lambda call: call.param("has_dbias")
                              is not False))

RMSNORM = _norm(
    "rmsnorm", NodeType.RMSNORM, _req("input") + _opt("scale", "bias") + _req("epsilon"),
    (_PHASE,), (_Y, OutputSpec("inv_var", suffix="INV_VARIANCE", present=_TRAINING,
                               infer=_scale_stats(False), free_dims=True)),
    "RMS normalization forward")
RMSNORM_BACKWARD = _norm(
    "rmsnorm_backward", NodeType.RMSNORM_BWD,
    _req("grad", "input") + _opt("scale") + _req("inv_variance"),
    (AttrSpec("has_dbias", AttrKind.BOOL, default=True),),
    _grads(True, ("Dscale", "Dbias"), _HAS_DBIAS), "RMS normalization backward")
LAYERNORM = _norm(
    "layernorm", NodeType.LAYERNORM, _req("input") + _opt("scale", "bias") + _req("epsilon"),
    (_PHASE,),
    (_Y, OutputSpec("mean", suffix="MEAN", present=_TRAINING,
                    infer=_scale_stats(False, sibling="inv_var"), free_dims=True),
     OutputSpec("inv_var", suffix="INV_VARIANCE", present=_TRAINING,
                infer=_scale_stats(False, sibling="mean"), free_dims=True)),
    "layer normalization forward")
LAYERNORM_BACKWARD = _norm(
    "layernorm_backward", NodeType.LAYERNORM_BWD,
    _req("grad", "input") + _opt("scale") + _req("mean", "inv_variance"), (), _grads(True),
    "layer normalization backward")
ADALAYERNORM = _norm(
    "adalayernorm", NodeType.ADALAYERNORM, _req("input", "scale") + _opt("bias") + _req("epsilon"),
    (_PHASE,), (_Y,) + _stats(_scale_stats(True)), "adaptive layer normalization forward")
ADALAYERNORM_BACKWARD = _norm(
    "adalayernorm_backward", NodeType.ADALAYERNORM_BWD,
    _req("grad", "input", "scale", "mean", "inv_variance"), (), _grads(False),
    "adaptive layer normalization backward")
INSTANCENORM = _norm(
    "instancenorm", NodeType.INSTANCENORM, _req("input", "scale", "bias", "epsilon"), (_PHASE,),
    (_Y,) + _stats(_keep_axes((0, 1))), "instance normalization forward")
INSTANCENORM_BACKWARD = _norm(
    "instancenorm_backward", NodeType.INSTANCENORM_BWD,
    _req("grad", "input", "scale") + _opt("mean", "inv_variance"), (), _grads(False),
    "instance normalization backward")
_PER_CHANNEL = _keep_axes((1,))
BATCHNORM = _norm(
    "batchnorm", NodeType.BATCHNORM,
    _req("input", "scale", "bias") + _opt("in_running_mean", "in_running_var")
    + _req("epsilon") + _opt("momentum") + (_PEER,), (),
    (_Y,) + _stats(_PER_CHANNEL, present=None)
    + (OutputSpec("next_running_mean", suffix="NEXT_RUNNING_MEAN",
                  present=when_input("in_running_mean"), infer=_PER_CHANNEL, free_dims=True),
       OutputSpec("next_running_var", suffix="NEXT_RUNNING_VAR",
                  present=when_input("in_running_var"), infer=_PER_CHANNEL, free_dims=True)),
    "batch normalization forward (training)")
BATCHNORM_INFERENCE = _norm(
    "batchnorm_inference", NodeType.BATCHNORM_INFERENCE,
    _req("input", "mean", "inv_variance", "scale", "bias"), (), (_Y,),
    "batch normalization inference")
BATCHNORM_BACKWARD = _norm(
    "batchnorm_backward", NodeType.BATCHNORM_BWD,
    _req("grad", "input", "scale", "mean", "inv_variance") + (_PEER,), (), _grads(False),
    "batch normalization backward")
GENSTATS = _norm(
    "genstats", NodeType.GENSTATS, _req("input"), (),
    (OutputSpec("SUM", infer=_PER_CHANNEL, free_dims=True),
     OutputSpec("SQ_SUM", infer=_PER_CHANNEL, free_dims=True)),
    "per-channel sum and sum of squares")

SPECS: tuple[OpSpec, ...] = (
    RMSNORM, RMSNORM_BACKWARD, LAYERNORM, LAYERNORM_BACKWARD, ADALAYERNORM,
    ADALAYERNORM_BACKWARD, INSTANCENORM, INSTANCENORM_BACKWARD, BATCHNORM,
    BATCHNORM_INFERENCE, BATCHNORM_BACKWARD, GENSTATS,
)
