"""Runs the linear-attention cuTile kernels' own source on the CPU, tile by tile, in numpy.

Why: the kernels can only be executed on a GPU, and kernel edits made on a build machine
would otherwise reach the GPU untested.  This module stands in for the subset of
`cuda.tile` the kernels use (tile-indexed loads/stores with zero padding, mma,
elementwise math, reductions, scans, extract/insert) and re-imports the kernels package
under another name with `cuda.tile` bound to the stand-in, so the host orchestration
(`chunked_fwd`, `chunked_bwd`) and every kernel body run unchanged.

Memory rules are cuTile's, enforced (on the GPU, breaking them is undefined behaviour, so
here it is an error, `OutOfBounds`): `Array.slice` needs 0 <= start < N and
start <= stop <= N along its axis; a tile load or store must overlap its array on every
axis (tile index >= 0 and starting before the end: the part past the end is padded or
dropped, a tile entirely outside is not allowed); a scalar load must index an element.
`gather` / `scatter` check their indices themselves (outside: padding / no store).

Numerics follow the GPU's rounding points: float tiles are float32; `astype` to bf16 /
fp16 rounds to nearest even, to tf32 rounds the mantissa to 10 bits (ties away, as
cvt.rna); mma multiplies the (already rounded) operands exactly and accumulates in
float64 before the float32 result; stores round to the array's dtype.  The order of
float32 additions differs from the GPU's, so results agree to rounding, not bitwise.

Use:
    with emulated_kernels() as kernels:
        kernels.fwd.chunked_fwd(...)        # CPU torch tensors, stream=0
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import itertools
import os
import sys
import types

import numpy as np

KERNELS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "cudnn", "linear_attention", "cutile", "kernels")
# a sibling of the real kernels package, so `from ..workspace import ...` resolves
EMU_PACKAGE = "cudnn.linear_attention.cutile.kernels_on_tile_emulator"


class DType:
    def __init__(self, name: str, np_dtype, is_float: bool):
        self.name, self.np_dtype, self.is_float = name, np_dtype, is_float

    def __repr__(self):
        return f"emu.{self.name}"


float32 = DType("float32", np.float32, True)
float16 = DType("float16", np.float32, True)
bfloat16 = DType("bfloat16", np.float32, True)
tfloat32 = DType("tfloat32", np.float32, True)
float64 = DType("float64", np.float64, True)
int32 = DType("int32", np.int32, False)
int64 = DType("int64", np.int64, False)
bool_ = DType("bool_", np.bool_, False)
_BY_TORCH = {"torch.float32": float32, "torch.float16": float16, "torch.bfloat16": bfloat16,
             "torch.float64": float64, "torch.int32": int32, "torch.int64": int64,
             "torch.bool": bool_}


def _dtype(d) -> DType:
    if isinstance(d, DType):
        return d
    try:
        return _BY_TORCH[str(d)]
    except KeyError:
        raise TypeError(f"tile emulator: unsupported dtype {d!r}") from None


def _round_bits(x: np.ndarray, mantissa_bits: int, ties_away: bool) -> np.ndarray:
    """float32 values rounded to `mantissa_bits` explicit mantissa bits (fp32 exponent)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    drop = 23 - mantissa_bits
    half = np.uint64(1 << (drop - 1))
    if ties_away:
        r = u + half
    else:
        lsb = (u >> np.uint64(drop)) & np.uint64(1)
        r = u + half - np.uint64(1) + lsb
    r = (r >> np.uint64(drop)) << np.uint64(drop)
    finite = np.isfinite(x)
    out = np.where(finite, r.astype(np.uint32).view(np.float32), x)
    return out.astype(np.float32)


def _round_to(x, d: DType) -> np.ndarray:
    x = np.asarray(x)
    if d is float32:
        return x.astype(np.float32)
    if d is bfloat16:
        return _round_bits(x, 7, ties_away=False)
    if d is tfloat32:
        return _round_bits(x, 10, ties_away=True)
    if d is float16:
        return x.astype(np.float16).astype(np.float32)
    if d is float64:
        return x.astype(np.float64)
    if d is bool_:
        return x.astype(np.bool_)
    return x.astype(d.np_dtype)


class RoundingMode:
    RN, RZ, RM, RP, RA, FULL, APPROX = "rn", "rz", "rm", "rp", "ra", "full", "approx"


class PaddingMode:
    ZERO = "zero"
    UNDETERMINED = "undetermined"


class Constant:
    def __class_getitem__(cls, item):
        return item


class OutOfBounds(IndexError):
    """A slice or tile access that cuTile leaves undefined (see the module docstring)."""


class _Grid:
    bid = (0, 0, 0)
    dims = (1, 1, 1)


def bid(axis):
    return _Grid.bid[axis]


def num_blocks(axis):
    return _Grid.dims[axis]


def cdiv(a, b):
    return -(-int(a) // int(b))


class Array:
    """A kernel's view of a CPU torch tensor (slices share its storage)."""

    def __init__(self, tensor):
        self.t = tensor
        self.dtype = _dtype(tensor.dtype)
        self.shape = tuple(tensor.shape)

    def slice(self, axis, start, stop):
        axis, start, stop = int(axis), int(start), int(stop)
        n = self.shape[axis]
        if not (0 <= start < n and start <= stop <= n):
            raise OutOfBounds(f"slice [{start}, {stop}) of axis {axis} of an array of shape "
                              f"{self.shape} (cuTile: 0 <= start < {n}, start <= stop <= {n})")
        return Array(self.t.narrow(axis, start, stop - start))

    def read(self, box) -> np.ndarray:
        import torch
        part = self.t[box]
        if part.dtype in (torch.bfloat16, torch.float16, torch.float32):
            return part.to(torch.float32).numpy().copy()
        return part.numpy().copy()

    def write(self, box, values: np.ndarray) -> None:
        import torch
        self.t[box] = torch.from_numpy(np.ascontiguousarray(values)).to(self.t.dtype)


def _check_tile(what, array_shape, index, shape):
    """A tile must overlap its array on every axis (cuTile: entirely outside is UB)."""
    if len(index) != len(array_shape):
        raise ValueError(f"{what}: index {tuple(index)} for a {len(array_shape)}-d array")
    for n, i, s in zip(array_shape, index, shape):
        if not 0 <= int(i) * s < n:
            raise OutOfBounds(f"{what}: tile {tuple(int(x) for x in index)} of shape "
                              f"{tuple(shape)} lies outside an array of shape "
                              f"{tuple(array_shape)}")


def _box(array_shape, index, shape):
    """Element box of tile `index` of tile `shape` (clipped) and the tile's valid sub-box."""
    src, dst = [], []
    for n, i, s in zip(array_shape, index, shape):
        lo = int(i) * s
        hi = min(lo + s, n)
        lo_c = max(lo, 0)
        src.append(slice(lo_c, max(hi, lo_c)))
        dst.append(slice(lo_c - lo, max(hi, lo_c) - lo))
    return tuple(src), tuple(dst)


def load(array, index, shape, *, padding_mode=PaddingMode.UNDETERMINED, **_):
    index = tuple(index) if isinstance(index, (tuple, list)) else (index,)
    if shape == ():
        _check_tile("load", array.shape, index, (1,) * len(array.shape))
        return np.asarray(array.read(tuple(int(i) for i in index)))
    if len(shape) != len(array.shape):
        raise ValueError(f"load: tile shape {shape} for a {len(array.shape)}-d array")
    _check_tile("load", array.shape, index, shape)
    src, dst = _box(array.shape, index, shape)
    out = np.zeros(shape, dtype=np.float32 if array.dtype.is_float else array.dtype.np_dtype)
    if padding_mode != PaddingMode.ZERO:
        out[...] = np.nan if array.dtype.is_float else 0
    if all(s.stop > s.start for s in src):
        out[dst] = array.read(src)
    return out


def store(array, index, tile, **_):
    index = tuple(index) if isinstance(index, (tuple, list)) else (index,)
    tile = np.asarray(tile)
    if tile.ndim == 0 and len(index) == len(array.shape) != 0:
        tile = tile.reshape((1,) * len(array.shape))
    if tile.ndim != len(array.shape):
        raise ValueError(f"store: tile of shape {tile.shape} into a {len(array.shape)}-d array")
    _check_tile("store", array.shape, index, tile.shape)
    src, dst = _box(array.shape, index, tile.shape)
    if all(s.stop > s.start for s in src):
        array.write(src, _round_to(tile[dst], array.dtype))


def gather(array, indices, *, mask=None, padding_value=0, **_):
    idx = np.asarray(indices)
    ok = (idx >= 0) & (idx < array.shape[0])
    if mask is not None:
        ok &= np.asarray(mask)
    data = array.read(slice(None))
    return np.where(ok, data[np.where(ok, idx, 0)], padding_value)


def astype(x, dtype, **_):
    return _round_to(x, _dtype(dtype))


def mma(a, b, acc, **_):
    prod = np.matmul(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    return (prod + np.asarray(acc, dtype=np.float64)).astype(np.asarray(acc).dtype)


def zeros(shape, dtype):
    return np.zeros(shape, dtype=_dtype(dtype).np_dtype)


def full(shape, fill_value, dtype):
    return np.full(shape, fill_value, dtype=_dtype(dtype).np_dtype)


def arange(size, *, dtype, start=0, step=1):
    return np.arange(start, start + size * step, step, dtype=_dtype(dtype).np_dtype)


def _f32(x):
    x = np.asarray(x)
    return x.astype(np.float32) if x.dtype == np.float64 else x


def exp(x, **_):
    return _f32(np.exp(_f32(x)))


def rsqrt(x):
    return _f32(1.0 / np.sqrt(_f32(x)))


def where(cond, x, y):
    out = np.where(cond, x, y)
    return _f32(out) if out.dtype.kind == "f" else out


minimum, maximum = np.minimum, np.maximum


def transpose(x, axis0=None, axis1=None):
    x = np.asarray(x)
    if axis0 is None:
        return np.swapaxes(x, -1, -2)
    return np.swapaxes(x, axis0, axis1)


def reshape(x, shape):
    return np.reshape(np.asarray(x), shape)


def expand_dims(x, axis):
    return np.expand_dims(x, axis)


def cat(tiles, axis):
    return np.concatenate(tiles, axis=axis)


def _reduce(fn, x, axis, keepdims):
    return fn(np.asarray(x), axis=axis, keepdims=keepdims)


def _ct_sum(x, axis=None, *, keepdims=False):
    x = np.asarray(x)
    return _reduce(np.sum, x, axis, keepdims).astype(x.dtype)


def _ct_max(x, axis=None, *, keepdims=False):
    return _reduce(np.max, x, axis, keepdims)


def _ct_min(x, axis=None, *, keepdims=False):
    return _reduce(np.min, x, axis, keepdims)


def scan(x, axis, func, identity, *, reverse=False):
    """Inclusive scan with a combining function of two 0-d values (one tile only)."""
    x = np.asarray(x)
    out = np.moveaxis(np.array(x, copy=True), axis, 0)
    if reverse:
        out = out[::-1]
    acc = np.full(out.shape[1:], identity, dtype=x.dtype)
    for t in range(out.shape[0]):
        acc = np.vectorize(lambda a, b: np.asarray(func(a, b)).item(), otypes=[x.dtype])(
            acc, out[t]) if acc.ndim else np.asarray(func(acc, out[t]), dtype=x.dtype)
        out[t] = acc
    if reverse:
        out = out[::-1]
    return np.moveaxis(out, 0, axis)


def cumsum(x, axis=0, *, reverse=False):
    x = np.asarray(x)
    if reverse:
        return np.flip(np.cumsum(np.flip(x, axis), axis=axis), axis).astype(x.dtype)
    return np.cumsum(x, axis=axis).astype(x.dtype)


def _block(x, index, shape):
    return tuple(slice(int(i) * s, int(i) * s + s) for i, s in zip(index, shape))


def extract(x, index, shape):
    return np.asarray(x)[_block(x, index, shape)].copy()


def insert(x, index, value):
    out = np.array(x, copy=True)
    value = np.asarray(value)
    out[_block(out, index, value.shape)] = value
    return out


def static_iter(it):
    return it


class _Kernel:
    def __init__(self, fn, hints):
        self.fn, self.hints = fn, hints
        self.__name__ = fn.__name__

    def replace_hints(self, **hints):
        return _Kernel(self.fn, {**self.hints, **hints})


def kernel(function=None, **hints):
    if function is None:
        return lambda f: _Kernel(f, hints)
    return _Kernel(function, hints)


launches: list[tuple[str, tuple]] = []


def launch(stream, grid, kern, args):
    import torch
    launches.append((kern.__name__, tuple(grid)))
    wrapped = [Array(a) if isinstance(a, torch.Tensor) else a for a in args]
    grid = tuple(grid) + (1,) * (3 - len(grid))
    _Grid.dims = grid
    for b in itertools.product(*(range(g) for g in grid)):
        _Grid.bid = b
        kern.fn(*wrapped)


def _stand_in() -> types.ModuleType:
    mod = types.ModuleType("cuda.tile")
    for name, value in globals().items():
        if not name.startswith("__"):
            setattr(mod, name, value)
    mod.sum, mod.max, mod.min = _ct_sum, _ct_max, _ct_min
    return mod


_loaded: types.ModuleType | None = None


def _load_package() -> types.ModuleType:
    """The kernels package imported under EMU_PACKAGE with cuda.tile = the stand-in."""
    global _loaded
    if _loaded is not None:
        return _loaded
    importlib.import_module(EMU_PACKAGE.rsplit(".", 1)[0])
    spec = importlib.util.spec_from_file_location(
        EMU_PACKAGE, os.path.join(KERNELS_DIR, "__init__.py"),
        submodule_search_locations=[KERNELS_DIR])
    pkg = importlib.util.module_from_spec(spec)
    sys.modules[EMU_PACKAGE] = pkg
    spec.loader.exec_module(pkg)
    with _bound():
        for fname in sorted(os.listdir(KERNELS_DIR)):
            if fname.endswith(".py") and fname != "__init__.py":
                mod = importlib.import_module(f"{EMU_PACKAGE}.{fname[:-3]}")
                setattr(pkg, fname[:-3], mod)
    _loaded = pkg
    return pkg


@contextlib.contextmanager
def _bound():
    saved = {k: sys.modules.get(k) for k in ("cuda", "cuda.tile")}
    cuda_mod = types.ModuleType("cuda")
    stand_in = _stand_in()
    cuda_mod.tile = stand_in
    sys.modules["cuda"], sys.modules["cuda.tile"] = cuda_mod, stand_in
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


@contextlib.contextmanager
def emulated_kernels():
    """The kernels package on the emulator; host functions import cuda.tile lazily, so the
    stand-in stays bound for the duration of the block."""
    pkg = _load_package()
    launches.clear()
    with _bound():
        yield pkg
