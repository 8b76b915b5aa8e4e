"""Lowering: a validated IR `cudnn.pygraph` -> the C++ `backend_graph` of cudnn._pybind_module.

One builder call per IR node, in graph order, read from the node's OpSpec alone: the
method is `spec.backend_method`; every port the caller wired and every attr the caller
passed goes by its (shared) name; `compute_data_type` unless `spec.no_cdt`; the node's
name. Nothing here is per op, so every op the extension's table has lowers the same way:
all 54 pointwise modes, matmul, conv fprop/dgrad/wgrad, reduction, the norms forward and
backward, batchnorm_inference, genstats, reshape, concatenate, slice, transpose, rope and
rope_backward, block-scale quantize/dequantize, MoE grouped matmul forward/backward, SDPA
forward/backward (native descriptors) and FP8 SDPA forward/backward (composite graphs inside
the extension); the MXFP8 SDPA variants have builders that always decline. The one exception is sdpa_backward where the native SDPA_BWD descriptor cannot run (cuDNN
< 9.21 or a device below sm_100, sdpa_bwd_route.py): it becomes the composite
fused-attention graph of sdpa_bwd_composite.py, noted in `LoweredGraph.notes`.

Uids: the IR owns them all. Graph inputs are created with `tensor(uid=...)`, op outputs
get theirs through `set_uid`; the only uids the lowering adds are those of pass-by-value
scalars it makes for Python numbers (sdpa `attn_scale=0.125`), of the internal tensors of
the extension's composite ops (`backend_graph.op_internals()`: batchnorm_inference,
sdpa_fp8, sdpa_fp8_backward) and of the tensors the composite sdpa_backward adds, all drawn
above every uid of the graph. `LoweredGraph.verify_uids`
checks the result (and again after the backend builds).

Layouts (docs/GRAPH_IR.md §2): graph inputs are described exactly as the IR
has them (lower-rank broadcast operands padded with leading 1s, see broadcast_layout.py).
Of op outputs only caller-set dims/strides are pushed (dims go along with caller-set
strides, which mean nothing without them), except `push_output_dims` ops (IR dims) and the
SDPA group (IR dims and strides). Everything else the backend infers, and its inferences
are copied back into the IR tensors whose layouts the caller did not set.

Declines (cudnnGraphNotSupportedError, raised before anything is recorded when they can be
known statically): python-only ops (linear attention, ...) and python-only arguments, ops
or arguments the extension has no builder or keyword for, ops whose engines need a newer GPU
than the handle's (the op table's `min_sm`: FP8 SDPA sm_90, MXFP8 SDPA sm_100), graph
options the backend cannot honour, layouts it cannot express; then whatever the extension itself declines (SDPA masks,
dropout, version-gated features, ...) and shape rules its validation refuses.
"""
from __future__ import annotations

import functools
import numbers
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cudnn.backend import sdpa_bwd_composite
from cudnn.backend.broadcast_layout import BroadcastLayouts, broadcast_layouts, natural_layout
from cudnn.backend.lowered_graph import LoweredGraph
from cudnn.backend.sdpa_bwd_route import SdpaBackwardRoute, device_sm_version, route_for
from cudnn.ops.data_types import data_type
from cudnn.ops.errors import cudnnGraphNotSupportedError
from cudnn.ops.op_spec import OpGroup, PortKind

if TYPE_CHECKING:
    from cudnn import Node, Tensor, pygraph

#: largest integer a pass-by-value scalar can carry exactly (the extension takes a double).
_EXACT_INT = 2 ** 53


# -- what the extension accepts -----------------------------------------------------------
@dataclass(frozen=True)
class _Builder:
    """What one backend_graph method takes, from the extension's own op table."""
    names: frozenset[str]
    #: tensor ports the method names but declines whenever given, with the reason.
    unsupported_ports: dict[str, str]
    #: compute capability its engines need (major * 10 + minor; 0: any), and why
    min_sm: int = 0
    min_sm_reason: str = ""


@functools.lru_cache(maxsize=None)
def _builders(ext: Any) -> dict[str, _Builder]:
    table: dict[str, _Builder] = {}
    for schema in ext.op_schemas():
        names = {p["name"] for p in schema["inputs"]} | {a["name"] for a in schema["attrs"]}
        names.add("name")
        if schema["takes_compute_data_type"]:
            names.add("compute_data_type")
        table[schema["method"]] = _Builder(
            frozenset(names), {p["name"]: p["unsupported"] for p in schema["inputs"]
                               if p["unsupported"]},
            schema.get("min_sm", 0), schema.get("min_sm_reason") or "")
    return table


def device_gated(graph: pygraph, ext: Any) -> bool:
    """Whether any node's builder needs a minimum compute capability (so the device is
    worth asking about, which costs a cuDNN call)."""
    builders = _builders(ext)
    return any(getattr(builders.get(n.spec.backend_method), "min_sm", 0) for n in graph.nodes)


def backend_arguments(node: Node) -> Iterator[tuple[str, Any, Any]]:
    """(name, spec, value) of every argument the lowering forwards for `node`: wired ports
    the binding takes (out-direction ones too) and passed attrs; python-only ones never."""
    spec = node.spec
    for port in spec.ports:
        if port.to_backend and not port.python_only:
            value = node.argument(port.name)
            if value is not None:
                yield port.name, port, value
    for attr in spec.attrs:
        if not attr.python_only and attr.name in node.params:
            yield attr.name, attr, node.params[attr.name]


# -- the sdpa_backward route -------------------------------------------------------------
#: the IR op whose lowering depends on the loaded cuDNN and the device (sdpa_bwd_route.py).
SDPA_BACKWARD = "sdpa_backward"


def sdpa_backward_route(graph: pygraph, ext: Any,
                        handle: int | None) -> SdpaBackwardRoute | None:
    """How `graph`'s sdpa_backward nodes lower here (None: it has none)."""
    if not any(n.spec.backend_method == SDPA_BACKWARD for n in graph.nodes):
        return None
    return route_for(ext, handle)


def _composite(node: Node, route: SdpaBackwardRoute | None) -> bool:
    return route is not None and route.composite and node.spec.backend_method == SDPA_BACKWARD


def _loaded_version(ext: Any) -> int | None:
    ask = getattr(ext, "cudnn_version", None)
    return ask() if ask is not None else None


# -- static declines -----------------------------------------------------------------------
def decline_reasons(graph: pygraph, ext: Any,
                    layouts: BroadcastLayouts | None = None,
                    route: SdpaBackwardRoute | None = None,
                    device_sm: int | None = None) -> list[str]:
    """Why the backend cannot take `graph` (empty: try it). `route` is how its
    sdpa_backward nodes lower (sdpa_backward_route()); None lowers them natively.
    `device_sm` is the compute capability of the GPU the graph would run on (90 for sm_90;
    None: unknown, and then cuDNN answers for ops that need a newer GPU)."""
    builders = _builders(ext)
    reasons: list[str] = []
    node_level: set[str] = set()
    for node in graph.nodes:
        head = f"No valid engine configs for {node.node_type.name}"
        spec = node.spec
        if spec.python_only or spec.backend_method is None:
            reasons.append(f"{head}: node '{node.name}': {spec.name} has no backend lowering "
                           "(python engines only)")
            continue
        own = node.python_only_reasons()
        node_level.update(own)
        reasons += [f"{head}: {r} (python engines only)" for r in own]
        if _composite(node, route):  # its own builder calls, its own rules
            reasons += [f"{head}: {r} (used because {route.reason})"
                        for r in sdpa_bwd_composite.decline_reasons(node, graph,
                                                                     _loaded_version(ext))]
            continue
        builder = builders.get(spec.backend_method)
        if builder is None:
            reasons.append(f"{head}: node '{node.name}': this cuDNN backend has no "
                           f"{spec.backend_method}() builder")
            continue
        if device_sm is not None and device_sm < builder.min_sm:
            reasons.append(f"{head}: node '{node.name}': {spec.backend_method} needs "
                           f"sm_{builder.min_sm}+ ({builder.min_sm_reason}); this device is "
                           f"sm_{device_sm}")
        for name, _, _ in backend_arguments(node):
            method = f"backend_graph.{spec.backend_method}()"
            if name not in builder.names:
                reasons.append(f"{head}: node '{node.name}': {method} takes no '{name}' argument")
            elif name in builder.unsupported_ports:
                reasons.append(f"{head}: node '{node.name}': {method} cannot take '{name}': "
                               f"{builder.unsupported_ports[name]}")
    reasons += [f"No valid engine configs: {r}" for r in graph.python_only_reasons()
                if r not in node_level]
    reasons += _option_reasons(graph)
    reasons += _tensor_reasons(graph)
    layouts = broadcast_layouts(graph) if layouts is None else layouts
    reasons += [f"No valid engine configs: {r}" for r in layouts.reasons]
    return reasons


def _option_reasons(graph: pygraph) -> list[str]:
    opts = graph.backend_options
    unsupported = {
        "sm_count": opts.sm_count, "sm_version": opts.sm_version,
        "kernel_cache": opts.kernel_cache, "device_property": opts.device_property,
        "is_dynamic_shape_enabled": opts.is_dynamic_shape_enabled or None,
        "is_override_shape_enabled": opts.is_override_shape_enabled or None,
        **dict(opts.extra),
    }
    return [f"the cuDNN backend cannot honour pygraph({name}={value!r})"
            for name, value in unsupported.items() if value is not None]


def _graph_tensors(graph: pygraph) -> list[Tensor]:
    seen: dict[int, Tensor] = {}
    for node in graph.nodes:
        for t in (*node.inputs.values(), *node.outputs.values()):
            for c in (t, t.ragged_offset):
                if c is not None:
                    seen.setdefault(id(c), c)
    return list(seen.values())


def _tensor_reasons(graph: pygraph) -> list[str]:
    reasons = []
    for t in _graph_tensors(graph):
        where = f"tensor '{t.name}' (uid {t.uid})"
        if t.ragged_offset_multiplier != 1:
            reasons.append(f"{where}: ragged_offset_multiplier {t.ragged_offset_multiplier} "
                           "(the backend descriptor has no multiplier)")
        value = t.pass_by_value
        if isinstance(value, numbers.Integral) and abs(int(value)) > _EXACT_INT:
            reasons.append(f"{where}: pass-by-value {value} cannot be carried exactly (the "
                           f"backend takes scalars as doubles, exact up to 2**53)")
    return reasons


# -- the lowering itself -------------------------------------------------------------------
class _Lowering:
    def __init__(self, graph: pygraph, ext: Any, handle: int | None,
                 layouts: BroadcastLayouts, route: SdpaBackwardRoute | None) -> None:
        ctx = graph.context
        self.backend = ext.backend_graph(
            io_data_type=ctx.io_data_type, intermediate_data_type=ctx.intermediate_data_type,
            compute_data_type=ctx.compute_data_type, handle=handle, name=graph.name)
        self.layouts = layouts.padded
        self.io_data_type = ctx.io_data_type
        self.tensors: dict[Tensor, Any] = {}
        # out-direction ports (caller tensors an op writes) are bound like inputs
        self.produced = {t for node in graph.nodes for name, t in node.outputs.items()
                         if name in node.spec.output_names}
        self.next_internal = 1 + max((t.uid for t in graph.all_tensors()), default=0)
        self.internal: list[int] = []
        self.route = route
        #: one line per lowering choice worth showing (LoweredGraph.notes)
        self.notes: list[str] = []

    def fresh_uid(self) -> int:
        """A uid for a tensor the lowering adds, above every uid of the graph."""
        uid = self.next_internal
        self.next_internal += 1
        self.internal.append(uid)
        return uid

    def tensor(self, t: Tensor) -> Any:
        """The backend tensor of a graph input (created on first use)."""
        if t in self.tensors:
            return self.tensors[t]
        if t in self.produced:
            raise AssertionError(f"tensor '{t.name}' (uid {t.uid}) is read before the node "
                                 "that produces it was lowered")
        dims, strides = self.layouts.get(t) or natural_layout(t)
        kwargs: dict[str, Any] = dict(uid=t.uid, dim=list(dims), data_type=t.data_type,
                                      is_virtual=t.is_virtual,
                                      is_pass_by_value=t.is_pass_by_value, name=t.name)
        if strides:
            kwargs["stride"] = list(strides)
        value = _scalar_value(t)
        if value is not None:
            kwargs["value"] = value
        if t.ragged_offset is not None:
            kwargs["ragged_offset"] = self.tensor(t.ragged_offset)
        if t.reordering_type is not None:
            kwargs["reordering_type"] = t.reordering_type
        bt = self.backend.tensor(**kwargs)
        self.tensors[t] = bt
        return bt

    def scalar(self, value: float, name: str) -> Any:
        return self.backend.tensor_scalar(uid=self.fresh_uid(), value=float(value),
                                          data_type=data_type.FLOAT, name=name)

    def value(self, node: Node, name: str, spec: Any, value: Any) -> Any:
        kind = getattr(spec, "kind", None)
        if kind is PortKind.TENSOR_LIST:
            return [self.tensor(v) for v in value]
        if kind is PortKind.MIXED_TUPLE:
            return value  # the binding declines tuple arguments it cannot carry
        if kind is PortKind.TENSOR_OR_SCALAR and isinstance(value, numbers.Real):
            return self.scalar(value, f"{node.name}::{name}")
        if kind in (PortKind.TENSOR, PortKind.TENSOR_OR_SCALAR):
            return self.tensor(value)
        return list(value) if isinstance(value, tuple) else value

    def node(self, node: Node) -> None:
        spec = node.spec
        if _composite(node, self.route):
            sdpa_bwd_composite.lower_composite(self, node)
            self.notes.append(f"node '{node.name}': sdpa_backward lowered to the composite "
                              f"fused-attention graph ({self.route.reason})")
            return
        kwargs: dict[str, Any] = {"name": node.name}
        for name, arg_spec, value in backend_arguments(node):
            kwargs[name] = self.value(node, name, arg_spec, value)
        if not spec.no_cdt and node.compute_data_type is not None:
            kwargs["compute_data_type"] = node.compute_data_type
        result = getattr(self.backend, spec.backend_method)(**kwargs)
        for bt in self.backend.op_internals():  # a composite op's internal tensors
            bt.set_uid(self.fresh_uid())
        outs = result if isinstance(result, list) else [result]
        if len(outs) != len(spec.outputs):
            raise AssertionError(f"node '{node.name}': backend_graph.{spec.backend_method}() "
                                 f"returned {len(outs)} outputs, the OpSpec declares "
                                 f"{len(spec.outputs)}")
        for out_spec, bt in zip(spec.outputs, outs, strict=True):
            ir = node.outputs.get(out_spec.name)
            if (ir is None) != (bt is None):
                side = "the backend" if ir is None else "the IR"
                raise AssertionError(f"node '{node.name}': output {out_spec.name} exists in "
                                     f"{side} only (presence rules disagree)")
            if ir is not None:
                self.output(spec.group is OpGroup.SDPA, spec.push_output_dims, ir, bt)

    def output(self, sdpa: bool, push_dims: bool, ir: Tensor, bt: Any) -> None:
        bt.set_uid(ir.uid).set_output(not ir.is_virtual).set_name(ir.name)
        if ir.data_type is not None:
            bt.set_data_type(ir.data_type)
        if ir.dim and (ir.dim_assigned or ir.stride_assigned or push_dims or sdpa):
            bt.set_dim(list(ir.dim))
        if ir.stride and (ir.stride_assigned or sdpa):
            bt.set_stride(list(ir.stride))
        if ir.ragged_offset is not None:
            bt.set_ragged_offset(self.tensor(ir.ragged_offset))
        if ir.reordering_type is not None:
            bt.set_reordering_type(ir.reordering_type)
        self.tensors[ir] = bt


def _scalar_value(t: Tensor) -> float | None:
    value = t.pass_by_value
    if value is None or not t.is_pass_by_value:
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    item = getattr(value, "item", None)  # a 0-d framework scalar
    if callable(item):
        return float(item())
    raise TypeError(f"tensor '{t.name}': pass-by-value {type(value).__name__} is not a number")


def lower(graph: pygraph, ext: Any, *, handle: int | None = None) -> LoweredGraph:
    """Record `graph` (validated) into a new backend_graph of `ext` and validate it there.

    Raises cudnnGraphNotSupportedError when the backend cannot take the graph; any other
    exception is a bug. The IR is not touched: building cuDNN's operation graph
    (`LoweredGraph.build_operation_graph`, which needs a GPU) and copying the backend's
    inferred layouts back (`copy_back_layouts`) are the caller's next steps.
    """
    if not graph.lifecycle.state.validated:
        raise RuntimeError("lowering needs a validated graph: call graph.validate() first")
    layouts = broadcast_layouts(graph)
    route = sdpa_backward_route(graph, ext, handle)
    device_sm = device_sm_version(ext, handle) if device_gated(graph, ext) else None
    reasons = decline_reasons(graph, ext, layouts, route, device_sm)
    if reasons:
        raise cudnnGraphNotSupportedError("; ".join(reasons))
    lowering = _Lowering(graph, ext, handle, layouts, route)
    for node in graph.nodes:
        lowering.node(node)
    try:
        lowering.backend.validate()
    except ValueError as exc:  # the backend's own shape rules: it cannot run this graph
        raise cudnnGraphNotSupportedError(f"the cuDNN backend refused the graph: {exc}") from exc
    outputs = [t for node in graph.nodes for name, t in node.outputs.items()
               if name in node.spec.output_names]
    lowered = LoweredGraph(lowering.backend, lowering.tensors, frozenset(lowering.internal),
                           handle, outputs, tuple(lowering.notes))
    lowered.verify_uids()
    return lowered


def verify_uids(lowered: LoweredGraph) -> None:
    """Every backend tensor carries exactly its IR uid (AssertionError otherwise)."""
    lowered.verify_uids()
