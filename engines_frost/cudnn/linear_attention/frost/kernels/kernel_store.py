"""The precompiled FROST kernel store: compiled forward kernels kept as AOT objects on disk.

CuTe DSL's ahead-of-time path (``JitCompiledFunction.dump_to_object`` / ``export_to_c``,
loaded back by ``cutlass.cute.runtime.load_module``) writes one ELF object per compiled
kernel: the host launch function plus the sm_90a cubin, with the argument signature as
metadata. Loading an object JIT-links it (milliseconds) and never runs the DSL's tracer,
MLIR pipeline or ptxas, so a store filled on a build machine without a GPU
(tools/gpu/frost_precompile.py) saves the GPU machine every compile it holds.

Layout of a store directory (FROST_KERNEL_CACHE):
    <key>.json            one entry: what was compiled, for what, and its object's sha256
    <key>-<sha12>.o       the object (named by content, so a finished entry never points
                          at a half-written object)
    manifest.json         written by the precompile tool only; loading never reads it
The key hashes the FrostFwdConfig, the target arch, the CuTe DSL version and the CUDA
flavour of its libraries, the host machine type and the kernel sources (KEYED_SOURCES),
so an entry built from other code or for another config is simply never looked up.
An entry that is found but unreadable, corrupt or inconsistent is skipped with a
KernelStoreWarning and the kernel is compiled as if it were absent: a store can cost a
compile, never a crash or a wrong kernel.

Environment: FROST_KERNEL_CACHE=DIR turns the store on (unset: off);
FROST_KERNEL_CACHE_WRITE=0 keeps it read-only (otherwise what a process compiles is
added); FROST_KERNEL_CACHE_STRICT=1 makes a miss an error instead of a compile (to prove
on the GPU that a run compiled nothing). Imports cutlass only inside the functions that
load or save objects.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import platform
import warnings
from pathlib import Path

from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

STORE_ENV = "FROST_KERNEL_CACHE"
WRITE_ENV = "FROST_KERNEL_CACHE_WRITE"
STRICT_ENV = "FROST_KERNEL_CACHE_STRICT"
FORMAT = 2  # bump when the entry layout or the way objects are produced changes (2: ffi)
# Every kernels/ file whose text can change a compiled kernel: the kernel classes, what
# they import, the launch ABI and compile_kernel.py (algorithm name -> class, compile
# options). fwd.py (checks, caches, launch) is left out: editing it keeps the store valid.
KEYED_SOURCES = ("bwd_abi.py", "bwd_chain.py", "bwd_compile.py", "bwd_config.py", "bwd_grads.py",
                 "bwd_grads_vec.py", "bwd_states.py", "bwd_values.py", "checkpoints.py", "checkpoints_dsl.py",
                 "compile_kernel.py", "config.py", "decode_compile.py", "decode_config.py",
                 "decode_kernel.py", "fwd_v0.py", "fwd_v1.py", "fwd_v2.py", "gmem_views.py", "launch_abi.py",
                 "seq_bounds.py")
# Imported by compile_kernel.py but never traced into a kernel: the wrapper that pairs a
# compiled function with its calling convention, and the launch-time argument builders.
UNKEYED_RUNTIME = ("compiled_kernel.py", "launch_args.py")
# Objects the precompile tool writes run on whichever x86-64 host the GPU sits in: pin
# the baseline CPU (the default targets this build machine's, AVX-512 included).
GENERIC_X86_64 = "llvm -mtriple=x86_64-unknown-linux-gnu -mcpu=x86-64"


class KernelStoreWarning(RuntimeWarning):
    """A store entry was skipped (or could not be written); the kernel is compiled instead."""


class KernelStoreMiss(RuntimeError):
    """FROST_KERNEL_CACHE_STRICT=1 and the store has no entry for a config."""


def describe(cfg) -> str:
    """One short line naming a config, forward or backward (progress lines, warnings)."""
    if hasattr(cfg, "stage"):  # bwd_config.FrostBwdConfig
        return (f"bwd-{cfg.stage} {describe(cfg.fwd)} dht={cfg.dht_dtype or '-'} "
                f"dh0={cfg.dh0_dtype or '-'}{' ckpt' if cfg.checkpoints else ''}")
    if hasattr(cfg, "block_v"):  # decode_config.FrostDecodeConfig
        flags = "".join(s for on, s in ((cfg.use_l2norm, " l2"), (cfg.has_pool, " pool"),
                                         (cfg.safe_gate, " safe"), (cfg.beta_sigmoid, " sig"),
                                         (cfg.neg_eigval, " neg"), (cfg.linear_gate, " lin"),
                                         (cfg.checkpoint_every, f" ck{cfg.checkpoint_every}")) if on)
        return (f"decode {cfg.family} H{cfg.H}/HK{cfg.HK}/HV{cfg.HV} K{cfg.K} V{cfg.V} "
                f"BV{cfg.block_v} {cfg.io_dtype} {cfg.state_dtype}{flags}")
    state = f"{cfg.state_dtype} h0={int(cfg.has_initial_state)} ht={int(cfg.has_final_state)}"
    flags = "".join(s for on, s in ((cfg.use_l2norm, " l2"), (not cfg.ldmatrix, " no-ldmatrix"),
                                     (cfg.gate_align16, " g16"), (cfg.write_checkpoints, " ckpt"),
                                     (cfg.skip_stages, " skip=" + "+".join(cfg.skip_stages))) if on)
    return (f"{cfg.algorithm} {cfg.family} H{cfg.H}/HK{cfg.HK}/HV{cfg.HV} K{cfg.K} V{cfg.V} "
            f"{cfg.io_dtype} {state}{flags}")


@functools.cache
def source_hash(directory: str | None = None) -> str:
    """sha256 over the names and bytes of KEYED_SOURCES (default: this package's)."""
    root = Path(directory) if directory else Path(__file__).resolve().parent
    h = hashlib.sha256()
    for name in KEYED_SOURCES:
        data = (root / name).read_bytes()
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def toolchain() -> dict[str, str]:
    """What besides the config decides an object's content: the CuTe DSL release, the CUDA
    flavour its libraries were built for, the host machine type and the kernel sources."""
    import cutlass
    from cutlass.base_dsl.version_info import CUDA_VERSION

    return {"cutlass_dsl": str(cutlass.__version__),
            "dsl_cuda": f"{CUDA_VERSION.major}.{CUDA_VERSION.minor}",
            "machine": platform.machine(), "sources": source_hash()}


def key_fields(cfg: FrostFwdConfig, arch: str, ffi: str, tools: dict[str, str]) -> dict:
    """ffi: the kernel's host calling convention (compile_kernel.FFI_CONVENTIONS)."""
    return {"format": FORMAT, "config": dataclasses.asdict(cfg), "arch": arch, "ffi": ffi, **tools}


def entry_key(cfg: FrostFwdConfig, arch: str, ffi: str, tools: dict[str, str] | None = None) -> str:
    fields = key_fields(cfg, arch, ffi, toolchain() if tools is None else tools)
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:32]


def symbol_prefix(key: str) -> str:
    """The object's symbol prefix (a C identifier, unique per entry)."""
    return f"frost_{key[:16]}"


def _warn(path: Path, why: str) -> None:
    warnings.warn(f"FROST kernel store: skipping {path}: {why}; compiling instead",
                  KernelStoreWarning, stacklevel=3)


@dataclasses.dataclass(frozen=True)
class KernelStore:
    """One store directory. ``writable``: add what this process compiles; ``strict``: a miss
    raises KernelStoreMiss (fwd._compiled) instead of compiling."""

    root: Path
    writable: bool = True
    strict: bool = False

    def sidecar(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def load(self, cfg: FrostFwdConfig, arch: str, ffi: str):
        """The stored kernel for (cfg, arch, calling convention ffi) as a
        compiled_kernel.CompiledKernel, or None (no entry; or a bad one, with a
        KernelStoreWarning)."""
        tools = toolchain()
        key = entry_key(cfg, arch, ffi, tools)
        path = self.sidecar(key)
        if not path.is_file():
            return None
        try:
            entry = json.loads(path.read_text())
            # compared as JSON reads them back: tuple fields (skip_stages) come back as lists
            expected = json.loads(json.dumps(key_fields(cfg, arch, ffi, tools)))
            wrong = sorted(k for k, v in expected.items() if entry.get(k) != v)
            if wrong:
                return _warn(path, f"its {', '.join(wrong)} differ from the requested kernel's")
            obj = self.root / entry["object"]
            data = obj.read_bytes()
        except (OSError, ValueError, KeyError, TypeError) as e:
            return _warn(path, f"unreadable entry ({type(e).__name__}: {e})")
        if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
            return _warn(obj, "its sha256 does not match the entry (truncated or overwritten)")
        try:
            fn = _load_object(obj, symbol_prefix(key), ffi)
        except Exception as e:  # the DSL reports bad objects as its own exception types
            return _warn(obj, f"the CuTe DSL could not load it ({type(e).__name__}: {str(e)[:200]})")
        why = _signature_mismatch(fn, cfg, ffi)
        if why:
            return _warn(obj, why)
        from cudnn.linear_attention.frost.kernels.compiled_kernel import CompiledKernel

        return CompiledKernel(fn, ffi, cfg)

    def save(self, cfg: FrostFwdConfig, arch: str, kernel) -> Path:
        """Export a compiled_kernel.CompiledKernel (compile_fwd's result for cfg and arch) as
        an entry; returns the entry's sidecar path. Raises OSError / the DSL's errors on
        failure."""
        ffi = kernel.ffi
        key = entry_key(cfg, arch, ffi)
        data = _dump_object(kernel.fn, symbol_prefix(key), ffi)
        digest = hashlib.sha256(data).hexdigest()
        self.root.mkdir(parents=True, exist_ok=True)
        obj = self.root / f"{key}-{digest[:12]}.o"
        _write_atomic(obj, data)
        entry = {**key_fields(cfg, arch, ffi, toolchain()), "key": key, "object": obj.name,
                 "sha256": digest, "bytes": len(data), "describe": describe(cfg)}
        path = self.sidecar(key)
        _write_atomic(path, json.dumps(entry, indent=1, sort_keys=True).encode())
        return path

    def entries(self) -> list[dict]:
        """Every readable entry's sidecar (the precompile tool's manifest and pruning)."""
        out = []
        for path in sorted(self.root.glob("*.json")):
            if path.name == "manifest.json":
                continue
            try:
                out.append(json.loads(path.read_text()))
            except (OSError, ValueError):
                continue
        return out


def active_store() -> KernelStore | None:
    """The store FROST_KERNEL_CACHE names (read on every call, so tests can switch it)."""
    root = os.environ.get(STORE_ENV, "").strip()
    if not root:
        return None
    return KernelStore(Path(root), writable=os.environ.get(WRITE_ENV, "1") != "0",
                       strict=os.environ.get(STRICT_ENV, "0") == "1")


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


@functools.lru_cache(maxsize=1)
def _runtime_libraries_global() -> None:
    """dump_to_object links the host shim against the CuTe DSL runtime
    (libcute_dsl_runtime: _cudaLaunchKernelEx, _cudaLibraryLoadData, ...) and resolves
    those symbols from the process: make the library's symbols global first."""
    import ctypes

    from cutlass.cute.runtime import find_runtime_libraries

    for lib in find_runtime_libraries(enable_tvm_ffi=False):
        ctypes.CDLL(lib, mode=os.RTLD_GLOBAL)


def _dump_object(fn, prefix: str, ffi: str) -> bytes:
    """The object file of a compiled function. TVM-FFI kernels go through export_to_c,
    which names the entry point __tvm_ffi_<prefix> (what load_module looks up); the
    DSL's own convention through dump_to_object (its metadata carries the signature)."""
    _runtime_libraries_global()
    if ffi != "tvm":
        return fn.dump_to_object(prefix)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="frost_export_") as tmp:
        path = Path(tmp) / f"{prefix}.o"
        fn.export_to_c(str(path), function_name=prefix)
        return path.read_bytes()


def _load_object(path: Path, prefix: str, ffi: str):
    from cutlass.cute.runtime import load_module

    module = load_module(str(path), enable_tvm_ffi=ffi == "tvm")
    return getattr(module, prefix) if ffi == "tvm" else module[prefix]


def _signature_mismatch(fn, cfg: FrostFwdConfig, ffi: str) -> str | None:
    """Why fn cannot take launch_abi's argument list for cfg (None: it can). A TVM-FFI
    function carries no Python-visible signature: the key (launch_abi.py's text among
    the keyed sources) is what ties it to the ABI, and the FFI checks the argument count
    and types of every call in C."""
    if ffi == "tvm":
        return None
    if hasattr(cfg, "stage"):  # a backward kernel: bwd_abi's list
        from cudnn.linear_attention.frost.kernels.bwd_abi import bwd_fake_args as fake_args
    elif hasattr(cfg, "block_v"):  # the recurrent kernel: decode_config's list
        from cudnn.linear_attention.frost.kernels.decode_compile import decode_fake_args as fake_args
    else:
        from cudnn.linear_attention.frost.kernels.launch_abi import fake_args
    params = list(fn.execution_args.signature.parameters)
    want = len(fake_args(cfg))
    if len(params) != want:
        return f"its entry takes {len(params)} arguments ({', '.join(params)}), the launch ABI {want}"
    return None
