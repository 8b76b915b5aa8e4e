"""The kernel store through real CuTe DSL AOT objects, on a CPU-only machine.

One small config is cross-compiled for sm_90a here (generic x86-64 host shim, as
tools/gpu/frost_precompile.py does) and stored. Then:
- a fresh process, with fwd.compile_fwd and cute.compile made to raise and the store
  strict, gets it from fwd._compiled: a loaded (not compiled) function whose parameters
  are launch_abi's, and which marshals launch_args.real_args into exactly the pointer,
  T, N, scale and stream values given (launching needs a GPU:
  frost_kernel_store_gpu_test.py);
- another config, another toolchain or other kernel sources miss without a warning;
- a truncated or foreign object, an unreadable or inconsistent entry are skipped with a
  KernelStoreWarning (and _load_or_compile compiles instead);
- what _compiled compiles natively is written back and found by the next lookup, with
  the same device code as the cross-compiled entry (only the host shim differs).
Skips without nvidia-cutlass-dsl.
"""
import dataclasses
import functools
import hashlib
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")

from cudnn.linear_attention.frost.kernels import fwd, kernel_store  # noqa: E402
from cudnn.linear_attention.frost.kernels.config import OPERANDS, FrostFwdConfig  # noqa: E402

# The cheapest config to compile (~3 s here): pipelined GDN, one head, K = V = 64.
CFG = FrostFwdConfig(io_dtype="bfloat16", state_dtype="float32", H=1, HK=1, HV=1, K=64, V=64,
                     gate_per_channel=False, beta_per_channel=False, has_w=False, use_l2norm=True,
                     has_initial_state=True, has_final_state=True)
ARCH = "sm_90a"
GENERIC = kernel_store.GENERIC_X86_64  # the store below holds kernels with a generic host shim


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("frost_store")
    fn = fwd.compile_fwd(CFG, ARCH, host_target=kernel_store.GENERIC_X86_64)
    kernel_store.KernelStore(root).save(CFG, ARCH, fn)
    return root


@pytest.fixture
def store_copy(store_dir, tmp_path):
    root = tmp_path / "store"
    shutil.copytree(store_dir, root)
    return root


@functools.cache
def _native(ffi: str):
    """CFG compiled for this host with `ffi`, once per process: the write-back test's miss
    compiles it (through fwd.compile_fwd) and the TVM-FFI test stores it."""
    return _real_compile_fwd(CFG, ARCH, ffi=ffi)


_real_compile_fwd = fwd.compile_fwd


def _entry(root: Path) -> tuple[Path, dict]:
    (sidecar,) = [p for p in root.glob("*.json")]
    return sidecar, json.loads(sidecar.read_text())


FRESH_PROCESS = r"""
import ctypes, json, sys
import cutlass.cute as cute
from cudnn.linear_attention.frost.kernels import fwd
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig, OPERANDS
from cudnn.linear_attention.frost.kernels.launch_args import real_args

def no_compiler(*a, **k):
    raise AssertionError("the compiler was called")
fwd.compile_fwd = no_compiler
cute.compile = no_compiler

cfg = FrostFwdConfig(**json.loads(sys.argv[1]))
kernel = fwd._compiled(cfg, "sm_90a", "cute")
fn = kernel.fn

class Tensor:
    def __init__(self, address): self.address = address
    def data_ptr(self): return self.address
class Stream:
    cuda_stream = 0x5150

tensors = {name: Tensor(0x100000 * (i + 1)) for i, name in enumerate(OPERANDS)}
args = real_args(cfg, tensors, 1000, 3, 0.125, Stream())
exe, adapted = fn.generate_execution_args(*args)  # exe points into args/adapted: keep both alive
addr = lambda p: p if isinstance(p, int) else p.value
read = lambda ctype, p: ctype.from_address(addr(p)).value
print(json.dumps({
    "type": type(fn).__name__, "from_binary": fn.load_from_binary,
    "params": list(fn.execution_args.signature.parameters),
    "pointers": [read(ctypes.c_uint64, p) for p in exe[:10]],
    "T": read(ctypes.c_int32, exe[10]), "N": read(ctypes.c_int32, exe[11]),
    "scale": read(ctypes.c_float, exe[12]), "stream": read(ctypes.c_uint64, exe[13]), "count": len(exe),
}))
"""


def test_a_fresh_process_loads_the_kernel_without_compiling(store_dir):
    from cudnn.linear_attention.frost.kernels.launch_abi import fake_args

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), kernel_store.STORE_ENV: str(store_dir),
           kernel_store.STRICT_ENV: "1", kernel_store.WRITE_ENV: "0"}
    out = subprocess.run([sys.executable, "-c", FRESH_PROCESS, json.dumps(dataclasses.asdict(CFG))],
                         env=env, capture_output=True, text=True, check=False, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["type"] == "CudaDialectJitCompiledFunction" and got["from_binary"] is True
    assert len(got["params"]) == len(fake_args(CFG)) == got["count"] == 14
    assert got["pointers"] == [0x100000 * (i + 1) for i in range(len(OPERANDS))]
    assert (got["T"], got["N"], got["scale"], got["stream"]) == (1000, 3, 0.125, 0x5150)


def _no_store_warnings(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    assert not [w for w in caught if issubclass(w.category, kernel_store.KernelStoreWarning)]
    return result


def test_another_config_toolchain_or_source_misses_quietly(store_dir, monkeypatch):
    store = kernel_store.KernelStore(store_dir)
    assert _no_store_warnings(lambda: store.load(CFG, ARCH, "cute", GENERIC)) is not None  # the entry itself loads
    assert _no_store_warnings(lambda: store.load(dataclasses.replace(CFG, use_l2norm=False), ARCH, "cute", GENERIC)) is None
    assert _no_store_warnings(lambda: store.load(CFG, "sm_100a", "cute", GENERIC)) is None
    assert _no_store_warnings(lambda: store.load(CFG, ARCH, "tvm", GENERIC)) is None
    assert _no_store_warnings(lambda: store.load(CFG, ARCH, "cute")) is None  # built for another CPU
    real = kernel_store.toolchain()
    for part in ("sources", "cutlass_dsl"):
        monkeypatch.setattr(kernel_store, "toolchain", lambda part=part: {**real, part: "other"})
        assert _no_store_warnings(lambda: store.load(CFG, ARCH, "cute", GENERIC)) is None


def _corrupt_truncated(root, sidecar, entry):
    obj = root / entry["object"]
    obj.write_bytes(obj.read_bytes()[:4096])
    return "sha256 does not match"


def _corrupt_foreign_object(root, sidecar, entry):
    # bytes that pass the checksum (the entry is rewritten to match) but are no object
    data = b"\x7fELF" + bytes(5000)
    (root / entry["object"]).write_bytes(data)
    sidecar.write_text(json.dumps({**entry, "sha256": hashlib.sha256(data).hexdigest()}))
    return "the CuTe DSL could not load it"


def _corrupt_sidecar_json(root, sidecar, entry):
    sidecar.write_text(sidecar.read_text()[:50])
    return "unreadable entry"


def _corrupt_sidecar_config(root, sidecar, entry):
    sidecar.write_text(json.dumps({**entry, "config": {**entry["config"], "K": 128}}))
    return "its config differ"


def _corrupt_missing_object(root, sidecar, entry):
    (root / entry["object"]).unlink()
    return "unreadable entry .FileNotFoundError"


@pytest.mark.parametrize("corrupt", [_corrupt_truncated, _corrupt_foreign_object, _corrupt_sidecar_json,
                                     _corrupt_sidecar_config, _corrupt_missing_object],
                         ids=lambda f: f.__name__.removeprefix("_corrupt_"))
def test_a_bad_entry_is_skipped_with_a_warning_and_the_kernel_compiled(store_copy, corrupt, monkeypatch):
    sidecar, entry = _entry(store_copy)
    why = corrupt(store_copy, sidecar, entry)
    store = kernel_store.KernelStore(store_copy, writable=False)
    with pytest.warns(kernel_store.KernelStoreWarning, match=why):
        assert store.load(CFG, ARCH, "cute", GENERIC) is None
    compiled = object()
    monkeypatch.setattr(fwd, "compile_fwd", lambda cfg, arch, host_target=None, ffi=None: compiled)
    monkeypatch.setattr(kernel_store, "active_store", lambda: store)
    with pytest.warns(kernel_store.KernelStoreWarning):
        assert fwd._load_or_compile(CFG, ARCH, "cute") is compiled


def _cuda_elf(data: bytes) -> bytes:
    """The device ELF (e_machine 190, EM_CUDA) embedded in a host object."""
    at = data.find(b"\x7fELF", 1)
    while at >= 0:
        if struct.unpack_from("<H", data, at + 18)[0] == 190:
            shoff, = struct.unpack_from("<Q", data, at + 0x28)
            shentsize, shnum = struct.unpack_from("<HH", data, at + 0x3A)
            return data[at:at + shoff + shentsize * shnum]
        at = data.find(b"\x7fELF", at + 1)
    raise AssertionError("no EM_CUDA ELF inside the object")


@pytest.mark.parametrize("ffi", ["cute", pytest.param("tvm", marks=pytest.mark.skipif(
    importlib.util.find_spec("tvm_ffi") is None, reason="apache-tvm-ffi is not installed"))])
def test_what_a_process_compiles_is_written_back_with_the_same_device_code(store_dir, tmp_path, monkeypatch, ffi):
    root = tmp_path / "filled"
    monkeypatch.setattr(kernel_store, "active_store", lambda: kernel_store.KernelStore(root))
    calls = []

    def compile_fwd(cfg, arch, host_target=None, ffi=None):  # the native build, shared (_native)
        calls.append((cfg, arch, host_target, ffi))
        return _native(ffi) if (cfg, arch, host_target) == (CFG, ARCH, None) else _real_compile_fwd(
            cfg, arch, host_target=host_target, ffi=ffi)

    monkeypatch.setattr(fwd, "compile_fwd", compile_fwd)
    compiled = fwd._load_or_compile(CFG, ARCH, ffi)  # a miss: compiles natively, then stores
    assert calls == [(CFG, ARCH, None, ffi)] and compiled.ffi == ffi
    _, entry = _entry(root)
    assert entry["key"] == kernel_store.entry_key(CFG, ARCH, ffi) and entry["describe"] == kernel_store.describe(CFG)
    assert entry["ffi"] == ffi
    loaded = _no_store_warnings(lambda: kernel_store.KernelStore(root).load(CFG, ARCH, ffi))
    assert loaded is not None and loaded.ffi == ffi
    if ffi == "cute":
        assert not compiled.fn.load_from_binary and loaded.fn.load_from_binary
    cross = _cuda_elf((store_dir / _entry(store_dir)[1]["object"]).read_bytes())
    native = _cuda_elf((root / entry["object"]).read_bytes())
    assert len(cross) > 10_000 and cross == native


TVM_CALL = r"""
import json, sys
from cudnn.linear_attention.frost.kernels import fwd
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

cfg = FrostFwdConfig(**json.loads(sys.argv[1]))
kernel = fwd._compiled(cfg, "sm_90a", "tvm")   # from the strict store: no compiler runs
class Tensor:
    def __init__(self, address): self.address = address
    def data_ptr(self): return self.address
class Stream:
    cuda_stream = 0
args = kernel.args({"q": Tensor(0x1000)}, 1000, 3, 0.125, Stream())
out = {"type": type(kernel.fn).__name__, "args": list(args)}
for name, call in (("short", lambda: kernel(*args[:-1])), ("full", lambda: kernel(*args))):
    try:
        call()
        out[name] = "returned"
    except Exception as e:
        out[name] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


@pytest.mark.skipif(importlib.util.find_spec("tvm_ffi") is None, reason="apache-tvm-ffi is not installed")
def test_a_stored_tvm_ffi_kernel_takes_plain_ints_in_a_fresh_process(tmp_path):
    """The TVM-FFI convention end to end without a GPU: compiled for this host, stored,
    loaded in a fresh strict process, called with the ints CompiledKernel.args builds.
    A call with one argument too few is refused by the FFI's own checks; the full call
    gets through argument conversion to the CUDA runtime, which fails here (no GPU)."""
    root = tmp_path / "tvm"
    kernel = _native("tvm")  # the write-back test's build where it ran first
    kernel_store.KernelStore(root).save(CFG, ARCH, kernel)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), kernel_store.STORE_ENV: str(root),
           kernel_store.STRICT_ENV: "1", kernel_store.WRITE_ENV: "0"}
    out = subprocess.run([sys.executable, "-c", TVM_CALL, json.dumps(dataclasses.asdict(CFG))],
                         env=env, capture_output=True, text=True, check=False, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["type"] == "Function"
    assert got["args"] == [0x1000] + [0] * 9 + [1000, 3, 0.125, 0]
    assert got["short"].startswith("TypeError: Expects 14 parameters"), got["short"]
    assert "cuda" in got["full"].lower() and "parameters" not in got["full"], got["full"]


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
