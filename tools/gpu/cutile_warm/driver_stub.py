"""A stand-in CUDA driver (libcuda.so.1) so that cuTile's launch path runs on a GPU-less host.

cuda.tile resolves every driver entry point through `cuGetProcAddress_v2`.  The stub
answers as one sm_90 device (132 SMs) with a current context, and reports every pointer
as device memory of device 0, which is all `ct.launch` asks before it derives a kernel
specialization from its arguments.  Recording stops the launch at that point (see
recorder.py), so nothing is ever loaded or run.  The C source is built once per process
with the host C compiler and loaded under the driver's soname before cuda.tile binds it.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile

# Entry points that write a result must write a plausible one: the launch path reads
# device count, compute capability, the current context and pointer attributes.
_STUB_C = r"""
#include <string.h>
#include <stdint.h>
typedef unsigned long long u64;
#define CTX ((void *)0x1000)
#define HANDLE ((void *)0x2000)
static int ok(void) { return 0; }
static int init(unsigned f) { (void)f; return 0; }
static int drv_ver(int *v) { *v = 13000; return 0; }
static int dev_count(int *n) { *n = 1; return 0; }
static int dev_get(int *d, int ordinal) { *d = ordinal; return 0; }
static int dev_attr(int *out, int attr, int dev) {
  (void)dev;
  switch (attr) {
    case 75: *out = 9; break;                 /* compute capability major */
    case 76: *out = 0; break;                 /* minor */
    case 16: *out = 132; break;               /* multiprocessors */
    case 1: *out = 1024; break;               /* max threads per block */
    case 2: case 5: *out = 2147483647; break; /* max block / grid dim x */
    case 3: case 4: case 6: case 7: *out = 65535; break;
    case 8: *out = 49152; break;              /* shared memory per block */
    case 97: *out = 232448; break;            /* opt-in shared memory per block */
    case 10: *out = 32; break;                /* warp size */
    default: *out = 0;
  }
  return 0;
}
static int ctx_out(void **c) { if (c) *c = CTX; return 0; }
static int ctx_dev(int *d) { *d = 0; return 0; }
static int ctx_id(void *c, u64 *id) { (void)c; *id = 1; return 0; }
static int retain(void **c, int d) { (void)d; *c = CTX; return 0; }
static int stream_ctx(void *s, void **c) { (void)s; *c = CTX; return 0; }
static int stream_id(void *s, u64 *id) { (void)s; *id = 1; return 0; }
static int capturing(void *s, int *st) { (void)s; *st = 0; return 0; }
static int handle_out(void **h) { *h = HANDLE; return 0; }
static int ptr_attr(void *data, int attr, u64 ptr) {
  (void)ptr;
  switch (attr) {
    case 1: *(void **)data = CTX; break;          /* context */
    case 2: *(unsigned *)data = 2; break;         /* memory type: device */
    case 3: case 4: case 11: *(u64 *)data = ptr; break;
    case 12: *(u64 *)data = 1ull << 40; break;    /* range size */
    default: *(int *)data = 0;                    /* device ordinal 0, flags off */
  }
  return 0;
}
static int addr_range(u64 *base, size_t *size, u64 ptr) {
  if (base) *base = ptr; if (size) *size = (size_t)1 << 40; return 0;
}
static int err_str(int e, const char **s) { (void)e; *s = "stub driver"; return 0; }
static int kernel_attr(int *out, int a, void *k, int d) { (void)a; (void)k; (void)d; *out = 0; return 0; }
struct entry { const char *name; void *fn; };
static const struct entry table[] = {
  {"cuInit", (void *)init}, {"cuDriverGetVersion", (void *)drv_ver},
  {"cuDeviceGetCount", (void *)dev_count}, {"cuDeviceGet", (void *)dev_get},
  {"cuDeviceGetAttribute", (void *)dev_attr}, {"cuCtxGetCurrent", (void *)ctx_out},
  {"cuCtxPopCurrent", (void *)ctx_out}, {"cuCtxGetDevice", (void *)ctx_dev},
  {"cuCtxGetId", (void *)ctx_id}, {"cuDevicePrimaryCtxRetain", (void *)retain},
  {"cuStreamGetCtx", (void *)stream_ctx}, {"cuStreamGetId", (void *)stream_id},
  {"cuStreamIsCapturing", (void *)capturing}, {"cuPointerGetAttribute", (void *)ptr_attr},
  {"cuMemGetAddressRange", (void *)addr_range}, {"cuGetErrorString", (void *)err_str},
  {"cuKernelGetAttribute", (void *)kernel_attr}, {"cuStreamCreate", (void *)handle_out},
  {"cuEventCreate", (void *)handle_out}, {"cuLibraryLoadData", (void *)handle_out},
  {"cuLibraryGetKernel", (void *)handle_out}, {"cuKernelGetFunction", (void *)handle_out},
  {"cuMemAlloc", (void *)handle_out}, {"cuMemAllocHost", (void *)handle_out},
};
int cuGetProcAddress_v2(const char *sym, void **pfn, int ver, u64 flags, int *status) {
  (void)ver; (void)flags;
  *pfn = (void *)ok;
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (!strcmp(sym, table[i].name)) *pfn = table[i].fn;
  if (status) *status = 1;
  return 0;
}
"""

_loaded: str | None = None


def missing_c_compiler() -> str | None:
    return None if shutil.which("cc") else "no C compiler (cc) to build the driver stub"


def load_stub_driver() -> str:
    """Build and load the stub as libcuda.so.1 (once per process); returns its path.

    Must run before `import cuda.tile`: the first library loaded under the driver's
    soname is the one cuda.tile binds."""
    global _loaded
    if _loaded is not None:
        return _loaded
    d = tempfile.mkdtemp(prefix="cutile_stub_driver")
    src, lib = os.path.join(d, "stub.c"), os.path.join(d, "libcuda.so.1")
    with open(src, "w") as f:
        f.write(_STUB_C)
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", lib, src],
                   check=True)
    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
    _loaded = lib
    return lib


def loaded() -> bool:
    """Whether this process loaded the stub (cuda.tile binds the first libcuda.so.1)."""
    return _loaded is not None
