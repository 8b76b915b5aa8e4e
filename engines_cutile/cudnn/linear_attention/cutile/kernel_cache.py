"""The cuTile engines' compiler and kernel cache: where they are, and logging compiles.

cuda.tile compiles a kernel at its first launch with the `tileiras` compiler and keeps the
cubin in its own on-disk cache, which is on by default (per user,
``${XDG_CACHE_HOME:-~/.cache}/cutile-python``; CUDA_TILE_CACHE_DIR moves it, =0 turns it
off) and keyed on the kernel's bytecode (its source and specialisation), the compiler
version and the GPU arch; SQLite makes it safe under concurrent processes. This module
never changes cuda.tile's settings; it only asks.

`tileiras_path()` finds the compiler as cuda.tile does: inside the Python environment
first (the `nvidia-cuda-tileiras`, `nvidia-cuda-nvcc` and `nvidia-nvvm` wheels that
the `cutile` extra brings, under nvidia/cu13/bin), then on PATH, then under
CUDA_HOME, then in the standard toolkit folders (/usr/local/cuda, then /usr/local/cuda-X.Y,
newest first). `first_run` times a plan's first execution, when its kernels are compiled or
loaded from the cache, and logs one line when that took longer than a second (logger
``cudnn.linear_attention.cutile``, INFO).
"""
from __future__ import annotations

import contextlib
import functools
import glob
import importlib.metadata
import importlib.util
import logging
import os
import re
import shutil
import sqlite3
import time
from collections.abc import Iterator

LOG_COMPILE_SECONDS = 1.0
#: the wheels of cuda-tile's `tileiras` extra; cuda.tile uses them only at one CUDA release
TOOLCHAIN_WHEELS = ("nvidia-cuda-tileiras", "nvidia-cuda-nvcc", "nvidia-nvvm")
_log = logging.getLogger("cudnn.linear_attention.cutile")


def _wheel_tileiras() -> str | None:
    """tileiras from the toolchain wheels, when all three are installed at one release."""
    try:
        releases = {tuple(importlib.metadata.version(d).split(".")[:2]) for d in TOOLCHAIN_WHEELS}
    except importlib.metadata.PackageNotFoundError:
        return None
    spec = importlib.util.find_spec("nvidia.cu13") if importlib.util.find_spec("nvidia") else None
    if len(releases) != 1 or spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        found = shutil.which("tileiras", path=os.path.join(root, "bin"))
        if found:
            return found
    return None


def _toolkit_folders(prefix: str = "/usr/local") -> list[str]:
    """The standard toolkit installs under `prefix`: cuda first, then cuda-X.Y by version,
    newest first."""
    versioned = []
    for folder in glob.glob(os.path.join(prefix, "cuda-*")):
        match = re.fullmatch(r"cuda-(\d+)(?:\.(\d+))?", os.path.basename(folder))
        if match:
            versioned.append((int(match[1]), int(match[2] or 0), folder))
    return [os.path.join(prefix, "cuda")] + [f for *_, f in sorted(versioned, reverse=True)]


@functools.cache
def tileiras_path() -> str | None:
    """Where cuda.tile will find its compiler, or None (see the module docstring)."""
    found = _wheel_tileiras() or shutil.which("tileiras")
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    for folder in ([home] if home else []) + _toolkit_folders():
        if found is not None:
            break
        found = shutil.which("tileiras", path=os.path.join(folder, "bin"))
    return found


def cache_dir() -> str | None:
    """cuda.tile's kernel cache folder for this process (None: turned off)."""
    try:
        from cutile_cache._env import get_cache_dir_from_env
    except ImportError:  # another cuda-tile layout: the documented defaults
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        value = os.environ.get("CUDA_TILE_CACHE_DIR", os.path.join(base, "cutile-python"))
        return None if value.strip().lower() in ("0", "off", "none", "") else value
    return get_cache_dir_from_env()


def describe_cache() -> str:
    """One line: the compiler and the kernel cache (`python -m cudnn env`)."""
    compiler = tileiras_path() or "not found (pip install 'cudnn-pygraph[cutile]')"
    folder = cache_dir()
    if folder is None:
        return f"compiler {compiler}; kernel cache off (CUDA_TILE_CACHE_DIR)"
    db = os.path.join(folder, "cache.db")
    held = "empty"
    if os.path.isfile(db):
        try:
            with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
                count, size = conn.execute("SELECT COUNT(*), COALESCE(SUM(blob_size), 0) "
                                           "FROM cache").fetchone()
            held = f"{count} kernels, {size / 2**20:.1f} MiB"
        except sqlite3.Error as e:
            held = f"unreadable ({e})"
    return f"compiler {compiler}; kernel cache {folder} ({held})"


@contextlib.contextmanager
def first_run(plan: object, what: str, device: object) -> Iterator[None]:
    """Times the block on `plan`'s first execution (when cuda.tile compiles its kernels or
    loads them from its cache) and logs a line if that took longer than a second."""
    if getattr(plan, "_cutile_ran", False):
        yield
        return
    start = time.perf_counter()
    yield
    plan._cutile_ran = True
    seconds = time.perf_counter() - start
    if seconds > LOG_COMPILE_SECONDS:
        _log.info("cuTile: first run of %s on %s took %.1f s (kernels compiled, or loaded "
                  "from %s)", what, device, seconds, cache_dir() or "nowhere: cache off")
