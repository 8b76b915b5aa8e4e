"""The `data_type` enum (binding values) and conversions from framework dtypes.

Owns: `data_type`, the dtype classes op specs use in their port rules
(`FLOATING`, `INTEGER`, `INDEX`), `to_data_type()` (normalises a cudnn enum, a torch
dtype, a numpy dtype or the classic NOT_SET sentinel) and `element_size()`.
torch and numpy are never imported here: their dtypes are recognised by their text
form (`torch.float16`, numpy's `.name`), so `import cudnn` stays framework-free.
"""
from __future__ import annotations

import enum
from typing import Any


class data_type(enum.IntEnum):  # noqa: N801 - public name kept from the classic API
    NOT_SET = 0
    FLOAT = 1
    DOUBLE = 2
    HALF = 3
    INT8 = 4
    INT32 = 5
    INT8x4 = 6
    UINT8 = 7
    UINT8x4 = 8
    INT8x32 = 9
    BFLOAT16 = 10
    INT64 = 11
    BOOLEAN = 12
    FP8_E4M3 = 14
    FP8_E5M2 = 15
    FAST_FLOAT_FOR_FP8 = 16
    FP8_E8M0 = 17
    FP8_E5M3 = 18
    FP4_E2M1 = 19
    INT4 = 20


_D = data_type
#: 16/32/64-bit floating types: what "a real-valued activation" means in port rules.
FLOATING = frozenset({_D.FLOAT, _D.DOUBLE, _D.HALF, _D.BFLOAT16})
#: every floating type including the 8- and 4-bit formats (quantized tensors).
ANY_FLOATING = FLOATING | frozenset(
    {_D.FP8_E4M3, _D.FP8_E5M2, _D.FP8_E8M0, _D.FP8_E5M3, _D.FP4_E2M1, _D.FAST_FLOAT_FOR_FP8})
INTEGER = frozenset({_D.INT8, _D.INT32, _D.INT64, _D.UINT8, _D.INT4})
#: offsets, sequence lengths and indices.
INDEX = frozenset({_D.INT32, _D.INT64})

# torch dtype text -> data_type. The fp8/fp4 spellings exist only in newer torch;
# matching on text means an older torch simply never produces them.
_TORCH_NAMES: dict[str, data_type] = {
    "torch.float16": _D.HALF, "torch.bfloat16": _D.BFLOAT16, "torch.float32": _D.FLOAT,
    "torch.float64": _D.DOUBLE, "torch.int8": _D.INT8, "torch.int32": _D.INT32,
    "torch.int64": _D.INT64, "torch.uint8": _D.UINT8, "torch.bool": _D.BOOLEAN,
    "torch.float8_e4m3fn": _D.FP8_E4M3, "torch.float8_e5m2": _D.FP8_E5M2,
    "torch.float8_e8m0fnu": _D.FP8_E8M0, "torch.float4_e2m1fn_x2": _D.FP4_E2M1,
}
_NUMPY_NAMES: dict[str, data_type] = {
    "float16": _D.HALF, "float32": _D.FLOAT, "float64": _D.DOUBLE, "int8": _D.INT8,
    "int32": _D.INT32, "int64": _D.INT64, "uint8": _D.UINT8, "bool": _D.BOOLEAN,
    "bfloat16": _D.BFLOAT16,
}
_BITS: dict[data_type, int] = {
    _D.FLOAT: 32, _D.DOUBLE: 64, _D.HALF: 16, _D.BFLOAT16: 16, _D.INT8: 8, _D.UINT8: 8,
    _D.INT32: 32, _D.INT64: 64, _D.BOOLEAN: 8, _D.FP8_E4M3: 8, _D.FP8_E5M2: 8,
    _D.FP8_E8M0: 8, _D.FP8_E5M3: 8, _D.FP4_E2M1: 4, _D.INT4: 4, _D.INT8x4: 32,
    _D.UINT8x4: 32, _D.INT8x32: 256, _D.FAST_FLOAT_FOR_FP8: 32,
}


def is_torch_dtype(value: Any) -> bool:
    return type(value).__module__ == "torch" and type(value).__name__ == "dtype"


def to_data_type(value: Any) -> data_type | None:
    """Normalise a dtype-like value; None and NOT_SET mean "unset" and give None.

    Raises TypeError for anything that is not a recognised dtype (the caller adds
    which op or setter asked).
    """
    if value is None:
        return None
    if isinstance(value, data_type):
        return None if value is _D.NOT_SET else value
    if isinstance(value, bool):
        raise TypeError(f"expected a cudnn.data_type or a torch dtype, got bool {value!r}")
    if is_torch_dtype(value):
        try:
            return _TORCH_NAMES[str(value)]
        except KeyError:
            raise TypeError(f"torch dtype {value} has no cudnn.data_type equivalent") from None
    numpy_name = _numpy_dtype_name(value)
    if numpy_name is not None:
        try:
            return _NUMPY_NAMES[numpy_name]
        except KeyError:
            raise TypeError(f"numpy dtype {numpy_name} has no cudnn.data_type equivalent") from None
    raise TypeError(
        f"expected a cudnn.data_type or a torch dtype, got {type(value).__name__} {value!r}")


def _numpy_dtype_name(value: Any) -> str | None:
    # numpy.dtype instances and scalar types (numpy.float32) both carry a dtype name;
    # recognised by module so that numpy itself is never imported.
    mod = type(value).__module__
    if mod.startswith("numpy") and hasattr(value, "name") and hasattr(value, "itemsize"):
        return str(value.name)
    if isinstance(value, type) and value.__module__ == "numpy":
        return value.__name__
    return None


def element_bits(dt: data_type) -> int:
    """Storage bits of one element (4 for the packed 4-bit types)."""
    try:
        return _BITS[dt]
    except KeyError:
        raise ValueError(f"data_type {dt.name} has no element size") from None


def describe(dt: data_type | None) -> str:
    return "unset" if dt is None else dt.name
