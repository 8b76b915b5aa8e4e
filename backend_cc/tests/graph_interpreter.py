"""A float64 interpreter of a recorded backend_graph (test-only), for checking on CPU what
a lowering's op graph computes, with the memory semantics cuDNN gives its descriptors.

`run(backend, feeds)` walks `backend.ops()` in order. A non-virtual input is read from its
buffer through the *descriptor's* dims and strides (so K described transposed over K's own
memory reads K^T); pass-by-value tensors carry their embedded value. Supported ops: the
pointwise add/sub/mul/exp/identity (broadcasting), matmul (batch axes broadcast, and a
smaller head axis that divides the other is shared by consecutive groups, as cuDNN's
grouped-query attention does), reduction ADD (to the output's dims: extent 1 sums an axis,
a divisor sums consecutive groups) and view-only reshape (the input laid out with its
strides, read back with the output's). Data types are ignored: everything is float64.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

import cudnn

_POINTWISE = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "exp": torch.exp,
    "identity": lambda x: x,
}


def _extent(dims: list[int], strides: list[int]) -> int:
    return 1 + sum((d - 1) * s for d, s in zip(dims, strides))


def _groups_up(x: torch.Tensor, dims: list[int], skip_last: int) -> torch.Tensor:
    """Repeat each smaller axis of `x` that divides `dims` (not the last `skip_last`)."""
    for axis in range(len(dims) - skip_last):
        have, want = x.shape[axis], dims[axis]
        if have != want and have != 1:
            assert want % have == 0, f"extent {have} does not divide {want}"
            x = x.repeat_interleave(want // have, dim=axis)
    return x


def _reduce_to(x: torch.Tensor, dims: list[int]) -> torch.Tensor:
    for axis, want in enumerate(dims):
        have = x.shape[axis]
        if have == want:
            continue
        if want == 1:
            x = x.sum(axis, keepdim=True)
        else:
            assert have % want == 0, f"reduction of extent {have} to {want}"
            x = x.unflatten(axis, (want, have // want)).sum(axis + 1)
    return x


def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    batch = [max(x, y) for x, y in zip(a.shape[:-2], b.shape[:-2])]
    a = _groups_up(a, [*batch, *a.shape[-2:]], 2)
    b = _groups_up(b, [*batch, *b.shape[-2:]], 2)
    return a @ b


def _reshape_view(x: torch.Tensor, src: Any, dst: Any) -> torch.Tensor:
    src_dims, src_strides = src.get_dim(), src.get_stride()
    dst_dims, dst_strides = dst.get_dim(), dst.get_stride()
    size = max(_extent(src_dims, src_strides), _extent(dst_dims, dst_strides))
    flat = torch.zeros(size, dtype=torch.float64)
    torch.as_strided(flat, src_dims, src_strides).copy_(x.expand(src_dims))
    return torch.as_strided(flat, dst_dims, dst_strides).clone()


def _read_input(bt: Any, feeds: Mapping[int, torch.Tensor]) -> torch.Tensor:
    dims = bt.get_dim()
    if bt.get_is_pass_by_value():
        return torch.full(dims, float(bt.get_pass_by_value()), dtype=torch.float64)
    buf = feeds[bt.get_uid()]
    # the buffer's address is its first element; the descriptor says how to walk from it
    view = torch.as_strided(buf, dims, bt.get_stride(), buf.storage_offset())
    return view.to(torch.float64)


def run(backend: Any, feeds: Mapping[int, torch.Tensor]) -> dict[int, torch.Tensor]:
    """Every tensor's value by uid after running the recorded ops on `feeds` (uid ->
    buffer for each graph input that is not pass-by-value)."""
    values: dict[int, torch.Tensor] = {}

    def value(bt: Any) -> torch.Tensor:
        uid = bt.get_uid()
        if uid not in values:
            assert bt.get_producer() is None, f"{bt!r} is read before its producer ran"
            values[uid] = _read_input(bt, feeds)
        return values[uid]

    for op in backend.ops():
        method, ins = op["method"], op["inputs"]
        (out,) = op["outputs"].values()
        dims = out.get_dim()
        args = [value(t) for t in ins.values()]
        if method in _POINTWISE:
            result = _POINTWISE[method](*args)
        elif method == "matmul":
            result = _matmul(*args)
        elif method == "reduction":
            assert op["attrs"]["mode"] == cudnn.reduction_mode.ADD.value, op["attrs"]
            result = _reduce_to(args[0], dims)
        elif method == "reshape":
            result = _reshape_view(args[0], ins["input"], out)
        else:
            raise NotImplementedError(f"graph_interpreter: no rule for {method}")
        values[out.get_uid()] = result.expand(dims).clone()  # fails unless it broadcasts
    return values
