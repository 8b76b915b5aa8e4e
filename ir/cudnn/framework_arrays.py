"""Describing framework arrays (torch, numpy, cupy, any DLPack producer) as IR tensors.

`describe(x)` reads dims, element strides, dtype and whether the data lives on the host,
without importing any framework: torch tensors are recognised by `stride()` and
`device.type`, numpy/cupy-style arrays by byte `strides` and `dtype.itemsize`, CUDA
array-interface producers by their interface dict. An object with only `__dlpack__` and
no shape cannot be described and is refused with a TypeError.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cudnn.graph_types import row_major
from cudnn.ops.data_types import data_type, to_data_type


@dataclass(frozen=True)
class ArrayDescription:
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    data_type: data_type | None
    on_host: bool
    numel: int


def is_framework_array(value: Any) -> bool:
    return any(hasattr(value, attr) for attr in
               ("__dlpack__", "__cuda_array_interface__", "__array_interface__"))


def describe(value: Any) -> ArrayDescription:
    shape = getattr(value, "shape", None)
    if shape is None:
        raise TypeError(f"cannot describe {type(value).__name__}: it has no shape")
    dims = tuple(int(n) for n in shape)
    numel = 1
    for n in dims:
        numel *= n
    dt = _dtype(value)
    stride_fn = getattr(value, "stride", None)
    if callable(stride_fn):  # torch: element strides
        strides = tuple(int(s) for s in stride_fn())
        device = getattr(value, "device", None)
        on_host = getattr(device, "type", "cpu") == "cpu"
    else:
        strides = _byte_strides_to_elements(value, dims)
        on_host = not hasattr(value, "__cuda_array_interface__")
    return ArrayDescription(dims, strides, dt, on_host, numel)


def _dtype(value: Any) -> data_type | None:
    raw = getattr(value, "dtype", None)
    if raw is None:
        return None
    try:
        return to_data_type(raw)
    except TypeError:
        raise TypeError(f"{type(value).__name__} has dtype {raw}, which has no "
                        "cudnn.data_type equivalent") from None


def _byte_strides_to_elements(value: Any, dims: tuple[int, ...]) -> tuple[int, ...]:
    byte_strides = getattr(value, "strides", None)
    itemsize = getattr(getattr(value, "dtype", None), "itemsize", None)
    if byte_strides is None or not itemsize:
        return row_major(dims)
    return tuple(int(s) // int(itemsize) for s in byte_strides)
