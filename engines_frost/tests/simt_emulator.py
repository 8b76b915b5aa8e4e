"""Runs the Python source of SIMT CuTe DSL kernel code on the CPU (test-only).

The FROST SIMT oracle (frost_fwd_oracle.py) and the non-MMA stages of fwd_mma / fwd_pipelined (row staging,
rows, operands) use a small scalar subset of the CuTe DSL: shared-memory tensors,
element and row indexing, ``local_tile`` of a row or a 2-D tensor, register vectors, ``autovec_copy`` /
``copy`` (cp.async), re-typed views, ``cutlass.range`` loops, ``const_expr`` branches,
``cutlass.min`` / ``max``, ``thread_idx`` / ``block_idx`` / ``grid_dim``, ``sync_threads`` /
``sync_warp``, warp shuffles (butterfly, up, down, from a source lane) and reductions, exp / rsqrt /
log1p / reciprocal, L1 prefetches (their address checked, nothing else). That subset has an
obvious CPU meaning, so this module re-executes
the kernels' own functions (the originals that ``@cute.jit`` / ``@cute.kernel`` wrap) with
their module globals replaced by a shim: one Python thread per CUDA thread of a CTA, a
barrier (``_Barrier``) per CTA (``sync_threads``) and per warp (``sync_warp`` and the
exchange behind shuffles and reductions), numpy arrays for global, shared and register
memory (shared memory starts as NaN, every access is bounds-checked), float64 arithmetic
and the kernel's own ``.to()`` roundings. cp.async copies land at once (the commit/wait
calls are no-ops). Indexing, loop bounds, const_expr specialisation, head mapping and
the launch grid are exactly the kernel's, which is what a GPU-less test can check; float
rounding of fp32 arithmetic and the asynchrony of copies are not. Anything outside the
subset raises AttributeError naming it (MMA code cannot run here).

``emulate_class(cls, overrides, helper_modules)`` returns a subclass of ``cls`` whose
methods (its own and its bases') run on the shim; ``overrides`` replaces module constants
(e.g. a smaller CHUNK). ``kernel(...).launch(grid, block)`` runs the kernel over the grid;
``run_cta(fn, nthreads, *args)`` runs any function as one CTA (``thread_index()`` inside).
"""
from __future__ import annotations

import importlib.util
import math
import sys
import threading
import types

import numpy as np
import torch

_ctx = threading.local()  # per emulated CUDA thread: tid, block, barriers, smem, warp exchanges


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


def rounded(a, dtype: torch.dtype) -> np.ndarray:
    """An array's values as a kernel holds them in `dtype` (a torch dtype), back in float64:
    test inputs exact in their operand dtypes, and expected values after a kernel's .to()."""
    return torch.from_numpy(np.ascontiguousarray(a)).to(dtype).to(torch.float64).numpy()


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
    if i is None:
        return slice(None)
    if isinstance(i, float):
        if not float(i).is_integer():
            raise IndexError(f"simt_emulator: non-integer index {i}")
        return int(i)
    return int(i)


class Layout:
    def __init__(self, shape, stride=None):
        self.shape = tuple(shape) if isinstance(shape, tuple) else (shape,)
        self.stride = stride


class _Iter:
    """A tensor's iterator: its storage and element type (recast_ptr changes the type).
    Adding an element offset is bounds-checked against the tensor it came from (a
    prefetch address must name an element of that view); llvm_ptr is the iterator."""

    def __init__(self, array, element_type, offset=0):
        self.array, self.element_type, self.offset = array, element_type, offset

    def __add__(self, n):
        offset = self.offset + int(n)
        if not 0 <= offset < self.array.size:
            raise IndexError(f"simt_emulator: pointer offset {offset} outside a view of "
                             f"{self.array.size} elements")
        return _Iter(self.array, self.element_type, offset)

    @property
    def llvm_ptr(self):
        return self


def _prefetch(ptr, **_):
    """A cache hint: no effect, but the address must lie inside an operand."""
    if not isinstance(ptr, _Iter) or ptr.array is None:
        raise IndexError("simt_emulator: prefetch of an address outside every operand")


class Tensor:
    """Global, shared or register memory: a numpy view of the tensor's shape. Indexing with
    integers reads/writes an element (bounds-checked); None in an index takes the whole
    mode and returns a view."""

    def __init__(self, array: np.ndarray, element_type):
        self.array = array
        self.element_type = element_type

    @property
    def shape(self):
        return self.array.shape

    @property
    def layout(self):
        return Layout(self.array.shape)

    @property
    def iterator(self):
        return _Iter(self.array, self.element_type)

    def _key(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        if len(idx) != self.array.ndim:
            raise IndexError(f"simt_emulator: {len(idx)} indices into a rank-{self.array.ndim} tensor")
        key = tuple(_index(i) for i in idx)
        for i, extent in zip(key, self.array.shape):
            if not isinstance(i, slice) and not 0 <= i < extent:  # out of bounds on the GPU
                raise IndexError(f"simt_emulator: index {key} outside shape {self.array.shape}")
        return key

    def __getitem__(self, idx):
        key = self._key(idx)
        if any(isinstance(i, slice) for i in key):
            return Tensor(self.array[key], self.element_type)
        x = self.array[key]
        return int(x) if self.array.dtype.kind == "i" else Val(float(x))

    def __setitem__(self, idx, value):
        self.array[self._key(idx)] = value

    def fill(self, value):
        self.array[...] = value


class _NullTensor:
    element_type = None

    def __getitem__(self, idx):
        raise IndexError("simt_emulator: the kernel dereferenced an absent (null) operand")

    __setitem__ = __getitem__


class Pointer:
    """What an emulated launcher receives instead of a device pointer: the flat array."""

    def __init__(self, array: np.ndarray | None, element_type):
        self.array = None if array is None else array.reshape(-1)
        self.element_type = element_type


def _make_tensor(ptr, layout):
    if ptr.array is None:
        return _NullTensor()
    return Tensor(ptr.array.reshape(layout.shape), ptr.element_type)


def _local_tile(t: Tensor, tiler, coord):
    """Tile `coord` of shape `tiler` (one extent per mode of t: rank 1 or 2), a view."""
    if len(tiler) != t.array.ndim or t.array.ndim > 2 or len(coord) != len(tiler):
        raise AttributeError("simt_emulator: local_tile of a rank-1 or rank-2 tensor with a "
                             "tiler and coordinate of its rank only")
    key = []
    for n, c, extent in zip(tiler, coord, t.array.shape):
        n, c = int(n), _index(c)
        if c < 0 or (c + 1) * n > extent:
            raise IndexError(f"simt_emulator: tile {tuple(coord)} of {tuple(tiler)} outside "
                             f"{t.array.shape}")
        key.append(slice(c * n, (c + 1) * n))
    return Tensor(t.array[tuple(key)], t.element_type)


def _copy_values(src: Tensor, dst: Tensor):
    if src.array.shape != dst.array.shape:
        raise IndexError(f"simt_emulator: copy of {src.array.shape} into {dst.array.shape}")
    dst.array[...] = src.array


class _SmemAllocator:
    """Each thread allocates the same sequence of tensors: the i-th allocation of every
    thread of a CTA is the CTA's one i-th buffer."""

    def __init__(self):
        self.count = 0

    def allocate_tensor(self, element_type, layout, byte_alignment=0):
        bufs = _ctx.smem
        with _ctx.lock:
            if self.count == len(bufs):  # NaN-filled: reading before writing shows up
                bufs.append(Tensor(np.full(layout.shape, np.nan), element_type))
        buf = bufs[self.count]
        if buf.array.shape != layout.shape:
            raise RuntimeError("simt_emulator: threads allocated shared memory differently")
        self.count += 1
        return buf


def _range(start, stop=None, step=1, **_):  # unroll= and other hints change nothing here
    if stop is None:
        start, stop = 0, start
    return range(int(start), int(stop), int(step))


class _Barrier:
    """threading.Barrier's wait / abort, by generation count: the last thread in wakes the
    others and the barrier is at once ready for its next use. threading.Barrier drains
    first (a thread that reaches the next wait before every waiter has left blocks until
    they have), which cost the emulated kernels a second round of thread switches per
    barrier; a barrier per warp shuffle makes that most of their run time."""

    def __init__(self, parties: int):
        self.parties, self.count, self.generation, self.broken = parties, 0, 0, False
        self.cond = threading.Condition(threading.Lock())

    def wait(self):
        with self.cond:
            if self.broken:
                raise threading.BrokenBarrierError
            generation = self.generation
            self.count += 1
            if self.count == self.parties:
                self.count, self.generation = 0, generation + 1
                self.cond.notify_all()
                return
            while generation == self.generation and not self.broken:
                self.cond.wait()
            if generation == self.generation:  # aborted before this generation completed
                raise threading.BrokenBarrierError

    def abort(self):
        with self.cond:
            self.broken = True
            self.cond.notify_all()


class _Warp:
    def __init__(self, lanes):
        self.barrier = _Barrier(lanes)
        # two slot rows used in turn: a lane can be one exchange ahead of the warp's slowest
        # reader (writing the other row), never two (that takes the next exchange's barrier)
        self.slots = [[None] * lanes, [None] * lanes]
        self.turn = [0] * lanes  # each lane's count of exchanges, mod 2


def _exchange(value):
    """Every lane of the calling warp deposits value; returns all lanes' values (one warp
    barrier: the slot rows alternate, see _Warp)."""
    warp, lane = _ctx.warps[_ctx.tid // 32], _ctx.tid % 32
    turn = warp.turn[lane]
    warp.turn[lane] = 1 - turn
    slots = warp.slots[turn]
    slots[lane] = value
    warp.barrier.wait()
    return list(slots)


def _warp_reduction(value, op, threads_in_group=32):
    values, lane = _exchange(value), _ctx.tid % 32
    g0 = lane // threads_in_group * threads_in_group
    acc = values[g0]
    for x in values[g0 + 1:g0 + threads_in_group]:
        acc = op(acc, x)
    return Val(acc)


def _shuffle_sync_up(value, offset):
    values, lane = _exchange(value), _ctx.tid % 32
    return Val(values[lane - offset] if lane >= offset else value)


def _shuffle_sync_down(value, offset):
    values, lane = _exchange(value), _ctx.tid % 32
    return Val(values[lane + offset] if lane + offset < 32 else value)


def _shuffle_sync(value, offset, mask=None, mask_and_clamp=None):
    values = _exchange(value)
    return values[int(offset)]


def _shuffle_sync_bfly(value, offset, mask=None, mask_and_clamp=None):
    values, lane = _exchange(value), _ctx.tid % 32
    return values[lane ^ offset]


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


def _nothing(*_, **__):
    return None


def _min(a, b):
    return Val(min(float(a), float(b)))


def _max(a, b):
    return Val(max(float(a), float(b)))


def _exp(x):
    try:
        return Val(math.exp(x))
    except OverflowError:  # fp32 would give inf as well
        return Val(math.inf)


def _shim():
    float32, int32 = _DType("Float32"), _DType("Int32")
    cutlass = _Namespace(
        range=_range, range_constexpr=_range, const_expr=bool, Float32=float32, Int32=int32,
        memory=_Namespace(SmemAllocator=_SmemAllocator), min=_min, max=_max,
    )
    arch = _Namespace(
        thread_idx=lambda: (_ctx.tid, 0, 0), block_idx=lambda: _ctx.block, grid_dim=lambda: _ctx.grid,
        lane_idx=lambda: _ctx.tid % 32, warp_idx=lambda: _ctx.tid // 32, make_warp_uniform=lambda x: x,
        sync_threads=lambda: _ctx.barrier.wait(), sync_warp=lambda: _ctx.warps[_ctx.tid // 32].barrier.wait(),
        exp=_exp, rcp_approx=lambda x: Val(1.0 / float(x)), fmax=lambda a, b: Val(max(a, b)), fmin=lambda a, b: Val(min(a, b)),
        warp_reduction=_warp_reduction, shuffle_sync=_shuffle_sync, shuffle_sync_up=_shuffle_sync_up,
        shuffle_sync_down=_shuffle_sync_down, shuffle_sync_bfly=_shuffle_sync_bfly,
        cp_async_commit_group=_nothing, cp_async_wait_group=_nothing, prefetch=_prefetch,
    )
    cute = _Namespace(
        make_layout=Layout, make_tensor=_make_tensor, arch=arch, Tensor=object, Pointer=object,
        math=_Namespace(exp=_exp, rsqrt=lambda x: Val(1.0 / math.sqrt(x)),
                        log1p=lambda x: Val(math.log1p(x))),
        local_tile=_local_tile, make_rmem_tensor=lambda shape, dtype: Tensor(np.zeros(shape), dtype),
        size=lambda t: int(np.prod(t.shape)),
        autovec_copy=_copy_values, copy=lambda atom, src, dst: _copy_values(src, dst),
        make_copy_atom=_nothing, recast_ptr=lambda it, dtype=None: _Iter(it.array, dtype),
    )
    cpasync = _Namespace(CopyG2SOp=_nothing)
    return {"cutlass": cutlass, "cute": cute, "cpasync": cpasync, "Float32": float32, "Int32": int32}


_pristine_copies: dict[str, types.ModuleType] = {}


def _pristine(module):
    """A private copy of `module`, executed afresh from its file. Compiling a kernel makes
    the CuTe DSL rewrite the functions it traces in place (their code then calls the
    DSL's own helpers), so a process that compiled before emulating would otherwise run
    the rewritten code; the copy is never compiled."""
    copy = _pristine_copies.get(module.__name__)
    if copy is None:
        spec = importlib.util.spec_from_file_location(module.__name__ + "__simt_pristine",
                                                      module.__file__)
        copy = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(copy)
        _pristine_copies[module.__name__] = copy
    return copy


def _rebind_module(module, shim: dict) -> dict:
    """The module's globals (from its pristine copy) with the shim applied and its own
    functions re-created over them (so they call each other's emulated versions)."""
    src = _pristine(module)
    g = dict(vars(src))
    g.update((k, v) for k, v in shim.items() if k in g)
    for name, fn in vars(src).items():
        fn = getattr(fn, "__wrapped__", fn)
        if isinstance(fn, types.FunctionType) and fn.__module__ == src.__name__:
            g[name] = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    return g


def thread_index() -> int:
    """The calling emulated thread's index in its CTA."""
    return _ctx.tid


def sync_threads():
    """The CTA barrier, for code run by run_cta outside a kernel module."""
    _ctx.barrier.wait()


SmemAllocator = _SmemAllocator


def emulated(module, name: str, helper_modules=()):
    """The emulated version of a module-level function (e.g. gmem_views.operand_views);
    helper_modules as emulate_class's (modules whose functions this module imported)."""
    shim = _shim()
    g = _rebind_module(module, shim)
    for helper in helper_modules:
        h = _rebind_module(helper, shim)
        for key, value in list(g.items()):
            if isinstance(value, types.FunctionType) and value.__module__ == helper.__name__:
                g[key] = h[value.__name__]
    return g[name]


def run_cta(fn, nthreads: int, *args, block=(0, 0, 0), grid=(1, 1, 1)):
    """Run fn(*args) once per thread of one CTA of nthreads threads (CTA `block` of a grid
    of `grid` CTAs); re-raises the first exception any thread raised."""
    barrier = _Barrier(nthreads)
    warps = [_Warp(min(32, nthreads - w * 32)) for w in range(-(-nthreads // 32))]
    smem, lock, errors = [], threading.Lock(), []

    def thread(tid):
        _ctx.tid, _ctx.block, _ctx.barrier, _ctx.warps = tid, block, barrier, warps
        _ctx.grid = grid
        _ctx.smem, _ctx.lock = smem, lock
        try:
            fn(*args)
        except threading.BrokenBarrierError:
            pass
        except BaseException as e:  # noqa: BLE001 - reported after the CTA ends
            errors.append(e)
            barrier.abort()
            for w in warps:
                w.barrier.abort()

    threads = [threading.Thread(target=thread, args=(t,)) for t in range(nthreads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


class _Launch:
    def __init__(self, owner, body, args):
        self.owner, self.body, self.args = owner, body, args

    def launch(self, grid, block, stream=None, **_):
        if (block[1], block[2]) != (1, 1):
            raise AttributeError("simt_emulator: only 1-D thread blocks")
        for bz in range(int(grid[2])):
            for by in range(int(grid[1])):
                for bx in range(int(grid[0])):
                    run_cta(self.body, int(block[0]), self.owner, *self.args, block=(bx, by, bz),
                            grid=tuple(int(x) for x in grid))


def _class_cell_to(fn, klass):
    """fn's closure with its `__class__` cell (what zero-argument super() reads) pointing at
    klass: fn comes from the pristine copy, whose class is no base of the emulated one."""
    names = fn.__code__.co_freevars
    if "__class__" not in names:
        return fn.__closure__
    cells = list(fn.__closure__)
    cells[names.index("__class__")] = types.CellType(klass)
    return tuple(cells)


def emulate_class(cls, module_overrides: dict | None = None, helper_modules=()):
    """A CPU twin of a CuTe DSL kernel class (see the module docstring): a subclass of cls
    whose functions, cls's and its bases', run over their own modules' globals with the
    shim applied. helper_modules: modules whose functions the kernel modules imported
    (e.g. gmem_views for operand_views); their emulated versions replace those names."""
    shim = _shim()
    helpers = [_rebind_module(m, shim) for m in helper_modules]
    module_globals = {}
    members = {}
    for klass in reversed(cls.__mro__[:-1]):  # bases first: the most derived definition wins
        name = klass.__module__
        if name not in module_globals:
            g = _rebind_module(sys.modules[name], shim)
            for module, h in zip(helper_modules, helpers):
                for key, value in list(g.items()):
                    if isinstance(value, types.FunctionType) and value.__module__ == module.__name__:
                        g[key] = h[value.__name__]  # by the function's own name: imports may alias it
            g.update((k, v) for k, v in (module_overrides or {}).items() if k in g)
            module_globals[name] = g
        source = getattr(_pristine(sys.modules[name]), klass.__name__)  # uncompiled methods
        for attr, raw in vars(source).items():
            fn = getattr(raw, "__wrapped__", raw)  # the DSL decorators' originals (and staticmethod's)
            if isinstance(fn, types.FunctionType):
                fn = types.FunctionType(fn.__code__, module_globals[name], fn.__name__, fn.__defaults__,
                                        _class_cell_to(fn, klass))
                members[attr] = staticmethod(fn) if isinstance(raw, staticmethod) else fn
    body = members.pop("kernel")
    members["kernel"] = lambda self, *args: _Launch(self, body, args)
    return type(cls.__name__ + "Emulated", (cls,), members)
