"""`python -m cudnn env`: what is installed, which engines load, why the others do not.

Prints, without running anything on a device: this package's version and where it is
imported from; the optional packages and their versions (torch and its devices, cuda-tile
and its compiler, the CuTe DSL, TVM-FFI, cuDNN, flash-linear-attention); the C++
extension and the cuDNN backend's state; every engine of the manifest, loaded or absent
with the reason, and what each loaded one says about this process (no GPU, no compiler,
...); the kernel caches, where they are and what they hold.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import os
import platform
import sys
from collections.abc import Sequence

import cudnn

DISTRIBUTIONS = ("torch", "cuda-tile", "nvidia-cuda-tileiras", "nvidia-cutlass-dsl",
                 "apache-tvm-ffi", "nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "fla-core",
                 "flash-linear-attention", "absl-py")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def package_lines() -> list[str]:
    lines = [f"cudnn-pygraph {cudnn.__version__} from {os.path.dirname(cudnn.__file__)}"
             f" ({len(cudnn.__path__)} source folder(s))",
             f"python {platform.python_version()} ({sys.executable}), {platform.platform()}"]
    width = max(map(len, DISTRIBUTIONS))
    for dist in DISTRIBUTIONS:
        lines.append(f"  {dist:<{width}}  {_version(dist) or '-'}")
    return lines


def device_lines() -> list[str]:
    try:
        import torch
    except ImportError:
        return ["devices: torch is not installed"]
    if not torch.cuda.is_available():
        return [f"devices: none visible to torch {torch.__version__} "
                f"(CUDA build {torch.version.cuda or 'none'})"]
    lines = [f"devices: {torch.cuda.device_count()} (torch {torch.__version__}, "
             f"CUDA {torch.version.cuda})"]
    for i in range(torch.cuda.device_count()):
        major, minor = torch.cuda.get_device_capability(i)
        lines.append(f"  {i}: {torch.cuda.get_device_name(i)}, sm_{major}{minor}")
    return lines


def backend_lines() -> list[str]:
    """The extension and the cuDNN library, as the planner sees them (a matmul graph)."""
    from cudnn.cli.shapes import matmul_graph

    try:
        ext = importlib.import_module("cudnn._pybind_module")
        where = f"loaded from {ext.__file__}"
    except ImportError as e:
        where = f"not importable ({e})"
    graph = matmul_graph(1, 64, 64, 64)
    entries = graph.backend_plan_entries()
    row = graph.explain_plans().backend
    state = f"{len(entries)} plan(s) for a sample matmul" if entries else f"declines: {row.declined}"
    return [f"C++ extension cudnn._pybind_module: {where}", f"cuDNN backend: {state}"]


def engine_lines() -> list[str]:
    from cudnn.engines import manifest

    lines = ["engines (manifest):"]
    for family in manifest.MANIFEST:
        for slot in family.engine_slots:
            engine = manifest.load_engine(family, slot)
            head = f"  {family.id_of(slot):>6}  {slot.name:<18}"
            if isinstance(engine, manifest.EngineAbsence):
                lines.append(f"{head} absent: {engine.reason}")
                continue
            why = _runtime_reason(slot)
            lines.append(f"{head} {'can run here' if why is None else 'loaded; ' + why}")
    return lines


def _runtime_reason(slot) -> str | None:
    """What the engine's package says about running in this process (None: it can): its
    `runtime_reason(engine)` (FROST: runtime_probe.py, cuTile: engine_gates.py)."""
    package = slot.module.rsplit(".", 1)[0]
    for name in ("runtime_probe", "engine_gates"):
        try:
            module = importlib.import_module(f"{package}.{name}")
        except ImportError:
            continue
        if hasattr(module, "runtime_reason"):
            return module.runtime_reason(slot.name)
    return None


def cache_lines() -> list[str]:
    lines = ["kernel caches:"]
    try:
        from cudnn.linear_attention.frost.kernels import kernel_store
    except ImportError as e:
        lines.append(f"  FROST: unavailable ({e})")
    else:
        lines.append(f"  FROST: {kernel_store.describe_store()}")
    lines.append(f"  cuTile: {_cutile_cache()}")
    return lines


def _cutile_cache() -> str:
    try:
        from cudnn.linear_attention.cutile import kernel_cache
    except ImportError as e:
        return f"unavailable ({e})"
    return kernel_cache.describe_cache()


def report() -> str:
    lines = package_lines() + device_lines() + backend_lines() + engine_lines() + cache_lines()
    return "\n".join(lines)


def main(argv: Sequence[str]) -> None:
    if len(argv) > 1:
        from absl import app
        raise app.UsageError(f"env takes no arguments, got {list(argv[1:])}")
    print(report())
