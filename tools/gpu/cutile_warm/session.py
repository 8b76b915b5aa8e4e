"""One process set up to compute keys and compile like the GPU machine would.

`open_session(repo, cache_dir, remote_root)`:
1. puts the repository's source roots on sys.path (tools/pythonpath.py, plus bench/);
2. points cuTile's disk cache at `cache_dir` (CUDA_TILE_CACHE_DIR is read when
   cuda.tile is imported, so this must come first);
3. loads the stub driver (sm_90), imports cuda.tile and the engines' kernels;
4. relocates the kernels' source paths to `remote_root` (source_paths.py).
Returns the kernel table.  A process holds one session (cuda.tile's config is global).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

_opened: tuple | None = None


def add_source_roots(repo: str) -> None:
    """The checkout's source roots and bench/ first on sys.path. Under Bazel (no
    tools/pythonpath.py in the runfiles) the test's own deps already put them there."""
    listing = os.path.join(repo, "tools", "pythonpath.py")
    if not os.path.isfile(listing):
        return
    spec = importlib.util.spec_from_file_location("pythonpath", listing)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for p in reversed([*module.paths(Path(repo)), os.path.join(repo, "bench")]):
        if p not in sys.path:
            sys.path.insert(0, p)


def missing_toolchain() -> str | None:
    """Why keys cannot be computed here, or None."""
    try:
        if importlib.util.find_spec("cuda.tile") is None:
            return "cuda.tile (cuda-tile) is not importable in this Python"
    except ImportError as e:
        return f"cuda.tile is not importable ({e})"
    from cudnn.linear_attention.cutile.kernel_cache import tileiras_path
    if tileiras_path() is None:
        return ("cuTile's compiler tileiras, whose version is part of the cache key, is not "
                "installed (pip install 'cudnn-pygraph[cutile]')")
    if shutil.which("cc") is None:
        return "no C compiler (cc) to build the stub CUDA driver"
    return None


def open_session(repo: str, cache_dir: str, remote_root: str) -> dict:
    global _opened
    want = (os.path.abspath(repo), os.path.abspath(cache_dir), remote_root)
    if _opened is not None:
        if _opened[0] != want:
            raise RuntimeError(f"this process already holds a cuTile session {_opened[0]}; "
                               f"cannot open {want}")
        return _opened[1]
    add_source_roots(repo)
    if "cuda.tile" in sys.modules:
        from cuda.tile._cext import default_tile_context
        default_tile_context.config.cache_dir = want[1]
    else:
        os.environ["CUDA_TILE_CACHE_DIR"] = want[1]
    from .driver_stub import load_stub_driver
    load_stub_driver()
    from .kernel_table import KERNEL_PACKAGE, kernels
    from .source_paths import relocate
    table = kernels()
    relocate(KERNEL_PACKAGE.rsplit(".", 1)[0], want[0], remote_root)
    _opened = (want, table)
    return table
