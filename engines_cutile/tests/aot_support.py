"""Ahead-of-time compilation of cuTile kernels on a machine without a GPU (L0 tier).

cuTile lowers a kernel for concrete argument types; this helper describes array
arguments with `__cuda_array_interface__` records (no memory behind them) and exports
an sm_90 cubin through `cuda.tile.compilation.export_kernel`, which runs the whole
compiler (cuTile front end, tileiras, ptxas).  Where no CUDA driver is installed, a tiny
stub `libcuda.so.1` (every entry point reports success) is built with the C compiler and
loaded under the driver's soname before cuda.tile looks for it.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import io
import os
import shutil
import subprocess
import tempfile

_STUB_C = r"""
#include <string.h>
static int ok(void) { return 0; }
static int dev_attr(int *out, int attr, int dev) { (void)dev; *out = 0;
  if (attr == 75) *out = 9; if (attr == 16) *out = 132; return 0; }
static int drv_ver(int *v) { *v = 13000; return 0; }
int cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long f, int *st) {
  (void)ver; (void)f; if (st) *st = 1;
  if (!strcmp(sym, "cuDeviceGetAttribute")) *pfn = (void*)dev_attr;
  else if (!strcmp(sym, "cuDriverGetVersion")) *pfn = (void*)drv_ver;
  else *pfn = (void*)ok;
  return 0;
}
"""

_TYPESTR = {"float32": "<f4", "float16": "<f2", "int32": "<i4", "int64": "<i8"}


def missing_toolchain() -> str | None:
    """Why AOT compilation cannot run here, or None when it can."""
    try:
        import cuda.tile  # noqa: F401
    except ImportError as e:
        return f"cuda.tile is not importable ({e})"
    from cudnn.linear_attention.cutile.kernel_cache import tileiras_path
    if tileiras_path() is None:  # looked up as cuda.tile does: the environment's wheels first
        return "cuTile's compiler tileiras is not installed (pip install 'cudnn-pygraph[cutile]')"
    if ctypes.util.find_library("cuda") is None and shutil.which("cc") is None:
        return "no CUDA driver and no C compiler to build the driver stub"
    return None


def ensure_driver_or_stub() -> None:
    try:
        ctypes.CDLL("libcuda.so.1")
        return
    except OSError:
        pass
    d = tempfile.mkdtemp(prefix="cudastub")
    src, lib = os.path.join(d, "stub.c"), os.path.join(d, "libcuda.so.1")
    with open(src, "w") as f:
        f.write(_STUB_C)
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", lib, src],
                   check=True)
    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)


class FakeArray:
    """An array argument described by shape and dtype only (C-contiguous)."""

    def __init__(self, shape, dtype: str, address: int = 1 << 24):
        # bfloat16 has no array-interface type string: describe it as float16 (same
        # size) and patch the dtype into the signature (see compile_sm90)
        self.dtype = dtype
        typestr = _TYPESTR["float16" if dtype == "bfloat16" else dtype]
        strides, acc = [], int(typestr[2:])
        for s in reversed(shape):
            strides.append(acc)
            acc *= max(int(s), 1)
        self.__cuda_array_interface__ = dict(
            shape=tuple(int(s) for s in shape), typestr=typestr, data=(address, False),
            strides=tuple(reversed(strides)), version=3)


def compile_sm90(kernel, args, gpu_code: str = "sm_90") -> bytes:
    """Compile `kernel` for `args`; returns the cubin."""
    ensure_driver_or_stub()
    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel
    import dataclasses

    import cuda.tile as ct
    sig = KernelSignature.from_kernel_args(kernel, tuple(args),
                                           CallingConvention.cutile_python_v1())
    params = tuple(
        dataclasses.replace(p, dtype=ct.bfloat16)
        if isinstance(a, FakeArray) and a.dtype == "bfloat16" else p
        for a, p in zip(args, sig.parameters))
    sig = KernelSignature(params, sig.calling_convention).with_mangled_symbol(
        kernel._annotated_function.pyfunc.__name__)
    buf = io.BytesIO()
    export_kernel(kernel, [sig], buf, gpu_code=gpu_code, output_format="cubin")
    return buf.getvalue()


def _describe(arg):
    """Kernel argument -> what the compiler needs to know about it (no memory)."""
    import torch
    if isinstance(arg, torch.Tensor):
        name = str(arg.dtype).replace("torch.", "")
        return FakeArray(tuple(arg.shape), name)
    return arg


class CompileOnlyLaunch:
    """Context manager: `ct.launch` compiles each distinct (kernel, signature) for sm_90
    instead of launching, so host orchestration code runs unchanged on CPU tensors."""

    def __init__(self):
        self.compiled: list[tuple[str, int]] = []
        self.arg_dtypes: list[tuple[str, tuple]] = []   # per compile: dtype or None per arg
        self._seen = set()

    def __enter__(self):
        import cuda.tile as ct
        self._ct, self._orig = ct, ct.launch

        def launch(stream, grid, kernel, args):
            fake = tuple(_describe(a) for a in args)
            key = (kernel._annotated_function.pyfunc.__name__,
                   tuple((a.__cuda_array_interface__["shape"], getattr(a, "dtype", None))
                         if isinstance(a, FakeArray) else a for a in fake))
            if key in self._seen:
                return
            self._seen.add(key)
            self.arg_dtypes.append((key[0], tuple(getattr(a, "dtype", None) for a in fake)))
            self.compiled.append((key[0], len(compile_sm90(kernel, fake))))
        ct.launch = launch
        return self

    def __exit__(self, *exc):
        self._ct.launch = self._orig
        return False
