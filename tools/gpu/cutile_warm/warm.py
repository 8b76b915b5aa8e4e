"""Fill a cuTile disk cache with given specializations, in worker processes.

Each worker opens a session (session.py) on the shared cache dir and takes one symbol
at a time: it computes the key cuTile will look up, skips the symbol when the cache
already holds that key, and otherwise compiles it through the kernel's own `_compile`
(front end, tileiras, ptxas), which stores the entry exactly as a GPU-side JIT would.
sqlite serialises the workers' writes.  tileiras is single-threaded, so one worker per
core is the useful parallelism.
"""
from __future__ import annotations

import multiprocessing
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Outcome:
    symbol: str
    kernel: str
    status: str            # "cached" | "compiled" | "failed"
    key: str | None
    seconds: float
    cubin_bytes: int = 0
    error: str = ""


_session: dict | None = None
_cache_dir: str | None = None


def _init_worker(sys_path: list[str], repo: str, cache_dir: str, remote_root: str) -> None:
    global _session, _cache_dir
    import sys
    sys.path[:0] = [p for p in sys_path if p not in sys.path]
    from .session import open_session
    _session = open_session(repo, cache_dir, remote_root)
    _cache_dir = cache_dir


def warm_one(symbol: str, sm: tuple[int, int] = (9, 0)) -> Outcome:
    """Key, then (unless cached) compile one specialization in this process's session."""
    from .cache_db import has_key
    from .kernel_table import cache_key, compile_into_cache, signature_of
    t0 = time.perf_counter()
    name, key = symbol.split("_K")[0], None
    try:
        name, signature = signature_of(symbol)
        kernel = _session.get(name)
        if kernel is None:
            raise LookupError(f"no cuTile kernel named {name!r} in the engines' kernels "
                              f"(known: {sorted(_session)})")
        key = cache_key(kernel, signature, sm)
        if has_key(_cache_dir, key):
            return Outcome(symbol, name, "cached", key, time.perf_counter() - t0)
        cubin = compile_into_cache(kernel, signature, sm)
        if not has_key(_cache_dir, key):
            raise RuntimeError(f"compiled, but cuTile stored no entry under {key}")
        return Outcome(symbol, name, "compiled", key, time.perf_counter() - t0, len(cubin))
    except Exception as e:   # report and go on: one bad specialization must not stop the rest
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return Outcome(symbol, name, "failed", key, time.perf_counter() - t0,
                       error=f"{type(e).__name__}: {first[:300]}")


def _warm_task(args) -> Outcome:
    return warm_one(*args)


def warm(symbols: list[str], *, repo: str, cache_dir: str, remote_root: str, jobs: int,
         sm: tuple[int, int] = (9, 0), on_outcome=None) -> list[Outcome]:
    """Run `warm_one` over `symbols` in `jobs` spawned workers; `on_outcome(i, outcome)`
    is called in the parent as each finishes."""
    import sys
    ctx = multiprocessing.get_context("spawn")
    outcomes = []
    with ctx.Pool(max(1, jobs), initializer=_init_worker,
                  initargs=(list(sys.path), repo, cache_dir, remote_root)) as pool:
        for i, outcome in enumerate(pool.imap_unordered(
                _warm_task, [(s, sm) for s in symbols], chunksize=1)):
            outcomes.append(outcome)
            if on_outcome is not None:
                on_outcome(i, outcome)
    return outcomes
