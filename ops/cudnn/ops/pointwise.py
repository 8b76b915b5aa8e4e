"""OpSpecs of the 54 pointwise ops (NodeType POINTWISE).

47 ops come from the uniform table (tensors positionally or by keyword; `name` and
`compute_data_type` keyword-only); 7 have ordinary signatures with scalar params
(relu, leaky_relu, swish, gen_index and their backward forms). Ports are the binding's
keyword names (`a`/`b`, `input`/`comparison`, `loss`/`input`, ...). The one output
`OUT_0` has the right-aligned numpy broadcast of all inputs' dims.
"""
from __future__ import annotations

from cudnn.ops.node_type import NodeType
from cudnn.ops.op_spec import (AttrKind, AttrSpec, BuilderKeyword, CallStyle, Check, OpCall,
                               OpGroup, OpSpec, OutputSpec, PortSpec, ReturnStyle)
from cudnn.ops.rules import broadcast, broadcast_shapes, passes_equal_dims

_NAME = BuilderKeyword.NAME.value
_CDT = BuilderKeyword.COMPUTE_DATA_TYPE.value


@passes_equal_dims
def _check_broadcast(call: OpCall) -> None:
    known = [(p.name, call.dim(p.name)) for p in call.spec.ports if call.dim(p.name)]
    first = known[0][1] if known else None
    for i in (() if all(d == first for _, d in known) else range(1, len(known))):
        if broadcast_shapes(d for _, d in known[: i + 1] if d is not None) is None:
            name, dims = known[i]
            raise call.fail(name, "dims broadcast-compatible with "
                            + ", ".join(f"{n} {list(d or ())}" for n, d in known[:i]),
                            f"{name}.dim {list(dims or ())}")


def _check_gen_index(call: OpCall) -> None:
    _check_broadcast(call)
    if "axis" in call.params:
        dims = call.dim("input")
        axis = call.params["axis"]
        if dims is not None and not 0 <= axis < len(dims):
            raise call.fail("axis", f"an axis in [0, {len(dims)})", f"axis {axis}")


def _table(name: str, *ports: str) -> OpSpec:
    """A uniform-table op: tensor args only."""
    return OpSpec(
        name=name, group=OpGroup.POINTWISE, node_type=NodeType.POINTWISE,
        ports=tuple(PortSpec(p, required=True) for p in ports), attrs=(),
        outputs=(OutputSpec("OUT_0", infer=broadcast(*ports)),),
        call=CallStyle(positional=ports, keyword_only=(_NAME, _CDT)),
        returns=ReturnStyle.SINGLE, backend_method=name, check=_check_broadcast,
        summary=f"pointwise {name} of {', '.join(ports)}")


def _explicit(name: str, ports: tuple[str, ...], attrs: tuple[AttrSpec, ...],
              check: Check = _check_broadcast) -> OpSpec:
    """An explicit op: tensors, then scalar params, then name and compute_data_type."""
    return OpSpec(
        name=name, group=OpGroup.POINTWISE, node_type=NodeType.POINTWISE,
        ports=tuple(PortSpec(p, required=True) for p in ports), attrs=attrs,
        outputs=(OutputSpec("OUT_0", infer=broadcast(*ports)),),
        call=CallStyle(positional=ports + tuple(a.name for a in attrs) + (_NAME, _CDT)),
        returns=ReturnStyle.SINGLE, backend_method=name, check=check,
        summary=f"pointwise {name} of {', '.join(ports)}")


def _float(name: str, required: bool = False) -> AttrSpec:
    return AttrSpec(name, AttrKind.FLOAT, required=required)


_CLIPS = (_float("negative_slope"), _float("lower_clip"), _float("upper_clip"))
_U = ("input",)
_AB = ("a", "b")
_I01 = ("input0", "input1")
_CMP = ("input", "comparison")
_BWD = ("loss", "input")

# unary
ABS = _table("abs", *_U)
CEIL = _table("ceil", *_U)
COS = _table("cos", *_U)
ELU = _table("elu", *_U)
ERF = _table("erf", *_U)
EXP = _table("exp", *_U)
FLOOR = _table("floor", *_U)
GELU = _table("gelu", *_U)
GELU_APPROX_TANH = _table("gelu_approx_tanh", *_U)
IDENTITY = _table("identity", *_U)
LOG = _table("log", *_U)
LOGICAL_NOT = _table("logical_not", *_U)
NEG = _table("neg", *_U)
RECIPROCAL = _table("reciprocal", *_U)
RSQRT = _table("rsqrt", *_U)
SIGMOID = _table("sigmoid", *_U)
SIN = _table("sin", *_U)
SOFTPLUS = _table("softplus", *_U)
SQRT = _table("sqrt", *_U)
TAN = _table("tan", *_U)
TANH = _table("tanh", *_U)
# binary a/b
ADD = _table("add", *_AB)
ADD_SQUARE = _table("add_square", *_AB)
DIV = _table("div", *_AB)
LOGICAL_AND = _table("logical_and", *_AB)
LOGICAL_OR = _table("logical_or", *_AB)
MUL = _table("mul", *_AB)
SUB = _table("sub", *_AB)
# binary input0/input1
MAX = _table("max", *_I01)
MIN = _table("min", *_I01)
MOD = _table("mod", *_I01)
POW = _table("pow", *_I01)
# compare
CMP_EQ = _table("cmp_eq", *_CMP)
CMP_GE = _table("cmp_ge", *_CMP)
CMP_GT = _table("cmp_gt", *_CMP)
CMP_LE = _table("cmp_le", *_CMP)
CMP_LT = _table("cmp_lt", *_CMP)
CMP_NEQ = _table("cmp_neq", *_CMP)
# bias / scale
BIAS = _table("bias", "input", "bias")
SCALE = _table("scale", "input", "scale")
# activation backward
ELU_BACKWARD = _table("elu_backward", *_BWD)
GELU_APPROX_TANH_BACKWARD = _table("gelu_approx_tanh_backward", *_BWD)
GELU_BACKWARD = _table("gelu_backward", *_BWD)
SIGMOID_BACKWARD = _table("sigmoid_backward", *_BWD)
SOFTPLUS_BACKWARD = _table("softplus_backward", *_BWD)
TANH_BACKWARD = _table("tanh_backward", *_BWD)
# ternary
BINARY_SELECT = _table("binary_select", "input0", "input1", "mask")

# explicit builders
RELU = _explicit("relu", _U, _CLIPS)
LEAKY_RELU = _explicit("leaky_relu", _U, (_float("negative_slope", required=True),))
SWISH = _explicit("swish", _U, (_float("swish_beta"),))
GEN_INDEX = _explicit("gen_index", _U, (AttrSpec("axis", AttrKind.INT, required=True, minimum=0),),
                      check=_check_gen_index)
RELU_BACKWARD = _explicit("relu_backward", _BWD, _CLIPS)
LEAKY_RELU_BACKWARD = _explicit("leaky_relu_backward", _BWD,
                                (_float("negative_slope", required=True),))
SWISH_BACKWARD = _explicit("swish_backward", _BWD, (_float("swish_beta"),))

SPECS: tuple[OpSpec, ...] = (
    ABS, CEIL, COS, ELU, ERF, EXP, FLOOR, GELU, GELU_APPROX_TANH, IDENTITY, LOG, LOGICAL_NOT,
    NEG, RECIPROCAL, RSQRT, SIGMOID, SIN, SOFTPLUS, SQRT, TAN, TANH,
    ADD, ADD_SQUARE, DIV, LOGICAL_AND, LOGICAL_OR, MUL, SUB, MAX, MIN, MOD, POW,
    CMP_EQ, CMP_GE, CMP_GT, CMP_LE, CMP_LT, CMP_NEQ, BIAS, SCALE,
    ELU_BACKWARD, GELU_APPROX_TANH_BACKWARD, GELU_BACKWARD, SIGMOID_BACKWARD,
    SOFTPLUS_BACKWARD, TANH_BACKWARD, BINARY_SELECT,
    RELU, LEAKY_RELU, SWISH, GEN_INDEX, RELU_BACKWARD, LEAKY_RELU_BACKWARD, SWISH_BACKWARD,
)
