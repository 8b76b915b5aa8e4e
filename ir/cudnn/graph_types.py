"""`Tensor`: one tensor of a graph, with the classic fluent setters and getters.

Identity-hashed. Every write goes through its owning graph, which refuses it once the
graph is frozen and otherwise drops a previous validation. Caller-set layouts are kept
apart from inferred ones: `dim_assigned` / `stride_assigned` are True only for values the
caller gave; inferred (provisional) dims and row-major strides are written by the graph
through the `_provisional_*` hooks, which do not count as mutations.
`dim`/`stride` are `LayoutList`s while the graph is mutable and tuples after the freeze.
Internally a layout is stored as a tuple until someone reads `dim` / `stride` on a mutable
graph: only then is its guarded list made (most tensors of a built graph are never read
that way, and a list with its edit callback costs more than the tuple).
"""
from __future__ import annotations

import operator
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cudnn.layout_list import LayoutList
from cudnn.ops.data_types import data_type, to_data_type
from cudnn.ops.enums import scalar_type, tensor_reordering
from cudnn.ops.errors import OpTypeError, OpValueError, show

if TYPE_CHECKING:
    from cudnn._pygraph import pygraph


#: the largest extent, stride or uid: the backend's int64 (larger values would only fail
#: later, as a cast error in the C++ binding).
INT64_MAX = 2**63 - 1


def normalize_dims(value: Any, where: str, argument: str = "dim") -> tuple[int, ...]:
    """A sequence of ints in [0, 2**63) (list, tuple, torch.Size, ...) as a tuple."""
    if type(value) is tuple or type(value) is list:  # the common case, without abc checks
        for v in value:  # a plain loop: no generator frame (every tensor passes here)
            if type(v) is not int or not 0 <= v <= INT64_MAX:
                break
        else:
            return tuple(value)
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise OpTypeError(where, argument, "a sequence of ints", show(value))
    out = []
    for v in value:
        if isinstance(v, bool):
            raise OpTypeError(where, argument, "a sequence of ints", show(value))
        try:
            n = operator.index(v)
        except TypeError:
            raise OpTypeError(where, argument, "a sequence of ints", show(value)) from None
        if n < 0:
            raise OpValueError(where, argument, "non-negative extents", show(list(value)))
        if n > INT64_MAX:
            raise OpValueError(where, argument, "extents below 2**63 (int64)",
                               show(list(value)))
        out.append(n)
    return tuple(out)


def row_major(dims: Sequence[int]) -> tuple[int, ...]:
    strides, running = [], 1
    for n in reversed(dims):
        strides.append(running)
        running *= max(n, 1)
    return tuple(reversed(strides))


#: {dims: row-major strides} for the builders' outputs (graphs repeat a few shapes).
_ROW_MAJOR: dict[tuple[int, ...], tuple[int, ...]] = {}


class _TensorSlots:
    """A Tensor's storage. `Tensor` adds the API and guards writes; `_NewTensor` is one
    under construction, whose slots are written directly (no guard), then becomes a
    Tensor by `__class__` assignment (both add no slots, so the layouts match)."""

    __slots__ = ("_name", "_data_type", "_dim", "_stride", "_is_virtual", "_is_pass_by_value",
                 "_pass_by_value", "_uid", "_uid_assigned", "_dim_assigned", "_stride_assigned",
                 "_dtype_provisional", "_reordering_type", "_ragged_offset",
                 "_ragged_offset_multiplier", "_alignment_value", "_scalar_type", "_owner",
                 "_frozen", "__weakref__")


class _NewTensor(_TensorSlots):
    __slots__ = ()


class Tensor(_TensorSlots):
    """A graph tensor. Create it through `pygraph.tensor()` / `tensor_like()` or an op."""

    __slots__ = ()

    def __init__(self, name: str = "", data_type: Any = None, dim: Sequence[int] = (),
                 stride: Sequence[int] = (), is_virtual: bool = False,
                 is_pass_by_value: bool = False, pass_by_value: Any = None) -> None:
        init = object.__setattr__
        init(self, "_owner", None)
        init(self, "_name", str(name))
        init(self, "_data_type", to_data_type(data_type))
        init(self, "_dim", normalize_dims(dim, "Tensor"))
        init(self, "_stride", normalize_dims(stride, "Tensor", "stride"))
        init(self, "_frozen", False)
        init(self, "_is_virtual", bool(is_virtual))
        init(self, "_is_pass_by_value", bool(is_pass_by_value))
        init(self, "_pass_by_value", pass_by_value)
        init(self, "_uid", 0)
        for flag in ("_uid_assigned", "_dim_assigned", "_stride_assigned", "_dtype_provisional"):
            init(self, flag, False)
        init(self, "_reordering_type", None)
        init(self, "_ragged_offset", None)
        init(self, "_ragged_offset_multiplier", 1)
        init(self, "_alignment_value", 1)
        init(self, "_scalar_type", None)

    @classmethod
    def _virtual_output(cls, name: str, dims: tuple[int, ...] | None) -> Tensor:
        """An op's virtual output with provisional dims (row-major strides) or none: what
        `Tensor(name=name, is_virtual=True)` then `_provisional_dims(dims)` make, in one
        step (the graph's builders make one per node). The caller attaches it."""
        stride = _ROW_MAJOR.get(dims) if dims else ()
        if stride is None:
            stride = _ROW_MAJOR[dims] = row_major(dims)
            if len(_ROW_MAJOR) > 4096:
                _ROW_MAJOR.clear()
        return cls._made(name, dims or (), stride, True, False, False, False)

    @classmethod
    def _made(cls, name: str, dims: tuple[int, ...], stride: tuple[int, ...],
              is_virtual: bool, is_pass_by_value: bool, dim_assigned: bool,
              stride_assigned: bool) -> Tensor:
        """`Tensor(...)` for values already checked (normalized dims and strides, plain
        bools), in one step: no per-slot guard. The caller attaches it."""
        n = _NewTensor()
        n._owner = None
        n._name = name
        n._data_type = None
        n._dim = dims
        n._stride = stride
        n._is_virtual = is_virtual
        n._is_pass_by_value = is_pass_by_value
        n._pass_by_value = None
        n._uid = 0
        n._uid_assigned = n._dtype_provisional = n._frozen = False
        n._dim_assigned = dim_assigned
        n._stride_assigned = stride_assigned
        n._reordering_type = n._ragged_offset = n._scalar_type = None
        n._ragged_offset_multiplier = n._alignment_value = 1
        n.__class__ = cls
        return n  # type: ignore[return-value]

    # -- plumbing --------------------------------------------------------------------
    def _guarded(self, field: str) -> LayoutList | tuple[int, ...]:
        """`dim` / `stride` as callers see it: the stored tuple turned into the guarded
        list (kept, so later reads and edits share it) while the graph is mutable."""
        values = getattr(self, "_" + field)
        if type(values) is not tuple or self._frozen:
            return values
        guarded = LayoutList(values, lambda candidate: self._layout_edited(field, candidate))
        object.__setattr__(self, "_" + field, guarded)
        return guarded

    def _layout_edited(self, field: str, candidate: list[int]) -> tuple[int, ...]:
        """An in-place edit of dim/stride: the values `set_dim` / `set_stride` would take
        (checked before anything changes), then a caller-set layout."""
        values = normalize_dims(candidate, f"tensor '{self._name}'.{field}", field)
        self._mutating(f"edit {field} of tensor '{self._name}' in place")
        object.__setattr__(self, f"_{field}_assigned", True)
        return values

    @property
    def owner(self) -> pygraph | None:
        ref = self._owner
        return None if ref is None else ref()

    def _attach(self, graph: pygraph) -> None:
        object.__setattr__(self, "_owner", weakref.ref(graph))

    def _mutating(self, what: str) -> None:
        graph = self.owner
        if graph is not None:
            graph._before_mutation(what)

    def _set(self, field: str, value: Any, what: str) -> Tensor:
        self._mutating(what)
        object.__setattr__(self, field, value)
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        setter = _ATTRIBUTE_SETTERS.get(name)
        if setter is None:
            graph = self.owner
            if graph is not None and graph.is_frozen:
                graph._before_mutation(f"set '{name}' on tensor '{self._name}'")
            raise AttributeError(f"Tensor attribute '{name}' is read-only or unknown")
        setter(self, value)

    # Graph-internal writes (inference, validate's fill, the backend copying back the
    # layouts it inferred): not user mutations, never marked caller-set, allowed when
    # frozen (then stored as tuples, like every layout of a frozen graph).
    def _provisional_dims(self, dims: Sequence[int]) -> None:
        object.__setattr__(self, "_dim", tuple(dims))
        if not self._stride_assigned:
            self._provisional_stride(row_major(dims))

    def _provisional_stride(self, stride: Sequence[int]) -> None:
        object.__setattr__(self, "_stride", tuple(stride))

    def _provisional_dtype(self, dt: data_type | None) -> None:
        object.__setattr__(self, "_data_type", dt)
        object.__setattr__(self, "_dtype_provisional", dt is not None)

    def _freeze_layout(self) -> None:
        object.__setattr__(self, "_dim", tuple(self._dim))
        object.__setattr__(self, "_stride", tuple(self._stride))
        object.__setattr__(self, "_frozen", True)

    # -- read access ----------------------------------------------------------------
    name = property(lambda self: self._name)
    data_type = property(lambda self: self._data_type)
    dim = property(lambda self: self._dim if type(self._dim) is not tuple or self._frozen
                   else self._guarded("dim"))
    stride = property(lambda self: self._stride if type(self._stride) is not tuple
                      or self._frozen else self._guarded("stride"))
    is_virtual = property(lambda self: self._is_virtual)
    is_pass_by_value = property(lambda self: self._is_pass_by_value)
    pass_by_value = property(lambda self: self._pass_by_value)
    uid = property(lambda self: self._uid)
    uid_assigned = property(lambda self: self._uid_assigned)
    dim_assigned = property(lambda self: self._dim_assigned)
    stride_assigned = property(lambda self: self._stride_assigned)
    #: True when data_type was filled by inference/validate rather than set by the caller.
    data_type_provisional = property(lambda self: self._dtype_provisional)
    reordering_type = property(lambda self: self._reordering_type)
    ragged_offset = property(lambda self: self._ragged_offset)
    ragged_offset_multiplier = property(lambda self: self._ragged_offset_multiplier)
    alignment_value = property(lambda self: self._alignment_value)
    scalar_type = property(lambda self: self._scalar_type)

    def get_uid(self) -> int:
        return self._uid

    def get_name(self) -> str:
        return self._name

    def get_dim(self) -> list[int]:
        return list(self._dim)

    def get_stride(self) -> list[int]:
        return list(self._stride)

    def get_data_type(self) -> data_type | None:
        return self._data_type

    def get_is_virtual(self) -> bool:
        return self._is_virtual

    def get_is_pass_by_value(self) -> bool:
        return self._is_pass_by_value

    def get_reordering_type(self) -> tensor_reordering | None:
        return self._reordering_type

    def get_ragged_offset_multiplier(self) -> int:
        return self._ragged_offset_multiplier

    # -- fluent setters -------------------------------------------------------------
    def set_output(self, value: bool) -> Tensor:
        return self.set_is_virtual(not _as_bool(value, "set_output"))

    def set_is_virtual(self, value: bool) -> Tensor:
        return self._set("_is_virtual", _as_bool(value, "set_is_virtual"),
                         f"change is_virtual of tensor '{self._name}'")

    def set_data_type(self, value: Any) -> Tensor:
        try:
            dt = to_data_type(value)
        except TypeError:
            raise OpTypeError(f"tensor '{self._name}'.set_data_type", "data_type",
                              "a cudnn.data_type or a torch dtype", show(value)) from None
        self._set("_data_type", dt, f"set the data type of tensor '{self._name}'")
        object.__setattr__(self, "_dtype_provisional", False)
        return self

    def set_dim(self, value: Sequence[int]) -> Tensor:
        dims = normalize_dims(value, f"tensor '{self._name}'.set_dim")
        self._mutating(f"set dims of tensor '{self._name}'")
        object.__setattr__(self, "_dim", dims)
        object.__setattr__(self, "_dim_assigned", True)
        if not self._stride_assigned:
            self._provisional_stride(row_major(dims))
        return self

    def set_stride(self, value: Sequence[int]) -> Tensor:
        strides = normalize_dims(value, f"tensor '{self._name}'.set_stride", "stride")
        self._mutating(f"set strides of tensor '{self._name}'")
        object.__setattr__(self, "_stride", strides)
        object.__setattr__(self, "_stride_assigned", True)
        return self

    def set_name(self, value: str) -> Tensor:
        if not isinstance(value, str):
            raise OpTypeError(f"tensor '{self._name}'.set_name", "name", "a str", show(value))
        return self._set("_name", value, f"rename tensor '{self._name}'")

    def set_uid(self, value: int) -> Tensor:
        uid = _as_uid(value, f"tensor '{self._name}'.set_uid")
        graph = self.owner
        if uid is None:
            raise OpValueError(f"tensor '{self._name}'.set_uid", "uid", "a uid >= 0", show(value))
        if uid == self._uid:
            # same value: a no-op even when frozen; marks the uid user-owned while mutable
            if graph is None or not graph.is_frozen:
                object.__setattr__(self, "_uid_assigned", True)
                if graph is not None:
                    graph._uids.claim(self, uid)
            return self
        holder = None if graph is None else graph._uids.holder(uid)
        if holder is not None and holder.uid_assigned:
            # refuse before touching the graph (a failed call must not drop validation)
            raise ValueError(f"uid {uid} is already user-assigned to tensor '{holder.name}'")
        self._mutating(f"change the uid of tensor '{self._name}'")
        if graph is None:
            object.__setattr__(self, "_uid", uid)
            object.__setattr__(self, "_uid_assigned", True)
        else:
            graph._uids.claim(self, uid)
        return self

    def set_ragged_offset(self, value: Tensor | None) -> Tensor:
        if value is not None and not isinstance(value, Tensor):
            raise OpTypeError(f"tensor '{self._name}'.set_ragged_offset", "ragged_offset",
                              "a cudnn Tensor of the same graph or None", show(value))
        if value is not None and value.owner is not self.owner:
            raise OpValueError(f"tensor '{self._name}'.set_ragged_offset", "ragged_offset",
                               "a tensor of the same graph",
                               f"tensor '{value.name}' of another graph")
        if value is self:
            raise OpValueError(f"tensor '{self._name}'.set_ragged_offset", "ragged_offset",
                               "another tensor", "the tensor itself")
        return self._set("_ragged_offset", value, f"set the ragged offset of tensor '{self._name}'")

    def set_ragged_offset_multiplier(self, value: int) -> Tensor:
        return self._set("_ragged_offset_multiplier",
                         _as_positive(value, f"tensor '{self._name}'.set_ragged_offset_multiplier",
                                      "multiplier"),
                         f"set the ragged offset multiplier of tensor '{self._name}'")

    def set_alignment_value(self, value: int) -> Tensor:
        return self._set("_alignment_value",
                         _as_positive(value, f"tensor '{self._name}'.set_alignment_value",
                                      "alignment_value"),
                         f"set the alignment of tensor '{self._name}'")

    def set_reordering_type(self, value: tensor_reordering | None) -> Tensor:
        if value is not None and not isinstance(value, tensor_reordering):
            raise OpTypeError(f"tensor '{self._name}'.set_reordering_type", "reordering_type",
                              "a cudnn.tensor_reordering member", show(value))
        value = None if value is tensor_reordering.NONE else value
        return self._set("_reordering_type", value,
                         f"set the reordering type of tensor '{self._name}'")

    def set_is_pass_by_value(self, value: bool) -> Tensor:
        return self._set("_is_pass_by_value", _as_bool(value, "set_is_pass_by_value"),
                         f"change is_pass_by_value of tensor '{self._name}'")

    def set_pass_by_value(self, value: Any) -> Tensor:
        return self._set("_pass_by_value", value, f"set the value of scalar '{self._name}'")

    def set_scalar_type(self, value: scalar_type | None) -> Tensor:
        if value is not None and not isinstance(value, scalar_type):
            raise OpTypeError(f"tensor '{self._name}'.set_scalar_type", "scalar_type",
                              "a cudnn.scalar_type member", show(value))
        return self._set("_scalar_type", value, f"set the scalar type of '{self._name}'")

    # -- checks and display ---------------------------------------------------------
    def validate(self) -> None:
        """Raise ValueError if this tensor cannot be handed to an engine."""
        if self._is_virtual and self._is_pass_by_value:
            raise ValueError(f"tensor '{self._name}' is both virtual and pass-by-value")
        if self._is_pass_by_value:
            return
        if not self._dim:
            raise ValueError(f"tensor '{self._name}' (uid {self._uid}) has no dims: set them "
                             "with set_dim() or the op's out_dims=")
        if not self._stride:
            raise ValueError(f"tensor '{self._name}' (uid {self._uid}) has no strides")
        if len(self._dim) != len(self._stride):
            raise ValueError(f"tensor '{self._name}': dims {list(self._dim)} and strides "
                             f"{list(self._stride)} differ in rank")
        for field in (self._dim, self._stride):
            if set(map(type, field)) == {int} and min(field) >= 0:
                continue  # plain non-negative ints (the usual case, checked in C)
            if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in field):
                raise ValueError(f"tensor '{self._name}': layout {list(field)} holds a value "
                                 "that is not a non-negative int")

    def __repr__(self) -> str:
        dt = "unset" if self._data_type is None else self._data_type.name
        flags = "virtual" if self._is_virtual else "io"
        return (f"Tensor(name={self._name!r}, uid={self._uid}, dim={list(self._dim)}, "
                f"stride={list(self._stride)}, data_type={dt}, {flags})")


def _as_bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise OpTypeError(where, "value", "a bool", show(value))
    return value


def _as_positive(value: Any, where: str, argument: str) -> int:
    if isinstance(value, bool):
        raise OpTypeError(where, argument, "an int >= 1", show(value))
    try:
        n = operator.index(value)
    except TypeError:
        raise OpTypeError(where, argument, "an int >= 1", show(value)) from None
    if not 1 <= n <= INT64_MAX:
        raise OpValueError(where, argument, "an int in [1, 2**63)", str(n))
    return n


def _as_uid(value: Any, where: str) -> int | None:
    """A user uid: an int >= 0, or -1 / None meaning unset."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise OpTypeError(where, "uid", "an int >= 0", show(value))
    try:
        uid = operator.index(value)
    except TypeError:
        raise OpTypeError(where, "uid", "an int >= 0", show(value)) from None
    if uid == -1:
        return None
    if not 0 <= uid <= INT64_MAX:
        raise OpValueError(where, "uid", "an int in [0, 2**63) (or -1 for unset)", str(uid))
    return uid


# Attribute writes (`t.dim = [...]`) behave exactly like the matching setter.
_ATTRIBUTE_SETTERS = {
    "name": Tensor.set_name, "data_type": Tensor.set_data_type, "dim": Tensor.set_dim,
    "stride": Tensor.set_stride, "is_virtual": Tensor.set_is_virtual,
    "is_pass_by_value": Tensor.set_is_pass_by_value, "pass_by_value": Tensor.set_pass_by_value,
    "uid": Tensor.set_uid, "reordering_type": Tensor.set_reordering_type,
    "ragged_offset": Tensor.set_ragged_offset,
    "ragged_offset_multiplier": Tensor.set_ragged_offset_multiplier,
    "alignment_value": Tensor.set_alignment_value, "scalar_type": Tensor.set_scalar_type,
}
