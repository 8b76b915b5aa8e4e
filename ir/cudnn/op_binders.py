"""One-pass builders: a function generated per OpSpec for the common builder call.

The common call gives every single-tensor input port a Tensor of this graph (or None
for an optional port), no out_dims and no unknown keyword. For it, `binder(spec)`
returns a function written for that spec alone (its ports and attrs unrolled, the
constants it reads bound as globals) that makes the node `op_builder`'s general path
makes, with the same checks in the same order:
- the port rules (rank, dtype) of ports that have any; the attrs' `normalize`;
  `compute_data_type` through `normalize_dtype`;
- the spec's check and shape inference on an OpCall, except where their answer is
  known: for a spec `rules.decided_by_equal_dims` accepts, a call whose ports all have
  the same known dims passes the check and its output has those dims;
- then, all at once: the node name, the output tensors (row-major provisional strides,
  uids counted up as `UidTable` counts them), the node and the graph's name, producer
  and reader indexes.
Any other call, and every call that would fail a port rule, returns `GENERAL`: the
general path then builds or reports it. A bad compute dtype or attr and a failed check
raise here, the general path's errors in its order. Nothing touches the graph before the
commit and nothing in the commit raises, so a failed call leaves the graph as it was.
ir/tests/builder_path_test.py compares the graphs both paths build.

Specs with list, tuple, tensor-or-scalar or out-direction ports have no binder
(`binder` returns None).
"""
from __future__ import annotations

import linecache
import weakref
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from cudnn.graph_context import normalize_dtype
from cudnn.graph_types import _ROW_MAJOR, Tensor, _NewTensor, normalize_dims, row_major
from cudnn.nodes import _NewNode, Node
from cudnn.ops.op_spec import (Direction, OpCall, OpSpec, PortKind, PortSpec, PortView,
                               ReturnStyle)
from cudnn.ops.rules import decided_by_equal_dims

#: what a binder returns for a call it leaves to the general path.
GENERAL = object()

Binder = Callable[[Any, Mapping[str, Any]], Any]


def binder(spec: OpSpec) -> Binder | None:
    """The generated one-pass builder of `spec`, or None when it has other port kinds."""
    ports = spec.ports
    if not ports or any(p.kind is not PortKind.TENSOR or p.direction is not Direction.IN
                        for p in ports):
        return None
    source, constants = _source(spec)
    filename = f"<one-pass builder of {spec.name}>"
    # tracebacks and profilers show the generated lines
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = dict(_RUNTIME, **constants)
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - our own template
    return namespace["bind"]


def _view(dim: tuple[int, ...], data_type: Any) -> PortView:
    """`PortView(dim, data_type)` without the frozen dataclass's per-field guard."""
    view = object.__new__(PortView)
    view.__dict__.update(dim=dim, data_type=data_type)
    return view


_RUNTIME: dict[str, Any] = {
    "GENERAL": GENERAL, "Tensor": Tensor, "NewTensor": _NewTensor, "Node": Node,
    "NewNode": _NewNode, "view": _view, "OpCall": OpCall, "new": object.__new__,
    "proxy": MappingProxyType, "ref": weakref.ref, "ROW_MAJOR": _ROW_MAJOR,
    "row_major": row_major, "normalize_dims": normalize_dims, "normalize_dtype": normalize_dtype,
    "NO_LISTS": MappingProxyType({}), "NO_OUT_PORTS": frozenset(),
}


def _source(spec: OpSpec) -> tuple[str, dict[str, Any]]:
    op = spec.name
    constants: dict[str, Any] = {"SPEC": spec, "OP": op, "WHAT": f"add a '{op}' node",
                                 "PREFIX": f"{op}."}
    lines = [
        "def bind(graph, args):",
        "    if args.get('unexpected') or args.get('out_dims') is not None:",
        "        return GENERAL",
        "    lifecycle = graph._lifecycle",
        "    if not lifecycle._state.mutable:",
        "        return GENERAL",
        "    name = args.get('name') or ''",
        "    if type(name) is not str or (name and name in graph._node_names):",
        "        return GENERAL",
    ]
    # -- ports: v<i> the tensor (None when not wired), d<i> its dims, t<i> its dtype
    for i, port in enumerate(spec.ports):
        constants[f"P{i}"] = port
        ruled = bool(port.ranks) or port.dtypes is not None
        lines.append(f"    v{i} = args.get({port.name!r})")
        if port.required:
            pad = "    "
        else:
            lines += [f"    d{i} = t{i} = None", f"    if v{i} is not None:"]
            pad = "        "
        lines += [
            f"{pad}if type(v{i}) is not Tensor:",
            f"{pad}    return GENERAL",
            f"{pad}r = v{i}._owner",
            f"{pad}if r is None or r() is not graph:",
            f"{pad}    return GENERAL",
            f"{pad}d{i} = v{i}._dim",
            f"{pad}if type(d{i}) is not tuple:",
            f"{pad}    d{i} = tuple(d{i})",
            f"{pad}t{i} = v{i}._data_type",
        ]
        if ruled:
            lines += [f"{pad}w{i} = view(d{i}, t{i})",
                      f"{pad}if P{i}.rank_mismatch(w{i}) or P{i}.dtype_mismatch(w{i}):",
                      f"{pad}    return GENERAL"]
    # -- compute dtype, then attrs (the general path's order)
    lines += [
        "    cdt = args.get('compute_data_type')",
        "    cdt = graph._context._compute if cdt is None else "
        "normalize_dtype(cdt, OP, 'compute_data_type')",
        "    params = {}",
    ]
    for j, attr in enumerate(spec.attrs):
        constants[f"A{j}"] = attr
        lines += [f"    a = args.get({attr.name!r})"]
        if attr.required:
            lines += ["    if a is None:", "        return GENERAL"]
            lines += [f"    params[{attr.name!r}] = A{j}.normalize(OP, a)"]
        else:
            lines += ["    if a is not None:",
                      f"        params[{attr.name!r}] = A{j}.normalize(OP, a)"]
    # -- check and inference: o<k> the output's dims (None: unknown), p<k> its presence
    generic = _generic_rules(spec, constants)
    if decided_by_equal_dims(spec):
        same = " and ".join(f"d0 == d{i}" for i in range(1, len(spec.ports)))
        lines += [f"    if d0{' and ' + same if same else ''}:", "        o0 = d0", "    else:"]
        lines += ["    " + line for line in generic]
    else:
        lines += generic
    # -- commit: nothing below raises
    lines += [
        "    lifecycle.check_mutable(WHAT)",
        "    if not name:",
        "        counters = graph._op_counters",
        "        taken = graph._node_names",
        "        k = counters.get(OP, 0)",
        "        name = PREFIX + str(k)",
        "        while name in taken:  # a caller-chosen name took this one",
        "            k += 1",
        "            name = PREFIX + str(k)",
        "        counters[OP] = k + 1",
        "    owner = ref(graph)",
        "    uids = graph._uids",
        "    holders = uids._holders",
        "    fresh = uids._next",
        "    tensors = graph._tensors",
        "    outputs = {}",
    ]
    for k, out in enumerate(spec.outputs):
        present = out.present is not None
        pad = "        " if present else "    "
        if present:
            lines.append(f"    x{k} = None")
            lines.append(f"    if p{k}:")
        lines += [
            f"{pad}s = () if not o{k} else ROW_MAJOR.get(o{k})",
            f"{pad}if s is None:",
            f"{pad}    s = ROW_MAJOR[o{k}] = row_major(o{k})",
            f"{pad}    if len(ROW_MAJOR) > 4096:",
            f"{pad}        ROW_MAJOR.clear()",
            f"{pad}x = NewTensor()",
            f"{pad}x._owner = owner",
            f"{pad}x._name = name + {'::' + out.tensor_suffix!r}",
            f"{pad}x._dim = o{k} or ()",
            f"{pad}x._stride = s",
            f"{pad}x._is_virtual = True",
            f"{pad}x._is_pass_by_value = x._uid_assigned = x._dim_assigned = False",
            f"{pad}x._stride_assigned = x._frozen = False",
            f"{pad}x._pass_by_value = x._reordering_type = x._ragged_offset = None",
            f"{pad}x._scalar_type = None",
            f"{pad}x._ragged_offset_multiplier = x._alignment_value = 1",
        ]
        if out.dtype_like is not None:
            source = _port_index(spec, out.dtype_like)
            lines += [f"{pad}x._data_type = {'None' if source is None else f't{source}'}",
                      f"{pad}x._dtype_provisional = x._data_type is not None"]
        else:
            lines += [f"{pad}x._data_type = None", f"{pad}x._dtype_provisional = False"]
        lines += [
            f"{pad}while fresh in holders:",
            f"{pad}    fresh += 1",
            f"{pad}x._uid = fresh",
            f"{pad}holders[fresh] = x",
            f"{pad}fresh += 1",
            f"{pad}x.__class__ = Tensor",
            f"{pad}tensors.append(x)",
            f"{pad}outputs[{out.name!r}] = x{k} = x",
        ]
    lines.append("    uids._next = fresh")
    required = all(p.required for p in spec.ports)
    if required:
        lines.append("    inputs = {" + ", ".join(f"{p.name!r}: v{i}"
                                                  for i, p in enumerate(spec.ports)) + "}")
    else:
        lines.append("    inputs = {}")
        for i, p in enumerate(spec.ports):
            lines += [f"    if v{i} is not None:", f"        inputs[{p.name!r}] = v{i}"]
    lines += [
        "    node = NewNode()",
        "    node._name = name",
        "    node._spec = SPEC",
        "    node._inputs = proxy(inputs)",
        "    node._outputs = proxy(outputs)",
        "    node._params = proxy(params)",
        "    node._compute_data_type = cdt",
        "    node._owner = owner",
        "    node.__class__ = Node",
        "    graph._nodes.append(node)",
        "    graph._node_names[name] = node",
        "    producers = graph._producers",
    ]
    for k, out in enumerate(spec.outputs):
        lines += ([f"    if x{k} is not None:", f"        producers[x{k}] = node"]
                  if out.present is not None else [f"    producers[x{k}] = node"])
    lines.append("    readers = graph._readers")
    for i, p in enumerate(spec.ports):
        lines += ([f"    readers.setdefault(v{i}, node)"] if p.required else
                  [f"    if v{i} is not None:", f"        readers.setdefault(v{i}, node)"])
    if spec.returns is ReturnStyle.SINGLE:
        lines.append("    return x0")
    else:
        lines.append("    return [" + ", ".join(f"x{k}" for k in range(len(spec.outputs))) + "]")
    return "\n".join(lines) + "\n", constants


def _generic_rules(spec: OpSpec, constants: dict[str, Any]) -> list[str]:
    """The check and inference through an OpCall, as the general path runs them."""
    def made(i: int, port: PortSpec) -> str:
        return f"w{i}" if port.ranks or port.dtypes is not None else f"view(d{i}, t{i})"
    views = ", ".join(f"{p.name!r}: {made(i, p)}" for i, p in enumerate(spec.ports)
                      if p.required)
    lines = [f"    views = {{{views}}}"]
    for i, p in enumerate(spec.ports):
        if not p.required:
            lines += [f"    if v{i} is not None:", f"        views[{p.name!r}] = {made(i, p)}"]
    lines += [
        "    call = new(OpCall)",
        "    call.__dict__.update(spec=SPEC, inputs=views, params=params, lists=NO_LISTS,",
        "                         outputs={}, out_ports=NO_OUT_PORTS)",
    ]
    if spec.check is not None:
        constants["CHECK"] = spec.check
        lines.append("    CHECK(call)")
    # inference and dtypes read caller values: all of it runs before the commit
    for k, out in enumerate(spec.outputs):
        pad = "    "
        if out.present is not None:
            constants[f"PRESENT{k}"] = out.present
            lines += [f"    o{k} = None", f"    p{k} = PRESENT{k}(call)", f"    if p{k}:"]
            pad = "        "
        if out.infer is None:
            lines.append(f"{pad}o{k} = None")
            continue
        constants[f"INFER{k}"] = out.infer
        where = f"dims of output '{out.name}'"
        lines += [
            f"{pad}o{k} = INFER{k}(call)",
            f"{pad}if o{k} is not None:",
            f"{pad}    o{k} = normalize_dims(o{k} if type(o{k}) is tuple else tuple(o{k}), "
            f"OP, {where!r})",
        ]
    return lines


def _port_index(spec: OpSpec, name: str) -> int | None:
    for i, p in enumerate(spec.ports):
        if p.name == name:
            return i
    return None


__all__ = ["GENERAL", "Binder", "binder"]
