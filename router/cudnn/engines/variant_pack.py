"""From `graph.execute(...)` arguments to what a compiled plan receives.

- `normalize_variant_pack`: the caller's `tensor_dict` (keys: Tensor, uid, unique tensor
  name, or any object with `get_uid()`; `None` keys skipped) or the ordered form
  (`tensor_dict` a list of buffers, `tensor_uids` the matching distinct uids) becomes
  `{uid: buffer}`, starting from the graph's auto-bindings (framework tensors passed to
  builders); caller keys win.
- `make_context`: the ExecutionContext of one call. The stream comes from the handle
  (`handle.stream`, or `handle.get_stream()`); a handle exposing neither is an error,
  never a silent fallback to the default stream. No handle: the graph's own handle,
  else stream None (the framework's default stream).
- `check_workspace`: a plan that needs N bytes gets a workspace of at least N bytes
  (when the buffer's size can be read; raw addresses are taken on trust).
"""
from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cudnn.engines.base import ExecutionContext
from cudnn.graph_types import Tensor

if TYPE_CHECKING:
    from cudnn import pygraph


def normalize_variant_pack(graph: pygraph, tensor_dict: Any,
                           tensor_uids: Sequence[int] | None = None) -> dict[int, Any]:
    pack = dict(graph.auto_bindings())
    for key, value in _items(tensor_dict, tensor_uids):
        if key is None:
            continue
        pack[_uid_of(graph, key)] = value
    return pack


def _items(tensor_dict: Any, tensor_uids: Sequence[int] | None) -> list[tuple[Any, Any]]:
    if tensor_uids is not None:
        if not isinstance(tensor_dict, (list, tuple)):
            raise TypeError("execute: with tensor_uids, tensor_dict must be a list or tuple "
                            f"of buffers, got {type(tensor_dict).__name__}")
        uids = list(tensor_uids)
        if len(uids) != len(tensor_dict):
            raise ValueError(f"execute: {len(tensor_dict)} buffers but {len(uids)} "
                             "tensor_uids")
        if len(set(uids)) != len(uids):
            raise ValueError(f"execute: tensor_uids holds duplicates: {uids}")
        return list(zip(uids, tensor_dict))
    if tensor_dict is None:
        return []
    if not isinstance(tensor_dict, Mapping):
        raise TypeError("execute: tensor_dict must be a dict {Tensor | uid | name: buffer}, "
                        f"got {type(tensor_dict).__name__}")
    return list(tensor_dict.items())


def _uid_of(graph: pygraph, key: Any) -> int:
    if isinstance(key, Tensor):
        if key.owner is not graph:
            raise ValueError(f"variant pack key: tensor '{key.name}' (uid {key.uid}) belongs "
                             "to another graph")
        return key.uid
    if isinstance(key, str):
        found = graph.find_tensor(key)  # ValueError when ambiguous
        if found is None:
            raise KeyError(f"variant pack key: no tensor named '{key}' in this graph")
        return found.uid
    if isinstance(key, numbers.Integral) and not isinstance(key, bool):
        if graph.find_tensor(int(key)) is None:
            raise KeyError(f"variant pack key: no tensor with uid {int(key)} in this graph")
        return int(key)
    get_uid = getattr(key, "get_uid", None)
    if callable(get_uid):
        return _uid_of(graph, int(get_uid()))
    raise TypeError(f"variant pack key {key!r}: expected a Tensor, a uid, a tensor name or "
                    "an object with get_uid()")


def resolve_stream(handle: Any) -> Any:
    if handle is None:
        return None
    get_stream = getattr(handle, "get_stream", None)
    if callable(get_stream):
        return get_stream()
    if hasattr(handle, "stream"):
        return handle.stream
    raise TypeError(f"cannot read the stream of handle {handle!r}: a handle must expose "
                    "get_stream() or .stream")


def make_context(graph: pygraph, handle: Any = None, workspace: Any = None,
                 override_uids: Any = None, override_shapes: Any = None,
                 override_strides: Any = None) -> ExecutionContext:
    handle = graph.handle if handle is None else handle
    ctx = ExecutionContext(handle=handle, stream=resolve_stream(handle), workspace=workspace,
                           override_uids=override_uids, override_shapes=override_shapes,
                           override_strides=override_strides)
    for uid in ctx.override_uids or ():
        if graph.find_tensor(uid) is None:
            raise ValueError(f"override_uids: no tensor with uid {uid} in this graph")
    return ctx


def buffer_bytes(buf: Any) -> int | None:
    """Size of a buffer in bytes, or None when it cannot be read (raw address, ...)."""
    if buf is None:
        return 0
    numel, element_size = getattr(buf, "numel", None), getattr(buf, "element_size", None)
    if callable(numel) and callable(element_size):  # torch
        return int(numel()) * int(element_size())
    nbytes = getattr(buf, "nbytes", None)
    if isinstance(nbytes, numbers.Integral):
        return int(nbytes)
    cai = getattr(buf, "__cuda_array_interface__", None)
    if isinstance(cai, Mapping) and "shape" in cai and "typestr" in cai:
        count = 1
        for n in cai["shape"]:
            count *= int(n)
        return count * int(str(cai["typestr"])[2:])
    return None


def check_workspace(plan_name: str, needed: int, workspace: Any) -> None:
    if needed <= 0:
        return
    if workspace is None:
        raise ValueError(f"plan '{plan_name}' needs {needed} bytes of workspace but execute() "
                         "got none (size it with graph.get_workspace_size())")
    have = buffer_bytes(workspace)
    if have is not None and have < needed:
        raise ValueError(f"plan '{plan_name}' needs {needed} bytes of workspace; the one "
                         f"passed holds {have} bytes")
