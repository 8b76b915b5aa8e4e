"""Runs the Python source of a SIMT CuTe DSL kernel on the CPU (test-only).

The FROST v0 kernel (kernels/fwd_v0.py) uses only scalar CuTe DSL: shared-memory tensors,
element indexing, ``cutlass.range`` loops, ``const_expr`` branches, ``thread_idx`` /
``block_idx``, ``sync_threads`` and ``cute.math.exp/rsqrt``. That subset has an obvious
CPU meaning, so this module re-executes the kernel's own functions (the originals that
``@cute.jit`` / ``@cute.kernel`` wrap) with their module globals replaced by a small
shim: one Python thread per CUDA thread of a CTA, a ``threading.Barrier`` for
``sync_threads``, numpy arrays for global and shared memory, float64 arithmetic, and the
kernel's own dtype conversions (``.to(BFloat16)`` rounds) at stores. Indexing, loop
bounds, const_expr specialisation, head mapping and the launch grid are exactly the
kernel's, which is what a GPU-less test can check; float rounding is not (the kernel
computes in fp32). Anything outside the subset raises AttributeError naming it.

``emulate_class(cls, overrides)`` returns a class whose instances behave like ``cls``
(same ``__init__``, ``__call__`` launcher, kernel and helpers); ``overrides`` replaces
module constants (for example a smaller CHUNK so short sequences span several chunks).
"""
from __future__ import annotations

import math
import threading
import types

import numpy as np
import torch

_ctx = threading.local()  # per emulated CUDA thread: tid, block, barrier, smem


def _dtype_name(t) -> str:
    return getattr(t, "__name__", str(t))


def _convert(x: float, dtype) -> "Val":
    """The value as the kernel's .to(dtype) leaves it (rounded for 16-bit floats)."""
    name = _dtype_name(dtype)
    if name in ("BFloat16", "Float16"):
        td = torch.bfloat16 if name == "BFloat16" else torch.float16
        return Val(torch.tensor(float(x), dtype=torch.float64).to(td).item())
    if name == "Float32":
        return Val(float(np.float32(x)))
    if name == "Int32":
        return Val(int(x))
    raise AttributeError(f"simt_emulator: no conversion to {name}")


class Val(float):
    """A scalar register: float arithmetic that keeps the type, plus the DSL's .to()."""

    def to(self, dtype):
        return _convert(self, dtype)

    def _wrap(op):
        def f(self, other):
            return Val(op(float(self), float(other)))
        return f

    __add__ = _wrap(lambda a, b: a + b)
    __radd__ = _wrap(lambda a, b: b + a)
    __sub__ = _wrap(lambda a, b: a - b)
    __rsub__ = _wrap(lambda a, b: b - a)
    __mul__ = _wrap(lambda a, b: a * b)
    __rmul__ = _wrap(lambda a, b: b * a)
    __truediv__ = _wrap(lambda a, b: a / b)

    def __neg__(self):
        return Val(-float(self))


def _index(i):
    if isinstance(i, float):
        if not float(i).is_integer():
            raise IndexError(f"simt_emulator: non-integer index {i}")
        return int(i)
    return i


class Layout:
    def __init__(self, shape, stride=None):
        self.shape = tuple(shape) if isinstance(shape, tuple) else (shape,)
        self.stride = stride


class Tensor:
    """Global or shared memory: a numpy array of the view's shape, bounds-checked indexing."""

    def __init__(self, array: np.ndarray, element_type):
        self.array = array
        self.element_type = element_type

    def _key(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        if len(idx) != self.array.ndim:
            raise IndexError(f"simt_emulator: {len(idx)} indices into a rank-{self.array.ndim} tensor")
        key = tuple(_index(i) for i in idx)
        for i, extent in zip(key, self.array.shape):
            if not 0 <= i < extent:  # the GPU would read or write out of bounds
                raise IndexError(f"simt_emulator: index {key} outside shape {self.array.shape}")
        return key

    def __getitem__(self, idx):
        x = self.array[self._key(idx)]
        return int(x) if self.array.dtype.kind == "i" else Val(float(x))

    def __setitem__(self, idx, value):
        self.array[self._key(idx)] = value


class _SmemAllocator:
    """Each thread allocates the same sequence of tensors: the i-th allocation of every
    thread of a CTA is the CTA's one i-th buffer."""

    def __init__(self):
        self.count = 0

    def allocate_tensor(self, element_type, layout, byte_alignment=0):
        bufs = _ctx.smem
        with _ctx.smem_lock:
            if self.count == len(bufs):  # NaN-filled: reading before writing shows up
                bufs.append(Tensor(np.full(layout.shape, np.nan), element_type))
        buf = bufs[self.count]
        if buf.array.shape != layout.shape:
            raise RuntimeError("simt_emulator: threads allocated shared memory differently")
        self.count += 1
        return buf


def _range(start, stop=None, step=1):
    if stop is None:
        start, stop = 0, start
    return range(int(start), int(stop), int(step))


def _fail(name):
    def f(*_, **__):
        raise AttributeError(f"simt_emulator: {name} is outside the emulated SIMT subset")
    return f


class _Namespace(types.SimpleNamespace):
    def __getattr__(self, name):  # only reached for names the shim lacks
        return _fail(name)


class _DType:
    """A shim scalar type: a constructor (Float32(0.0)) that is also a .to() target."""

    def __init__(self, name):
        self.__name__ = name

    def __call__(self, x=0):
        return _convert(x, self)


class _NullTensor:
    element_type = None

    def __getitem__(self, idx):
        raise IndexError("simt_emulator: the kernel dereferenced an absent (null) operand")

    __setitem__ = __getitem__


def _make_tensor(ptr, layout):
    if ptr.array is None:
        return _NullTensor()
    return Tensor(ptr.array.reshape(layout.shape), ptr.element_type)


def _shim():
    float32, int32 = _DType("Float32"), _DType("Int32")
    cutlass = _Namespace(
        range=_range, range_constexpr=_range, const_expr=bool, Float32=float32, Int32=int32,
        memory=_Namespace(SmemAllocator=_SmemAllocator),
    )
    arch = _Namespace(
        thread_idx=lambda: (_ctx.tid, 0, 0), block_idx=lambda: _ctx.block,
        sync_threads=lambda: _ctx.barrier.wait(),
    )
    cute = _Namespace(
        make_layout=Layout, make_tensor=_make_tensor, arch=arch, Tensor=object, Pointer=object,
        math=_Namespace(exp=lambda x: Val(math.exp(x)), rsqrt=lambda x: Val(1.0 / math.sqrt(x))),
    )
    return {"cutlass": cutlass, "cute": cute, "Float32": float32, "Int32": int32}


def _rebind_module(module, shim: dict) -> dict:
    """The module's globals with the shim applied and its own functions re-created over
    them (so they call each other's emulated versions)."""
    g = dict(vars(module))
    g.update(shim)
    for name, fn in vars(module).items():
        fn = getattr(fn, "__wrapped__", fn)
        if isinstance(fn, types.FunctionType) and fn.__module__ == module.__name__:
            g[name] = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    return g


class Pointer:
    """What the emulated launcher receives instead of a device pointer: the flat array."""

    def __init__(self, array: np.ndarray | None, element_type):
        self.array = None if array is None else array.reshape(-1)
        self.element_type = element_type


class _Launch:
    def __init__(self, owner, body, args):
        self.owner, self.body, self.args = owner, body, args

    def launch(self, grid, block, stream=None, **_):
        nthreads = int(block[0]) * int(block[1]) * int(block[2])
        if (block[1], block[2]) != (1, 1):
            raise AttributeError("simt_emulator: only 1-D thread blocks")
        for bz in range(int(grid[2])):
            for by in range(int(grid[1])):
                for bx in range(int(grid[0])):
                    self._run_cta((bx, by, bz), nthreads)

    def _run_cta(self, block, nthreads):
        barrier = threading.Barrier(nthreads)
        smem, lock, errors = [], threading.Lock(), []

        def thread(tid):
            _ctx.tid, _ctx.block, _ctx.barrier, _ctx.smem, _ctx.smem_lock = tid, block, barrier, smem, lock
            try:
                self.body(self.owner, *self.args)
            except threading.BrokenBarrierError:
                pass
            except BaseException as e:  # noqa: BLE001 - reported after the CTA ends
                errors.append(e)
                barrier.abort()

        threads = [threading.Thread(target=thread, args=(t,)) for t in range(nthreads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]


def emulate_class(cls, module_overrides: dict | None = None, helper_modules=()):
    """A CPU twin of a CuTe DSL kernel class (see the module docstring). helper_modules:
    modules whose functions the kernel module imported (e.g. gmem_views for
    operand_views): their emulated versions replace the imported names."""
    import sys

    shim = _shim()
    kernel_globals = _rebind_module(sys.modules[cls.__module__], shim)
    for module in helper_modules:
        helpers = _rebind_module(module, shim)
        for name, value in list(kernel_globals.items()):
            if isinstance(value, types.FunctionType) and value.__module__ == module.__name__:
                kernel_globals[name] = helpers[name]
    kernel_globals.update(module_overrides or {})
    members = {}
    for name, fn in vars(cls).items():
        fn = getattr(fn, "__wrapped__", fn)
        if isinstance(fn, types.FunctionType):
            members[name] = types.FunctionType(fn.__code__, kernel_globals, fn.__name__, fn.__defaults__,
                                               fn.__closure__)
    body = members.pop("kernel")
    members["kernel"] = lambda self, *args: _Launch(self, body, args)
    return type(cls.__name__ + "Emulated", (), members)
