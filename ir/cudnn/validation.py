"""`validate_graph`: whole-graph inference and checks behind `pygraph.validate()`.

Steps, in node insertion order (a topological order: a node can only read tensors that
exist when it is added):
1. dtypes filled by a previous validate are cleared (the context may have changed);
2. per node: the OpSpec check on current dims (ValueError naming op and port), then
   every output without caller-set dims is re-inferred (provisional), caller-set dims of
   an inferred output must equal the inferred ones (OpValueError quoting them),
   `dtype_like` outputs copy their source dtype and `fill_dtype` outputs (sdpa Stats)
   get theirs (for a spec `rules.decided_by_equal_dims` accepts, inputs with the same
   known dims pass the check and give the output those dims, without running either);
3. unset dtypes are filled: virtual tensors get the intermediate dtype, others io;
   tensors without caller-set strides get row-major strides;
4. every wired tensor is checked (dims, strides, ranks, virtual vs pass-by-value) and
   ragged offsets are checked (integer dtype, B + 1 entries);
5. OpSpec support rules: any reason raises cudnnGraphNotSupportedError.
Only a graph that passes all steps becomes validated; one that fails gets back every
inferred dim, stride and dtype it had before the call.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from cudnn.graph_types import Tensor, row_major
from cudnn.nodes import Node, view_of
from cudnn.op_builder import check_output_dims, check_port_view
from cudnn.ops.data_types import INDEX
from cudnn.ops.errors import cudnnGraphNotSupportedError
from cudnn.ops.op_spec import OpSpec, PortKind, PortSpec
from cudnn.ops.rules import decided_by_equal_dims

if TYPE_CHECKING:
    from cudnn._pygraph import pygraph


def validate_graph(graph: pygraph) -> None:
    if graph.lifecycle.state.validated:
        return
    nodes = graph.nodes
    wired = list(_wired_tensors(nodes))
    # a validate that raises leaves every inferred value as it found it
    saved = [(t, t._dim, t._stride, t._data_type, t._dtype_provisional) for t in wired]
    try:
        _validate(graph, nodes, wired)
    except BaseException:
        for t, dim, stride, dtype, provisional in saved:
            for field, value in (("_dim", dim), ("_stride", stride), ("_data_type", dtype),
                                 ("_dtype_provisional", provisional)):
                object.__setattr__(t, field, value)
        raise


def _validate(graph: pygraph, nodes: list[Node], wired: list[Tensor]) -> None:
    for tensor in wired:
        if tensor.data_type_provisional:
            tensor._provisional_dtype(None)
    for node in nodes:
        _infer_node(node)
    _fill_defaults(graph, wired)
    checked: set[int] = set()
    for node in nodes:
        _check_node_tensors(node, checked)
    reasons = [f"node '{node.name}' ({node.spec.name}): {reason}"
               for node in nodes if node.spec.rules or node.spec.support is not None
               for reason in node.spec.support_reasons(node.op_call())]
    if reasons:
        raise cudnnGraphNotSupportedError("graph not supported: " + "; ".join(reasons))
    graph.lifecycle.mark_validated()


def _wired_tensors(nodes: Iterable[Node]) -> Iterator[Tensor]:
    seen: set[int] = set()
    for node in nodes:
        for tensor in (*node.inputs.values(), *node.outputs.values()):
            for t in (tensor, tensor.ragged_offset):
                if t is not None and id(t) not in seen:
                    seen.add(id(t))
                    yield t


def _infer_node(node: Node) -> None:
    spec = node.spec
    ports, decided = _facts(spec)
    inputs = node.inputs
    # tensors may have been edited since the builder call: re-check the port rules first,
    # so the spec's check and inference see ranks and dtypes they were written for
    for port, listed in ports:
        keys = ([k for k in inputs if k.startswith(port.name + "_")] if listed
                else [port.name])
        for key in keys:
            if key in inputs:
                check_port_view(spec.name, port, key, view_of(inputs[key]))
    if decided and _infer_equal_dims(node):
        return
    call = node.op_call()
    if spec.check is not None:
        spec.check(call)
    for out in spec.outputs:
        tensor = node.outputs.get(out.name)
        if tensor is None:
            continue
        if tensor.dim_assigned:
            check_output_dims(spec, out, call, tuple(tensor._dim), out.name)
        elif out.infer is not None:
            dims = out.infer(call)
            if dims is not None:
                dims = tuple(int(n) for n in dims)
                if dims != tuple(tensor._dim):  # unchanged since the builder: keep it
                    tensor._provisional_dims(dims)
        if tensor.data_type is None:
            source = call.dtype(out.dtype_like) if out.dtype_like else None
            fill = source if source is not None else out.fill_dtype
            if fill is not None:
                tensor._provisional_dtype(fill)


def _infer_equal_dims(node: Node) -> bool:
    """The check and inference of a node whose spec `decided_by_equal_dims` accepts, when
    its inputs all have the same known dims and its output's are not caller-set: the
    check passes and the output has those dims. False: run them."""
    dims = None
    for tensor in node.inputs.values():
        d = tuple(tensor._dim)
        if not d or (dims is not None and d != dims):
            return False
        dims = d
    (out,) = node.spec.outputs
    tensor = node.outputs.get(out.name)
    if tensor is None or tensor.dim_assigned:
        return False
    if dims != tuple(tensor._dim):
        tensor._provisional_dims(dims)
    if tensor._data_type is None:
        source = node.inputs.get(out.dtype_like) if out.dtype_like else None
        fill = source._data_type if source is not None else None
        fill = fill if fill is not None else out.fill_dtype
        if fill is not None:
            tensor._provisional_dtype(fill)
    return True


#: {OpSpec: (input ports with a rank or dtype rule and whether they are list ports,
#: whether equal input dims decide its check and inference)}
_FACTS: dict[OpSpec, tuple[tuple[tuple[PortSpec, bool], ...], bool]] = {}


def _facts(spec: OpSpec) -> tuple[tuple[tuple[PortSpec, bool], ...], bool]:
    facts = _FACTS.get(spec)
    if facts is None:
        # a port without rules cannot fail check_port_view
        ruled = tuple((p, p.kind in (PortKind.TENSOR_LIST, PortKind.MIXED_TUPLE))
                      for p in spec.input_ports if p.ranks or p.dtypes is not None)
        facts = _FACTS[spec] = (ruled, decided_by_equal_dims(spec))
    return facts


def _fill_defaults(graph: pygraph, wired: Iterable[Tensor]) -> None:
    ctx = graph.context
    for tensor in wired:
        if tensor.data_type is None:
            fill = ctx.intermediate_data_type if tensor.is_virtual else ctx.io_data_type
            if fill is not None:
                tensor._provisional_dtype(fill)
        if tensor._dim and not tensor.stride_assigned:
            strides = row_major(tensor._dim)
            if strides != tuple(tensor._stride):
                tensor._provisional_stride(strides)


def _check_node_tensors(node: Node, checked: set[int]) -> None:
    """Each tensor once per validation (`checked`: ids of tensors already checked)."""
    for direction, ports in (("input", node.inputs), ("output", node.outputs)):
        for port, tensor in ports.items():
            if id(tensor) in checked:
                continue
            checked.add(id(tensor))
            try:
                tensor.validate()
                _check_ragged(tensor)
            except ValueError as exc:
                raise ValueError(f"node '{node.name}' ({node.spec.name}), {direction} port "
                                 f"'{port}': {exc}") from None


def _check_ragged(tensor: Tensor) -> None:
    offset = tensor.ragged_offset
    if offset is None:
        return
    if offset.data_type is not None and offset.data_type not in INDEX:
        raise ValueError(f"ragged offset '{offset.name}' of tensor '{tensor.name}' must be "
                         f"INT32 or INT64, got {offset.data_type.name}")
    if offset.dim and tensor.dim:
        entries = 1
        for n in offset.dim:
            entries *= n
        if entries != tensor.dim[0] + 1:
            raise ValueError(f"ragged offset '{offset.name}' of tensor '{tensor.name}' must hold "
                             f"B + 1 = {tensor.dim[0] + 1} entries (B = dim[0]), got dims "
                             f"{list(offset.dim)}")
