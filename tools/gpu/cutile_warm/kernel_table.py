"""The cuTile kernels of the engines, by Python function name, and their cache keys.

A specialization (mangled symbol) names its kernel's Python function; `kernels()`
imports every module of the engines' kernels package and maps those names to the
`ct.kernel` objects.  `cache_key` and `compile_into_cache` both go through the kernel's
own `_compile`, the method cuTile's launch path calls on a miss, so the front end, the
bytecode, the key and the stored entry are produced by the code the GPU runs.
"""
from __future__ import annotations

import importlib
import pkgutil

KERNEL_PACKAGE = "cudnn.linear_attention.cutile.kernels"


def kernels(package: str = KERNEL_PACKAGE) -> dict:
    import cuda.tile as ct
    pkg = importlib.import_module(package)
    table = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        module = importlib.import_module(f"{package}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, ct.kernel):
                table[value._pyfunc.__name__] = value
    return table


def signature_of(symbol: str):
    """(kernel function name, KernelSignature) of a mangled symbol."""
    from cuda.tile.compilation._name_mangling import demangle_kernel_name
    return demangle_kernel_name(symbol)


class _KeyOnly(Exception):
    pass


def cache_key(kernel, signature, sm: tuple[int, int] = (9, 0)) -> str:
    """The disk-cache key cuTile's launch path looks up for this specialization.

    Runs the front end only: the lookup is intercepted where compile_tile makes it,
    before tileiras would run.  Needs tileiras installed (its version is part of the key)
    and a cache dir configured (cuTile skips the key without one)."""
    import cuda.tile._compile as compile_module
    from cuda.tile._cext import default_tile_context
    if default_tile_context.config.cache_dir is None:
        raise RuntimeError("cuTile's disk cache is off (CUDA_TILE_CACHE_DIR unset when "
                           "cuda.tile was imported): no key to compute")
    seen: list[str] = []

    def lookup(cache_dir, key):
        seen.append(key)
        raise _KeyOnly()

    real = compile_module.cache_lookup
    compile_module.cache_lookup = lookup
    try:
        kernel._compile(signature, default_tile_context, sm)
    except _KeyOnly:
        pass
    finally:
        compile_module.cache_lookup = real
    if len(seen) != 1:
        raise RuntimeError(f"cuTile computed {len(seen)} cache keys for one compile "
                           "(disk cache disabled? compiler version unknown?)")
    return seen[0]


def compile_into_cache(kernel, signature, sm: tuple[int, int] = (9, 0)) -> bytes:
    """Compile (or find) the specialization through cuTile's own path; returns the cubin.
    cuTile stores it in its configured disk cache under `cache_key`."""
    from cuda.tile._cext import default_tile_context
    cubin, *_ = kernel._compile(signature, default_tile_context, sm)
    return cubin
