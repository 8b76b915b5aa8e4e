"""Replay host code through cuTile's real launch path against a cache, with no compiler.

`LaunchPathCheck` is what the GPU machine will do, minus the GPU: every `ct.launch` of
the replayed host code derives its specialization, computes its key and looks it up in
the session's cache dir (session.py) exactly as on the GPU, then "launches" on the stub
driver.  tileiras is replaced by a failure, so a launch that would JIT on the GPU is
counted as a miss (kernel and symbol kept) instead of compiling.
"""
from __future__ import annotations

from .recorder import FreshKernels, _as_device


class _Miss(Exception):
    pass


class LaunchPathCheck:
    """Context manager: `launches`, `hits` (distinct keys found) and `misses` (symbols)."""

    def __init__(self):
        self.launches = 0
        self.hits: set[str] = set()
        self.misses: dict[str, str] = {}   # symbol -> kernel name

    def __enter__(self) -> "LaunchPathCheck":
        import cuda.tile as ct
        import cuda.tile._compile as compile_module
        self._ct, self._cm = ct, compile_module
        self._launch = ct.launch
        self._lookup, self._compile_cubin = compile_module.cache_lookup, compile_module.compile_cubin
        self._compile_tile = compile_module.compile_tile
        check = self

        def lookup(cache_dir, key):
            cubin = check._lookup(cache_dir, key)
            if cubin is not None:
                check.hits.add(key)
            return cubin

        def compile_tile(ann_func, signatures, *args, **kwargs):
            try:
                return check._compile_tile(ann_func, signatures, *args, **kwargs)
            except _Miss:
                for s in signatures:
                    name = ann_func.pyfunc.__name__
                    symbol = s.symbol or s.with_mangled_symbol(name).symbol
                    check.misses[symbol] = name
                raise

        def no_compiler(*args, **kwargs):
            raise _Miss()

        fresh = FreshKernels()

        def launch(stream, grid, kernel, args, *rest, **kw):
            check.launches += 1
            try:
                check._launch(0, grid, fresh(kernel), tuple(_as_device(a) for a in args),
                              *rest, **kw)
            except _Miss:
                pass

        compile_module.cache_lookup = lookup
        compile_module.compile_cubin = no_compiler
        compile_module.compile_tile = compile_tile
        ct.launch = launch
        return self

    def __exit__(self, *exc) -> bool:
        self._ct.launch = self._launch
        self._cm.cache_lookup = self._lookup
        self._cm.compile_cubin = self._compile_cubin
        self._cm.compile_tile = self._compile_tile
        return False
