"""`pygraph`: the graph class users build, inspect, validate and (through the router) run.

This module holds only the graph's own state and its tensor factories; builder methods
come from the generated `builders_*` mixins, plan-list methods from `plan_api`, dumps
from `introspect`, checks from `validation`. The graph owns the uid namespace
(`uids.UidTable`) and its lifecycle (`lifecycle.Lifecycle`); every public mutation path
(builders, tensor setters and attribute writes, in-place layout edits, context writes,
graph attribute writes) goes through `_before_mutation`, which raises once frozen and
otherwise drops a previous validation.
"""
from __future__ import annotations

import contextlib
import numbers
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cudnn import introspect
from cudnn.builders_linear_attention import LinearAttentionBuilders
from cudnn.builders_pointwise import PointwiseBuilders
from cudnn.builders_sdpa import SdpaBuilders
from cudnn.builders_structured import StructuredBuilders
from cudnn.framework_arrays import ArrayDescription, describe, is_framework_array
from cudnn.graph_context import GraphContext, normalize_dtype
from cudnn.graph_types import Tensor, _as_uid, normalize_dims, row_major
from cudnn.lifecycle import GraphState, Lifecycle
from cudnn.nodes import Node
from cudnn.ops.data_types import data_type, to_data_type
from cudnn.ops.enums import cuda_graph_retention, scalar_type
from cudnn.ops.errors import GraphFrozenError, OpTypeError, show
from cudnn.ops.node_type import NodeType
from cudnn.plan_api import PlanListMixin
from cudnn.uids import UidTable
from cudnn.validation import validate_graph


@dataclass(frozen=True)
class BackendOptions:
    """Constructor arguments the backend lowering forwards (when non-None / True)."""
    handle: Any = None
    sm_count: int | None = None
    sm_version: int | None = None
    kernel_cache: Any = None
    device_property: Any = None
    is_dynamic_shape_enabled: bool = False
    is_override_shape_enabled: bool = False
    cuda_graph_retention: cuda_graph_retention | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


_NO_BACKEND_OPTIONS = BackendOptions()


class pygraph(PointwiseBuilders, StructuredBuilders, SdpaBuilders,  # noqa: N801
              LinearAttentionBuilders, PlanListMixin):
    def __init__(self, name: str = "test_graph", io_data_type: Any = None,
                 intermediate_data_type: Any = None, compute_data_type: Any = None,
                 handle: Any = None, sm_count: int | None = None, sm_version: int | None = None,
                 kernel_cache: Any = None, device_property: Any = None,
                 is_dynamic_shape_enabled: bool = False, is_override_shape_enabled: bool = False,
                 cuda_graph_retention: cuda_graph_retention | None = None, *,
                 is_cuda_graph_replay_expected: bool = False, router: Any = None,
                 **kwargs: Any) -> None:
        if not isinstance(name, str):
            raise OpTypeError("pygraph", "name", "a str", show(name))
        if handle is None and sm_count is None and sm_version is None and kernel_cache is None \
                and device_property is None and not is_dynamic_shape_enabled \
                and not is_override_shape_enabled and cuda_graph_retention is None and not kwargs:
            options = _NO_BACKEND_OPTIONS  # immutable: one instance serves every such graph
        else:
            options = BackendOptions(handle, sm_count, sm_version, kernel_cache, device_property,
                                     bool(is_dynamic_shape_enabled),
                                     bool(is_override_shape_enabled), cuda_graph_retention,
                                     dict(kwargs))
        # private state in one write (pygraph.__setattr__ guards only public names)
        self.__dict__.update(
            _name=name,
            _context=GraphContext(io_data_type, intermediate_data_type, compute_data_type,
                                  self._before_mutation),
            _lifecycle=Lifecycle(self._freeze_structures),
            _uids=UidTable(self._renumbered),
            _nodes=[],
            #: {node name: node}; names are unique and nodes never change or leave the graph.
            _node_names={},
            _tensors=[], _auto_bindings={}, _producers={}, _readers={}, _op_counters={},
            _backend_options=options,
            _replay_expected=bool(is_cuda_graph_replay_expected))
        if router is not None:
            self._lifecycle.planning.router = router

    # -- state and mutation guard ----------------------------------------------------
    @property
    def lifecycle(self) -> Lifecycle:
        return self._lifecycle

    @property
    def state(self) -> GraphState:
        return self._lifecycle.state

    @property
    def is_frozen(self) -> bool:
        return not self._lifecycle.state.mutable

    def _before_mutation(self, what: str) -> None:
        self._lifecycle.check_mutable(what)

    def _check_not_frozen(self, what: str) -> None:
        if self.is_frozen:
            raise GraphFrozenError(what)

    def _freeze_structures(self) -> None:
        for tensor in self._tensors:
            tensor._freeze_layout()

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            object.__setattr__(self, name, value)
            return
        if not isinstance(getattr(type(self), name, None), property) or \
                getattr(type(self), name).fset is None:
            self._check_not_frozen(f"set '{name}' on the graph")
            raise AttributeError(f"pygraph attribute '{name}' is read-only or unknown")
        object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        # only reached for names the class does not define: delegate to a lowered graph
        if name.startswith("_"):
            raise AttributeError(name)
        lowered = self._lifecycle.planning.lowered
        if lowered is not None:
            return getattr(lowered, name)
        raise AttributeError(f"pygraph has no attribute '{name}' (backend-graph attributes "
                             "exist only once the graph has been lowered)")

    # -- graph properties ------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        if not isinstance(value, str):
            raise OpTypeError("pygraph", "name", "a str", show(value))
        self._before_mutation("rename the graph")
        object.__setattr__(self, "_name", value)

    @property
    def context(self) -> GraphContext:
        return self._context

    @property
    def backend_options(self) -> BackendOptions:
        return self._backend_options

    @property
    def handle(self) -> Any:
        return self._backend_options.handle

    @property
    def is_cuda_graph_replay_expected(self) -> bool:
        return self._replay_expected

    @is_cuda_graph_replay_expected.setter
    def is_cuda_graph_replay_expected(self, value: bool) -> None:
        self._check_not_frozen("set is_cuda_graph_replay_expected")
        object.__setattr__(self, "_replay_expected", bool(value))

    def set_router(self, router: Any) -> pygraph:
        """Per-graph router override (None = the process-wide default)."""
        self._check_not_frozen("set the router")
        self._lifecycle.planning.router = router
        return self

    # -- inspection ------------------------------------------------------------------
    @property
    def nodes(self) -> list[Node]:
        return list(self._nodes)

    @property
    def tensors(self) -> dict[str, Tensor]:
        """Tensors by name (names held by exactly one tensor only)."""
        by_name: dict[str, list[Tensor]] = {}
        for t in self._tensors:
            by_name.setdefault(t.name, []).append(t)
        return {name: ts[0] for name, ts in by_name.items() if len(ts) == 1}

    def all_tensors(self) -> list[Tensor]:
        return list(self._tensors)

    def find_tensor(self, name_or_uid: str | int) -> Tensor | None:
        if isinstance(name_or_uid, str):
            found = [t for t in self._tensors if t.name == name_or_uid]
            if len(found) > 1:
                raise ValueError(f"tensor name '{name_or_uid}' is ambiguous "
                                 f"({len(found)} tensors); look it up by uid")
            return found[0] if found else None
        if isinstance(name_or_uid, bool) or not isinstance(name_or_uid, numbers.Integral):
            raise TypeError(f"find_tensor: expected a name or a uid, got {show(name_or_uid)}")
        return self._uids.holder(int(name_or_uid))

    def get_node(self, name: str) -> Node | None:
        return self._node_names.get(name)

    def get_inputs(self) -> list[Tensor]:
        """Non-virtual tensors that nodes read and no node writes (incl. ragged offsets)."""
        seen, out = set(), []
        for node in self._nodes:
            for t in node.inputs.values():
                for c in (t, t.ragged_offset):
                    if c is not None and id(c) not in seen and c not in self._producers \
                            and not c.is_virtual:
                        seen.add(id(c))
                        out.append(c)
        return out

    def get_outputs(self) -> list[Tensor]:
        return [t for node in self._nodes for t in node.outputs.values() if not t.is_virtual]

    def producer_of(self, tensor: Tensor) -> Node | None:
        return self._producers.get(tensor)

    def python_only_reasons(self) -> list[str]:
        """Why the backend cannot lower this graph (empty list: it may)."""
        reasons = [r for node in self._nodes for r in node.python_only_reasons()]
        types = {node.node_type for node in self._nodes}
        if NodeType.CONV_FPROP in types:
            # a rank-5 block_size dequantize feeding a conv is the FROST block-scaled conv
            reasons += [f"node '{n.name}': 5-element block_size next to conv_fprop"
                        for n in self._nodes if n.node_type is NodeType.BLOCK_SCALE_DEQUANTIZE
                        and len(n.params.get("block_size", ())) == 5]
        return reasons

    def auto_bindings(self) -> dict[int, Any]:
        """{uid: framework array} for arrays passed to builders (execute starts from it)."""
        return dict(self._auto_bindings)

    def inspect(self) -> dict[str, Any]:
        return introspect.inspect_graph(self)

    def dump(self) -> str:
        return introspect.dump_graph(self)

    def to_dot(self) -> str:
        return introspect.graph_to_dot(self)

    def __repr__(self) -> str:
        return (f"pygraph(name={self._name!r}, state={self.state.name}, "
                f"nodes={len(self._nodes)}, tensors={len(self._tensors)})")

    # -- lifecycle ------------------------------------------------------------------
    def validate(self) -> None:
        validate_graph(self)

    # -- tensor factories -------------------------------------------------------------
    def tensor(self, dim: Sequence[int], stride: Sequence[int] | None = None,
               data_type: Any = None, is_virtual: bool = False, is_pass_by_value: bool = False,
               ragged_offset: Tensor | None = None, reordering_type: Any = None,
               name: str = "", uid: int | None = None, ragged_offset_multiplier: int = 1,
               alignment_value: int = 1, **kwargs: Any) -> Tensor:
        self._check_not_frozen("create a tensor")
        if not kwargs and stride is not None and ragged_offset is None \
                and reordering_type is None and uid is None and type(name) is str \
                and type(is_virtual) is bool and type(is_pass_by_value) is bool \
                and type(ragged_offset_multiplier) is int and ragged_offset_multiplier == 1 \
                and type(alignment_value) is int and alignment_value == 1:
            # the common call, in one step; the checks and their order (and so the
            # errors) are the general path's below
            dims = normalize_dims(dim, "tensor ''.set_dim")
            strides = normalize_dims(stride, "tensor ''.set_stride", "stride")
            dt = normalize_dtype(data_type, "tensor", "data_type")
            # what _register does for a tensor without uid or ragged offset
            self._lifecycle.check_mutable("create a tensor")
            t = Tensor._made(name or f"tensor_{len(self._tensors)}", dims, strides,
                             is_virtual, is_pass_by_value, True, True)
            object.__setattr__(t, "_owner", weakref.ref(self))
            if dt is None:
                ctx = self._context
                t._provisional_dtype(ctx.intermediate_data_type if is_virtual
                                     else ctx.io_data_type)
            else:
                object.__setattr__(t, "_data_type", dt)
            self._uids.assign_auto(t)
            self._tensors.append(t)
            return t
        t = Tensor()
        t.set_dim(dim)
        if stride is not None:
            t.set_stride(stride)
        dt = normalize_dtype(data_type, "tensor", "data_type")
        t.set_is_virtual(is_virtual).set_is_pass_by_value(is_pass_by_value)
        t.set_name(name or f"tensor_{len(self._tensors)}")
        t.set_ragged_offset_multiplier(ragged_offset_multiplier)
        t.set_alignment_value(alignment_value)
        t.set_reordering_type(reordering_type)
        for key, value in kwargs.items():
            if key not in ("pass_by_value", "scalar_type"):
                raise OpTypeError("tensor", key, "one of the tensor() keyword arguments",
                                  f"unexpected keyword {key}={show(value)}")
            setattr(t, key, value)
        if ragged_offset is not None and (not isinstance(ragged_offset, Tensor)
                                          or ragged_offset.owner is not self):
            raise OpTypeError("tensor", "ragged_offset", "a tensor of this graph or None",
                              show(ragged_offset))
        return self._register(t, dt, uid, ragged_offset)

    def tensor_like(self, template: Any, name: str = "", is_virtual: bool = False) -> Tensor:
        self._check_not_frozen("create a tensor")
        if isinstance(template, Tensor):
            t = Tensor(dim=template.dim, stride=template.stride,
                       is_pass_by_value=template.is_pass_by_value)
            object.__setattr__(t, "_dim_assigned", True)
            object.__setattr__(t, "_stride_assigned", template.stride_assigned)
            dt = template.data_type
        elif is_framework_array(template):
            t, dt = _from_description(describe(template))
        else:
            raise OpTypeError("tensor_like", "template",
                              "a cudnn Tensor or a framework array", show(template))
        t.set_is_virtual(is_virtual).set_name(name or f"tensor_{len(self._tensors)}")
        return self._register(t, dt, None, None)

    def tensor_scalar(self, value: Any, scalar_type: scalar_type = scalar_type.RUNTIME_PARAM,
                      name: str = "") -> Tensor:
        self._check_not_frozen("create a tensor")
        dt = _scalar_dtype(value)
        t = Tensor(dim=(1, 1, 1, 1), stride=(1, 1, 1, 1), is_pass_by_value=True,
                   pass_by_value=value)
        t.set_scalar_type(scalar_type).set_name(name or f"scalar_{len(self._tensors)}")
        object.__setattr__(t, "_dim_assigned", True)
        object.__setattr__(t, "_stride_assigned", True)
        return self._register(t, dt, None, None)

    def _register(self, t: Tensor, dt: data_type | None, uid: Any,
                  ragged_offset: Tensor | None) -> Tensor:
        user_uid = _as_uid(uid, "tensor")
        holder = None if user_uid is None else self._uids.holder(user_uid)
        if holder is not None and holder.uid_assigned:
            raise ValueError(f"uid {user_uid} is already user-assigned to tensor '{holder.name}'")
        self._before_mutation("create a tensor")
        t._attach(self)
        if dt is None:
            ctx = self._context
            t._provisional_dtype(ctx.intermediate_data_type if t.is_virtual else ctx.io_data_type)
        else:
            object.__setattr__(t, "_data_type", dt)
        if ragged_offset is not None:
            object.__setattr__(t, "_ragged_offset", ragged_offset)
        if user_uid is None:
            self._uids.assign_auto(t)
        else:
            self._uids.claim(t, user_uid)
        self._tensors.append(t)
        return t

    # -- hooks used by op_builder and uids --------------------------------------------
    def _claim_node_name(self, op: str, name: str) -> str:
        if name:
            return name
        counters, taken = self._op_counters, self._node_names
        k = counters.get(op, 0)
        while f"{op}.{k}" in taken:  # a caller-chosen name took this one
            k += 1
        counters[op] = k + 1
        return f"{op}.{k}"

    def _auto_describe(self, value: Any, description: ArrayDescription, name: str) -> Tensor:
        t, dt = _from_description(description)
        object.__setattr__(t, "_name", name)
        self._register(t, dt, None, None)
        self._auto_bindings[t.uid] = value
        return t

    def _new_output(self, name: str, dims: tuple[int, ...] | None = None) -> Tensor:
        """A virtual output tensor, with provisional (inferred) dims when given."""
        t = Tensor._virtual_output(name, dims)
        t._attach(self)
        self._uids.assign_auto(t)
        self._tensors.append(t)
        return t

    def _add_node(self, node: Node) -> None:
        self._nodes.append(node)
        self._node_names[node.name] = node
        for t in node.outputs.values():
            self._producers[t] = node
        for t in node.inputs.values():
            self._readers.setdefault(t, node)

    @contextlib.contextmanager
    def _all_or_nothing(self) -> Iterator[None]:
        """Undo every tensor, uid, auto-binding, node and name counter added inside the
        block when it raises (a builder's commit: a failed call leaves nothing behind)."""
        tensors, nodes = len(self._tensors), len(self._nodes)
        counters = dict(self._op_counters)
        next_uid = self._uids.next_auto
        try:
            yield
        except BaseException:
            for t in self._tensors[tensors:]:
                self._uids.forget(t)
                self._auto_bindings.pop(t.uid, None)
            del self._tensors[tensors:]
            for node in self._nodes[nodes:]:
                for t in node.outputs.values():
                    if self._producers.get(t) is node:
                        del self._producers[t]
                for t in node.inputs.values():
                    if self._readers.get(t) is node:
                        del self._readers[t]
            for node in self._nodes[nodes:]:
                if self._node_names.get(node.name) is node:
                    del self._node_names[node.name]
            del self._nodes[nodes:]
            self._op_counters.clear()
            self._op_counters.update(counters)
            self._uids.next_auto = next_uid
            raise

    def _producer_of(self, tensor: Tensor) -> Node | None:
        return self._producers.get(tensor)

    def _first_reader_of(self, tensor: Tensor) -> Node | None:
        return self._readers.get(tensor)

    def _renumbered(self, old: int, new: int) -> None:
        if old in self._auto_bindings:
            self._auto_bindings[new] = self._auto_bindings.pop(old)


def _from_description(desc: ArrayDescription) -> tuple[Tensor, data_type | None]:
    # a host array of one element can only be a scalar parameter; larger host arrays
    # stay ordinary tensors (CPU engines read them in place).
    by_value = desc.on_host and desc.numel == 1
    t = Tensor(dim=desc.dims, stride=desc.strides or row_major(desc.dims),
               is_pass_by_value=by_value)
    object.__setattr__(t, "_dim_assigned", True)
    object.__setattr__(t, "_stride_assigned", True)
    return t, desc.data_type


def _scalar_dtype(value: Any) -> data_type | None:
    if isinstance(value, bool):
        return data_type.BOOLEAN
    if isinstance(value, numbers.Integral):
        return data_type.INT64 if not -2**31 <= int(value) < 2**31 else data_type.INT32
    if isinstance(value, numbers.Real):
        return data_type.FLOAT
    raw = getattr(value, "dtype", None)
    if raw is not None:
        try:
            return to_data_type(raw)
        except TypeError:
            pass
    raise OpTypeError("tensor_scalar", "value", "a Python number or a 0-d framework scalar",
                      show(value))


__all__ = ["BackendOptions", "pygraph"]
