"""The typed op schema: one `OpSpec` per graph op.

An OpSpec is the single source every layer reads: the IR's builder methods (generated
from it), argument validation, shape inference and dtype rules, and the backend lowering
(`backend_method`, ports in binding keyword order, attrs with their effective defaults,
outputs in backend return order, presence conditions, `python_only`,
`push_output_dims`, `no_cdt`).

Port names equal the C++ binding's keyword names. Rules (shape inference, presence
conditions, consistency checks, support rules) are plain functions of an `OpCall`, a
read-only view of one node's arguments that knows nothing of the IR's Tensor class.
"""
from __future__ import annotations

import enum
import numbers
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cudnn.ops.data_types import data_type, describe, to_data_type
from cudnn.ops.errors import OpTypeError, OpValueError, show
from cudnn.ops.node_type import NodeType


class OpGroup(enum.StrEnum):
    POINTWISE = "pointwise"
    MATMUL = "matmul"
    NORM = "norm"
    REDUCTION = "reduction"
    BLOCK_SCALE = "block_scale"
    MOE = "moe"
    CONV = "conv"
    STRUCTURAL = "structural"
    SDPA = "sdpa"
    LINEAR_ATTENTION = "linear_attention"


class PortKind(enum.Enum):
    TENSOR = "tensor"
    #: a list of tensors, stored as ports `<name>_0`, `<name>_1`, ... (`list_port_key`).
    TENSOR_LIST = "tensor_list"
    #: a tensor (stored as a port) or a Python number (stored in params), e.g. attn_scale.
    TENSOR_OR_SCALAR = "tensor_or_scalar"
    #: a tuple mixing tensors and scalars (sdpa `dropout`): tensor element i is the port
    #: `<name>_<i>`; params[<name>] holds the tuple with None in the tensors' places.
    MIXED_TUPLE = "mixed_tuple"


class Direction(enum.Enum):
    IN = "in"
    #: a caller-supplied tensor the node writes (sdpa `dBias`, `rng_dump`, ...).
    OUT = "out"


class AttrKind(enum.Enum):
    BOOL = "bool"
    INT = "int"
    FLOAT = "float"
    STR = "str"
    ENUM = "enum"
    INT_LIST = "int_list"
    SLICE_LIST = "slice_list"
    DATA_TYPE = "data_type"
    CALLABLE = "callable"


class ReturnStyle(enum.Enum):
    SINGLE = "single"   # the one output tensor
    LIST = "list"       # every declared output, None where absent


class BuilderKeyword(enum.StrEnum):
    """Builder arguments that are neither ports nor attrs."""
    NAME = "name"
    COMPUTE_DATA_TYPE = "compute_data_type"
    OUT_DIMS = "out_dims"


def list_port_key(port: str, index: int) -> str:
    """Node.inputs key of tensor element `index` of a list or tuple port."""
    return f"{port}_{index}"


@dataclass(frozen=True)
class PortSpec:
    name: str
    required: bool = False
    kind: PortKind = PortKind.TENSOR
    direction: Direction = Direction.IN
    #: allowed ranks; empty = any rank.
    ranks: tuple[int, ...] = ()
    #: allowed data types when the tensor's dtype is set; None = any.
    dtypes: frozenset[data_type] | None = None
    #: binding this port makes the graph python-engine-only.
    python_only: bool = False
    #: False for ports the C++ binding does not take (read by python engines only);
    #: lowering skips them.
    to_backend: bool = True
    doc: str = ""

    def rank_mismatch(self, view: PortView) -> tuple[str, str] | None:
        """(expected, given) when a known rank breaks the port's rule, else None."""
        if view.dim and self.ranks and len(view.dim) not in self.ranks:
            ranks = " or ".join(str(r) for r in self.ranks)
            return f"rank {ranks}", f"dims {list(view.dim)} (rank {len(view.dim)})"
        return None

    def dtype_mismatch(self, view: PortView) -> tuple[str, str] | None:
        """(expected, given) when a set dtype breaks the port's rule, else None."""
        if view.data_type is not None and self.dtypes is not None \
                and view.data_type not in self.dtypes:
            return dtype_text(self.dtypes), view.data_type.name
        return None


@dataclass(frozen=True)
class AttrSpec:
    name: str
    kind: AttrKind
    #: effective value when the caller omits it (binding default, or the engines'
    #: default for python-only ops). The IR stores only attrs that were passed.
    default: Any = None
    required: bool = False
    enum_type: type[enum.Enum] | None = None
    choices: tuple[Any, ...] = ()
    minimum: float | None = None
    #: a value other than None/False makes the graph python-engine-only.
    python_only: bool = False
    #: default shown in the builder signature (None = "not passed").
    signature_default: Any = None
    doc: str = ""

    def normalize(self, op: str, value: Any) -> Any:
        """Check one passed value and return its stored form (lists become tuples)."""
        kind = self.kind
        if kind is AttrKind.BOOL:
            if not isinstance(value, bool) and type(value).__name__ != "bool_":
                raise OpTypeError(op, self.name, "a bool", show(value))
            return bool(value)
        if kind is AttrKind.INT:
            out = _as_int(op, self.name, value, "an int")
        elif kind is AttrKind.FLOAT:
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise OpTypeError(op, self.name, "a float", show(value))
            out = float(value)
        elif kind is AttrKind.STR:
            if not isinstance(value, str):
                raise OpTypeError(op, self.name, "a str", show(value))
            out = value
        elif kind is AttrKind.ENUM:
            assert self.enum_type is not None
            if not isinstance(value, self.enum_type):
                raise OpTypeError(op, self.name, f"a cudnn.{self.enum_type.__name__} member",
                                  show(value))
            out = value
        elif kind is AttrKind.INT_LIST:
            if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
                raise OpTypeError(op, self.name, "a list of int", show(value))
            out = tuple(_as_int(op, self.name, v, "a list of int") for v in value)
        elif kind is AttrKind.SLICE_LIST:
            if not isinstance(value, Sequence) or not all(isinstance(s, slice) for s in value):
                raise OpTypeError(op, self.name, "a list of slice objects", show(value))
            out = tuple(value)
        elif kind is AttrKind.DATA_TYPE:
            try:
                out = to_data_type(value)
            except TypeError:
                raise OpTypeError(op, self.name, "a cudnn.data_type or torch dtype",
                                  show(value)) from None
        elif kind is AttrKind.CALLABLE:
            if not callable(value):
                raise OpTypeError(op, self.name, "a callable", show(value))
            out = value
        else:  # pragma: no cover - exhaustive over AttrKind
            raise AssertionError(kind)
        if self.choices and out not in self.choices:
            raise OpValueError(op, self.name, f"one of {list(self.choices)}", show(value))
        if self.minimum is not None and out < self.minimum:
            raise OpValueError(op, self.name, f">= {self.minimum}", show(value))
        return out

    def makes_python_only(self, value: Any) -> bool:
        return self.python_only and value is not None and value is not False


def _as_int(op: str, name: str, value: Any, expected: str) -> int:
    if isinstance(value, bool):
        raise OpTypeError(op, name, expected, show(value))
    try:
        n = operator.index(value)
    except TypeError:
        raise OpTypeError(op, name, expected, show(value)) from None
    if not -2**63 <= n < 2**63:  # the backend's int64: larger values would fail as a cast
        raise OpValueError(op, name, f"{expected} in the int64 range", show(value))
    return n


@dataclass(frozen=True)
class PortView:
    """What rules may read of one wired tensor: its dims (() when unknown) and dtype."""
    dim: tuple[int, ...]
    data_type: data_type | None


@dataclass(frozen=True)
class OpCall:
    """Read-only view of one node's arguments, handed to every rule of its OpSpec.

    `inputs` holds wired single-tensor input ports; `lists` the list ports;
    `outputs` the outputs whose dims the caller set; `out_ports` the out-direction ports
    the caller wired; `params` the attrs that were passed.
    """
    spec: OpSpec
    inputs: Mapping[str, PortView]
    params: Mapping[str, Any]
    lists: Mapping[str, tuple[PortView, ...]] = field(default_factory=dict)
    outputs: Mapping[str, PortView] = field(default_factory=dict)
    out_ports: frozenset[str] = frozenset()

    def has(self, port: str) -> bool:
        return port in self.inputs or port in self.lists

    def has_out(self, port: str) -> bool:
        """Whether the caller wired the out-direction port `port`."""
        return port in self.out_ports

    def dim(self, port: str) -> tuple[int, ...] | None:
        """Dims of an input port, or None if it is absent or its dims are not known."""
        view = self.inputs.get(port)
        return view.dim if view is not None and view.dim else None

    def dtype(self, port: str) -> data_type | None:
        view = self.inputs.get(port)
        return None if view is None else view.data_type

    def given(self, attr: str) -> bool:
        return attr in self.params

    def param(self, attr: str) -> Any:
        """The passed value, else the attr's effective default."""
        if attr in self.params:
            return self.params[attr]
        return self.spec.attr(attr).default

    def fail(self, argument: str, expected: str, given: Any) -> OpValueError:
        """Build (the caller raises) a shape/value error naming this op."""
        text = given if isinstance(given, str) else show(given)
        return OpValueError(self.spec.name, argument, expected, text)


ShapeRule = Callable[[OpCall], Sequence[int] | None]
Check = Callable[[OpCall], None]
Support = Callable[[OpCall], Iterable[str]]


@dataclass(frozen=True)
class Rule:
    """One cross-argument support rule, as data: a node for which `broken(call)` holds is
    valid input that nothing can run, and validate() reports `reason(call)`. `subject`
    is the port or attribute the rule constrains, so a caller checking one call against
    the rule (the torch ops) can name the argument."""
    subject: str
    broken: Callable[[OpCall], bool]
    reason: Callable[[OpCall], str]


@dataclass(frozen=True)
class Condition:
    """Presence condition of an optional output; `text` is shown in docs and dumps."""
    text: str
    test: Callable[[OpCall], bool]

    def __call__(self, call: OpCall) -> bool:
        return bool(self.test(call))


@dataclass(frozen=True)
class OutputSpec:
    name: str
    #: tensor-name suffix (`<node>::<suffix>`); empty = the port name.
    suffix: str = ""
    #: None = always present.
    present: Condition | None = None
    #: None = not inferred (the caller sets dims via out_dims or set_dim).
    infer: ShapeRule | None = None
    #: False: `infer` gives the dims the op produces, and caller-set dims must equal them
    #: (validate() raises otherwise). True: `infer` only proposes a layout the caller may
    #: replace (normalization statistics over the caller's choice of axes).
    free_dims: bool = False
    #: copy the dtype of this input port at build time.
    dtype_like: str | None = None
    #: dtype filled at validate() before the graph default (sdpa Stats: FLOAT).
    fill_dtype: data_type | None = None
    doc: str = ""

    @property
    def tensor_suffix(self) -> str:
        return self.suffix or self.name


@dataclass(frozen=True)
class CallStyle:
    """Builder signature: names of ports, attrs and BuilderKeywords in order."""
    positional: tuple[str, ...]
    keyword_only: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return self.positional + self.keyword_only


@dataclass(frozen=True, eq=False)
class OpSpec:
    name: str
    group: OpGroup
    node_type: NodeType
    #: every tensor-valued argument (IN and OUT direction) in binding keyword order.
    ports: tuple[PortSpec, ...]
    attrs: tuple[AttrSpec, ...]
    #: created outputs in backend return order.
    outputs: tuple[OutputSpec, ...]
    call: CallStyle
    returns: ReturnStyle
    #: method of the C++ backend_graph the lowering calls; None for python-only ops.
    backend_method: str | None
    python_only: bool = False
    #: lowering pushes IR dims of outputs (the backend cannot infer them).
    push_output_dims: bool = False
    #: the binding takes no compute_data_type.
    no_cdt: bool = False
    #: build/validate-time consistency of shapes and values (raises OpValueError).
    check: Check | None = None
    #: validate-time support rules; each reason makes validate() raise
    #: cudnnGraphNotSupportedError. `rules` states them as data, `support` as a function.
    support: Support | None = None
    rules: tuple[Rule, ...] = ()
    summary: str = ""

    def __post_init__(self) -> None:
        known = [p.name for p in self.ports] + [a.name for a in self.attrs]
        if len(set(known)) != len(known):
            raise ValueError(f"OpSpec {self.name}: duplicate port/attr names {known}")
        builder_kws = {k.value for k in BuilderKeyword}
        names = self.call.names
        if len(set(names)) != len(names):
            raise ValueError(f"OpSpec {self.name}: duplicate names in call style {names}")
        missing = set(known) - set(names)
        unknown = set(names) - set(known) - builder_kws
        if missing or unknown:
            raise ValueError(f"OpSpec {self.name}: call style misses {sorted(missing)}, "
                             f"has unknown {sorted(unknown)}")
        if self.returns is ReturnStyle.SINGLE and len(self.outputs) != 1:
            raise ValueError(f"OpSpec {self.name}: SINGLE return needs exactly one output")

    # -- lookups -----------------------------------------------------------------
    def port(self, name: str) -> PortSpec:
        for p in self.ports:
            if p.name == name:
                return p
        raise KeyError(f"{self.name} has no port {name!r}")

    def attr(self, name: str) -> AttrSpec:
        for a in self.attrs:
            if a.name == name:
                return a
        raise KeyError(f"{self.name} has no attribute {name!r}")

    def output(self, name: str) -> OutputSpec:
        for o in self.outputs:
            if o.name == name:
                return o
        raise KeyError(f"{self.name} has no output {name!r}")

    @property
    def input_ports(self) -> tuple[PortSpec, ...]:
        return tuple(p for p in self.ports if p.direction is Direction.IN)

    @property
    def out_ports(self) -> tuple[PortSpec, ...]:
        return tuple(p for p in self.ports if p.direction is Direction.OUT)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.outputs)

    @property
    def accepts_out_dims(self) -> bool:
        return BuilderKeyword.OUT_DIMS.value in self.call.names

    def describe(self) -> str:
        return f"{self.name} ({self.group.value}, {self.node_type.name})"

    def broken_rules(self, call: OpCall) -> list[Rule]:
        return [rule for rule in self.rules if rule.broken(call)]

    def support_reasons(self, call: OpCall) -> list[str]:
        """Why the call is unsupported: every broken rule, then the support function's."""
        reasons = [rule.reason(call) for rule in self.broken_rules(call)]
        if self.support is not None:
            reasons.extend(self.support(call))
        return reasons


def dtype_text(allowed: frozenset[data_type] | None) -> str:
    if allowed is None:
        return "any data type"
    return "one of " + ", ".join(sorted(describe(d) for d in allowed))
