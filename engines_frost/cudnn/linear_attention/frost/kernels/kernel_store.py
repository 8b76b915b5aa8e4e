"""The FROST kernel cache on disk: compiled kernels kept as AOT objects across processes.

CuTe DSL's ahead-of-time path (``JitCompiledFunction.dump_to_object`` / ``export_to_c``,
loaded back by ``cutlass.cute.runtime.load_module``) writes one ELF object per compiled
kernel: the host launch function plus the cubin, with the argument signature as
metadata. Loading an object JIT-links it (milliseconds) and never runs the DSL's tracer,
MLIR pipeline or ptxas, which cost 2.5-15 s per kernel configuration. The cache is on by
default, in a per-user folder; `python -m cudnn precompile` fills it ahead of time
(docs/CACHING.md).

Layout of a cache directory:
    <key>.json            one entry: what was compiled, for what, and its object's sha256
    <key>-<sha12>.o       the object (named by content, so a finished entry never points
                          at a half-written object)
    .<key>.lock           held while one process compiles that key (others wait, then load)
    manifest.json         written by the precompile tools only; loading never reads it
The key hashes the config (forward FrostFwdConfig or backward FrostBwdConfig), the target
arch, the calling convention, the CuTe DSL version and the CUDA flavour of its libraries,
the TVM-FFI version (for TVM-FFI kernels), the CPU the host code was built for and the
text of every kernel source (KEYED_SOURCES): an entry built from other code, by another
compiler, for another device or convention is never looked up, so a stale kernel cannot
run. An entry that is found but unreadable, corrupt or inconsistent is skipped with a
KernelStoreWarning and the kernel is compiled as if it were absent: a cache can cost a
compile, never a crash or a wrong kernel. Writes are atomic (a temporary file renamed
into place), so concurrent processes never see half an entry.

Environment: FROST_KERNEL_CACHE=DIR moves the cache (default
``${XDG_CACHE_HOME:-~/.cache}/cudnn-pygraph/frost``); FROST_KERNEL_CACHE=0 (or off,
none, or empty) turns it off; FROST_KERNEL_CACHE_WRITE=0 keeps it read-only (otherwise
what a process compiles is added); FROST_KERNEL_CACHE_STRICT=1 makes a miss an error
instead of a compile (to prove that a run compiled nothing). Every compile that takes
longer than a second logs one line (logger ``cudnn.linear_attention.frost``, INFO).
Imports cutlass only inside the functions that load or save objects.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import os
import platform
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

from cudnn.linear_attention.common.switches import binary_switch
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

STORE_ENV = "FROST_KERNEL_CACHE"
WRITE_ENV = "FROST_KERNEL_CACHE_WRITE"
STRICT_ENV = "FROST_KERNEL_CACHE_STRICT"
FORMAT = 3  # bump when the entry layout or the way objects are produced changes (3: host)
OFF_VALUES = ("0", "off", "none", "")
#: compiles longer than this log a line (the cache makes later processes skip them)
LOG_COMPILE_SECONDS = 1.0
_log = logging.getLogger("cudnn.linear_attention.frost")
# Every kernels/ file whose text can change a compiled kernel: the kernel classes, what
# they import, the launch ABI and compile_kernel.py (config -> class, compile options).
# fwd.py (checks, caches, launch) is left out: editing it keeps the store valid. The test
# tooling's own kernel sources (engines_frost/tests/frost_fwd_oracle.py, the experiment knobs)
# are keyed through its config type, whose fields carry their hash.
KEYED_SOURCES = ("bwd_abi.py", "bwd_chain.py", "bwd_chain_pipelined.py", "bwd_chain_scaled.py",
                 "bwd_chain_schedule.py", "bwd_chain_ws.py", "bwd_chain_ws_wy.py", "bwd_chain_ws4.py", "bwd_chain_wgmma.py", "bwd_compile.py", "bwd_config.py", "bwd_grads.py", "bwd_grads_vec.py",
                 "bwd_grads_wgmma.py", "bwd_states.py", "bwd_values.py", "bulk_rows.py",
                 "checkpoints.py", "checkpoints_dsl.py", "compile_kernel.py", "config.py", "decay_ptx.py",
                 "decode_compile.py",
                 "decode_config.py", "decode_kernel.py", "fragment_stores.py", "fwd_mma.py", "fwd_pipelined.py",
                 "fwd_wgmma.py", "fwd_wgmma_gram.py", "fwd_wgmma_scaled.py", "fwd_ws.py", "fwd_ws4.py", "fwd_ws_wy.py", "gmem_vector_io.py", "gmem_views.py",
                 "launch_abi.py", "seq_bounds.py", "stmatrix_map.py", "tf32_fragments.py",
                 "wgmma_fragments.py")
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
                f"dh0={cfg.dh0_dtype or '-'}{' ckpt' if cfg.checkpoints else ''}"
                f"{' U' if cfg.forward_values else ''}"
                f"{' vec-wide' if cfg.vec_wide_loads else ''}"
                f"{' vec-fast-decay' if getattr(cfg, 'vec_fast_decay', False) else ''}"
                f"{' vec-tf32' if getattr(cfg, 'vec_tf32_adjoints', False) else ''}"
                f"{' pipelined' if cfg.chain_pipeline else ''}"
                f"{' wgmma' if cfg.chain_wgmma or cfg.grads_wgmma else ''}"
                f"{' async' if getattr(cfg, 'chain_async', False) else ''}"
                f"{' staged-do' if getattr(cfg, 'chain_staged_do', False) else ''}"
                f"{' bulk-rows' if getattr(cfg, 'chain_bulk_rows', False) else ''}")
    if hasattr(cfg, "block_v"):  # decode_config.FrostDecodeConfig
        flags = "".join(s for on, s in ((cfg.use_l2norm, " l2"), (cfg.has_pool, " pool"),
                                         (cfg.safe_gate, " safe"), (cfg.beta_sigmoid, " sig"),
                                         (cfg.neg_eigval, " neg"), (cfg.linear_gate, " lin"),
                                         (cfg.checkpoint_every, f" ck{cfg.checkpoint_every}"),
                                         (cfg.contiguous_channels, " vec")) if on)
        return (f"decode {cfg.family} H{cfg.H}/HK{cfg.HK}/HV{cfg.HV} K{cfg.K} V{cfg.V} "
                f"BV{cfg.block_v} {cfg.io_dtype} {cfg.state_dtype}{flags}")
    state = f"{cfg.state_dtype} h0={int(cfg.has_initial_state)} ht={int(cfg.has_final_state)}"
    flags = "".join(s for on, s in ((cfg.use_l2norm, " l2"), (cfg.gate_align16, " g16"),
                                     (cfg.write_checkpoints, " ckpt"), (cfg.write_values, " U"),
                                     (not getattr(cfg, "write_output", True), " no-out"),
                                     (getattr(cfg, "pipelined", False), " long")) if on)
    # the product's kernel layer depends on the arch too (compile_kernel.product_algorithm),
    # which a config does not hold: "fwd"; the test tooling's experiment configs name theirs,
    # with their knobs (frost_fwd_experiments.py)
    kernel = getattr(cfg, "kernel_label", "fwd")
    return (f"{kernel} {cfg.family} H{cfg.H}/HK{cfg.HK}/HV{cfg.HV} K{cfg.K} V{cfg.V} "
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
    flavour its libraries were built for, the TVM-FFI release, the host machine type and
    the kernel sources."""
    import importlib.metadata

    import cutlass
    from cutlass.base_dsl.version_info import CUDA_VERSION

    try:
        tvm_ffi = importlib.metadata.version("apache-tvm-ffi")
    except importlib.metadata.PackageNotFoundError:
        tvm_ffi = "-"
    return {"cutlass_dsl": str(cutlass.__version__),
            "dsl_cuda": f"{CUDA_VERSION.major}.{CUDA_VERSION.minor}", "tvm_ffi": tvm_ffi,
            "machine": platform.machine(), "sources": source_hash()}


@functools.cache
def host_id(host_target: str | None = None) -> str:
    """The CPU a kernel's host code targets: `host_target` (an LLVM target, e.g.
    GENERIC_X86_64) when given, else this machine's (its CPU feature flags: code built for
    one CPU may use instructions another lacks)."""
    if host_target:
        return host_target
    flags = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next((line for line in f if line.startswith(("flags", "Features"))), "")
    except OSError:
        pass
    digest = hashlib.sha256(" ".join(sorted(flags.split(":", 1)[-1].split())).encode())
    return f"native-{platform.machine()}-{digest.hexdigest()[:12]}"


def key_fields(cfg, arch: str, ffi: str, tools: dict[str, str],
               host: str | None = None) -> dict:
    """ffi: the kernel's host calling convention (compile_kernel.FFI_CONVENTIONS); host:
    host_id() of the CPU its host code targets (default: this machine's). The TVM-FFI
    release keys only TVM-FFI kernels."""
    tools = {k: v for k, v in tools.items() if ffi == "tvm" or k != "tvm_ffi"}
    return {"format": FORMAT, "config": dataclasses.asdict(cfg), "arch": arch, "ffi": ffi,
            "host": host or host_id(), **tools}


def entry_key(cfg, arch: str, ffi: str, tools: dict[str, str] | None = None,
              host: str | None = None) -> str:
    fields = key_fields(cfg, arch, ffi, toolchain() if tools is None else tools, host)
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

    def load(self, cfg: FrostFwdConfig, arch: str, ffi: str, host_target: str | None = None):
        """The stored kernel for (cfg, arch, calling convention ffi, host code for
        host_target: default this machine) as a compiled_kernel.CompiledKernel, or None (no
        entry; or a bad one, with a KernelStoreWarning)."""
        tools = toolchain()
        host = host_id(host_target)
        key = entry_key(cfg, arch, ffi, tools, host)
        path = self.sidecar(key)
        if not path.is_file():
            return None
        try:
            entry = json.loads(path.read_text())
            # compared as JSON reads them back: tuple fields come back as lists
            expected = json.loads(json.dumps(key_fields(cfg, arch, ffi, tools, host)))
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

        return CompiledKernel(fn, ffi, cfg, host_target=host_target)

    def save(self, cfg: FrostFwdConfig, arch: str, kernel) -> Path:
        """Export a compiled_kernel.CompiledKernel (compile_fwd's or compile_bwd's result for
        cfg and arch) as an entry; returns the entry's sidecar path. Raises OSError / the
        DSL's errors on failure."""
        ffi = kernel.ffi
        host = host_id(getattr(kernel, "host_target", None))
        key = entry_key(cfg, arch, ffi, host=host)
        data = _dump_object(kernel.fn, symbol_prefix(key), ffi)
        digest = hashlib.sha256(data).hexdigest()
        self.root.mkdir(parents=True, exist_ok=True)
        obj = self.root / f"{key}-{digest[:12]}.o"
        _write_atomic(obj, data)
        entry = {**key_fields(cfg, arch, ffi, toolchain(), host), "key": key, "object": obj.name,
                 "sha256": digest, "bytes": len(data), "describe": describe(cfg)}
        path = self.sidecar(key)
        _write_atomic(path, json.dumps(entry, indent=1, sort_keys=True).encode())
        return path

    @contextlib.contextmanager
    def compiling(self, cfg, arch: str, ffi: str) -> Iterator[None]:
        """Held while this process compiles (cfg, arch, ffi): another process that wants the
        same kernel waits here, then finds the entry instead of compiling it again. A
        cache folder that cannot be written is used without the lock."""
        key = entry_key(cfg, arch, ffi)
        try:
            import fcntl

            self.root.mkdir(parents=True, exist_ok=True)
            handle = open(self.root / f".{key}.lock", "a+b")
        except (ImportError, OSError):
            yield
            return
        with handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

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


def default_root() -> Path:
    """The per-user cache folder: ${XDG_CACHE_HOME:-~/.cache}/cudnn-pygraph/frost."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cudnn-pygraph" / "frost"


def active_store() -> KernelStore | None:
    """The cache this process uses (None: turned off). The environment is read on every
    call, so tests and tools can switch it."""
    root = os.environ.get(STORE_ENV)
    if root is not None and root.strip().lower() in OFF_VALUES:
        return None
    return KernelStore(Path(root.strip()) if root is not None else default_root(),
                       writable=binary_switch(WRITE_ENV, default=True),
                       strict=binary_switch(STRICT_ENV, default=False))


def describe_store() -> str:
    """One line: where the cache is and what it holds (`python -m cudnn env`)."""
    store = active_store()
    if store is None:
        return f"off ({STORE_ENV}={os.environ.get(STORE_ENV)!r})"
    entries = store.entries() if store.root.is_dir() else []
    size = sum(e.get("bytes") or 0 for e in entries)
    mode = "read-only" if not store.writable else "strict" if store.strict else "read-write"
    return f"{store.root} ({len(entries)} kernels, {size / 2**20:.1f} MiB, {mode})"


def load_or_compile(cfg, arch: str, ffi: str, compile_fn: Callable[[], object],
                    device: object = None):
    """The kernel for (cfg, arch, ffi): from the active cache, else compile_fn() (then
    added to the cache). A kernel precompiled for a generic host in the DSL's own calling
    convention (`python -m cudnn precompile` without a GPU) serves when the cache has no
    kernel in ffi for this machine. A compile longer than LOG_COMPILE_SECONDS logs a line
    naming the kernel, the device (`device`, else the arch) and the time."""
    store = active_store()
    if store is None:
        return _timed_compile(cfg, arch, ffi, compile_fn, device, None)
    fn = store.load(cfg, arch, ffi)
    if fn is None:
        fn = store.load(cfg, arch, "cute", GENERIC_X86_64)
    if fn is not None:
        return fn
    if store.strict:
        raise KernelStoreMiss(
            f"FROST: {STRICT_ENV}=1 and {store.root} has no {arch} {ffi}-convention "
            f"kernel for {describe(cfg)} ({cfg})")
    with store.compiling(cfg, arch, ffi) if store.writable else contextlib.nullcontext():
        fn = store.load(cfg, arch, ffi)  # another process may have compiled it meanwhile
        if fn is not None:
            return fn
        fn = _timed_compile(cfg, arch, ffi, compile_fn, device, store if store.writable else None)
        if store.writable:
            try:
                store.save(cfg, arch, fn)
            except Exception as e:  # a cache that cannot take the entry costs only the entry
                warnings.warn(f"FROST kernel cache: could not add {describe(cfg)} to "
                              f"{store.root} ({type(e).__name__}: {str(e)[:200]})",
                              KernelStoreWarning, stacklevel=3)
    return fn


def _timed_compile(cfg, arch, ffi, compile_fn, device, store):
    start = time.perf_counter()
    fn = compile_fn()
    seconds = time.perf_counter() - start
    if seconds > LOG_COMPILE_SECONDS:
        where = f"; cached in {store.root}" if store is not None else "; no kernel cache"
        target = f"{arch} ({device})" if device is not None else arch
        _log.info("FROST: compiled %s for %s, %s convention, in %.1f s%s", describe(cfg),
                  target, ffi, seconds, where)
    return fn


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
