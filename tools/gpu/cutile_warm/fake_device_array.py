"""A host tensor presented to `ct.launch` as if it lived on the GPU (no memory behind it).

cuda.tile reads a launch argument's dtype, shape, strides and data address through
DLPack and derives the kernel specialization from them (static unit dims, divisibility of
shapes, strides and the base address).  `DeviceView` exports those facts of a torch CPU
tensor in a DLPack capsule whose device is CUDA:0, so the launch path computes the same
specialization the GPU run computes for a tensor of the same layout.  The address is the
CPU tensor's: CPU and CUDA allocations are both aligned well past the 16 bytes cuTile
looks at, so views at the same element offsets share their alignment facts.
"""
from __future__ import annotations

import ctypes

_KDL_CUDA = 2
# DLPack type codes: 0 int, 1 uint, 2 float, 4 bfloat, 6 bool
_DL_DTYPES = {
    "float32": (2, 32), "float16": (2, 16), "bfloat16": (4, 16), "float64": (2, 64),
    "int32": (0, 32), "int64": (0, 64), "int16": (0, 16), "int8": (0, 8),
    "uint8": (1, 8), "bool": (6, 8),
}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


# consumers call the deleter unconditionally; the memory belongs to DeviceView
_NOOP_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda _: None)


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class DeviceView:
    """dtype / shape / strides (elements) / address of an array, exported as CUDA:0 DLPack."""

    def __init__(self, dtype: str, shape, strides, address: int):
        if dtype not in _DL_DTYPES:
            raise TypeError(f"DeviceView: unsupported dtype {dtype!r} "
                            f"(expected one of {sorted(_DL_DTYPES)})")
        if len(shape) != len(strides):
            raise ValueError(f"DeviceView: shape {tuple(shape)} and strides {tuple(strides)} "
                             "differ in rank")
        self.dtype, self.shape, self.strides = dtype, tuple(shape), tuple(strides)
        self.address = int(address)
        nd = len(self.shape)
        self._shape = (ctypes.c_int64 * max(nd, 1))(*self.shape)
        self._strides = (ctypes.c_int64 * max(nd, 1))(*self.strides)
        code, bits = _DL_DTYPES[dtype]
        self._managed = _DLManagedTensor(
            _DLTensor(ctypes.c_void_p(self.address), _DLDevice(_KDL_CUDA, 0), nd,
                      _DLDataType(code, bits, 1), self._shape, self._strides, 0), None,
            ctypes.cast(_NOOP_DELETER, ctypes.c_void_p))

    @classmethod
    def of(cls, tensor) -> "DeviceView":
        """The view of a torch tensor (any device; its memory is never read)."""
        return cls(str(tensor.dtype).removeprefix("torch."), tuple(tensor.shape),
                   tuple(tensor.stride()), tensor.data_ptr())

    def __dlpack_device__(self):
        return (_KDL_CUDA, 0)

    def __dlpack__(self, *args, **kwargs):
        # a fresh capsule each call; the structure it points to lives as long as self
        return _capsule_new(ctypes.addressof(self._managed), b"dltensor", None)

    def __repr__(self):
        return f"DeviceView({self.dtype}, shape={self.shape}, strides={self.strides})"
