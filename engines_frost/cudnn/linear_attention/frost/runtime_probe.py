"""Whether this process and device can run the FROST kernels, and which build serves them.

`runtime_reason(engine, device)` is the engines' last gate: torch with a visible CUDA
device, a kernel build for the device's SM (`KERNEL_ARCHS`), and the CuTe DSL
(nvidia-cutlass-dsl, module `cutlass`, >= MIN_CUTLASS_DSL) importable. The cheap checks
run first; `import cutlass` (about 0.7 s) happens once per process.

`KERNEL_ARCHS` maps an SM (compute capability major * 10 + minor) to the kernel build
that serves it; adding Blackwell means adding rows for 100/103 and their variant.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

#: cutlass.cute features the kernels use appeared in nvidia-cutlass-dsl 4.7.
MIN_CUTLASS_DSL = (4, 7)


@dataclass(frozen=True)
class KernelArch:
    sm: int            # compute capability, major * 10 + minor
    variant: str       # the kernel build serving it


KERNEL_ARCHS: Mapping[int, KernelArch] = MappingProxyType({
    90: KernelArch(90, "sm90 (Hopper: WGMMA + TMA)"),
})


def device_sm(device: Any) -> int:
    """The SM of a CUDA `device` (a torch.device, an index, or None for the current one)."""
    import torch
    major, minor = torch.cuda.get_device_capability(device)
    return major * 10 + minor


@functools.lru_cache(maxsize=1)
def cutlass_dsl_version() -> tuple[tuple[int, ...] | None, str]:
    """(version of the importable `cutlass` module, or None; what was found)."""
    try:
        import cutlass
    except (ImportError, OSError) as exc:   # OSError: its native libraries failed to load
        return None, f"not importable ({type(exc).__name__}: {exc})"
    text = str(getattr(cutlass, "__version__", ""))
    parts = tuple(int(p) for p in re.findall(r"\d+", text)[:3])
    return (parts or None), f"version {text or 'unknown'}"


def kernel_arch(device: Any) -> KernelArch | None:
    """The kernel build for `device`, or None when there is none."""
    return KERNEL_ARCHS.get(device_sm(device))


def runtime_reason(engine: str, device: Any = None) -> str | None:
    """Why `engine` cannot launch on `device` (None: the current CUDA device), or None."""
    try:
        import torch
    except ImportError:
        return f"{engine}: torch is not installed (the kernels launch on torch streams)"
    if not torch.cuda.is_available():
        return f"{engine}: no CUDA device is visible"
    reason = arch_reason(engine, device)
    if reason:
        return reason
    version, found = cutlass_dsl_version()
    if version is None or version < MIN_CUTLASS_DSL:
        want = ".".join(map(str, MIN_CUTLASS_DSL))
        return f"{engine}: needs nvidia-cutlass-dsl (module 'cutlass') >= {want}; {found}"
    return None


def arch_reason(engine: str, device: Any = None) -> str | None:
    """Why there is no kernel build for `device`'s SM, or None."""
    sm = device_sm(device)
    if sm in KERNEL_ARCHS:
        return None
    built = ", ".join(f"sm_{a}" for a in sorted(KERNEL_ARCHS))
    where = "the current CUDA device" if device is None else str(device)
    return f"{engine}: no kernel build for sm_{sm} ({where}); FROST kernels are built for {built}"
