"""Record the kernel specializations that host code would launch, without launching.

`LaunchRecorder` runs host orchestration (the engines' chunked_fwd / chunked_bwd) on CPU
tensors.  Each `ct.launch` goes through cuTile's real launch path, which derives the
specialization (KernelSignature) from the arguments exactly as on the GPU: every torch
tensor is handed over as a `DeviceView` (its dtype, shape, strides and address exported
as CUDA memory), and the stub driver (driver_stub.py) answers the device queries as an
sm_90 GPU.  Where cuTile would compile, the recorder keeps the signature and stops that
launch.  A specialization is identified by its mangled symbol, which round-trips the
whole signature (cuda.tile.compilation demangles it), so a record is a list of strings.
"""
from __future__ import annotations

from dataclasses import dataclass

from .driver_stub import load_stub_driver
from .fake_device_array import DeviceView


@dataclass(frozen=True)
class Specialization:
    kernel: str        # the kernel's Python function name
    symbol: str        # mangled symbol = kernel name + calling convention + constraints
    sm: tuple[int, int]


class _Recorded(Exception):
    """Raised inside ct.launch once the signature is known: nothing is compiled."""


class FreshKernels:
    """Per-use copies of kernels: cuTile's dispatcher keeps launched specializations in
    memory per kernel object and would skip the compile step (where recording and cache
    checks happen) for any specialization this process already launched."""

    def __init__(self):
        self._copies: dict[int, object] = {}

    def __call__(self, kernel):
        copy = self._copies.get(id(kernel))
        if copy is None:
            copy = self._copies[id(kernel)] = (kernel, kernel.replace_hints())
        return copy[1]


def _as_device(arg):
    import torch
    if isinstance(arg, torch.Tensor):
        return DeviceView.of(arg)
    return arg


class LaunchRecorder:
    """Context manager: `ct.launch` records (kernel, specialization) instead of running.

    `specializations` keeps first-seen order without duplicates; `launches` counts every
    launch, recorded or repeated."""

    def __init__(self):
        self.specializations: list[Specialization] = []
        self.launches = 0
        self._seen: set[str] = set()

    def __enter__(self) -> "LaunchRecorder":
        load_stub_driver()
        import cuda.tile as ct
        self._ct = ct
        self._launch, self._compile = ct.launch, ct.kernel._compile
        recorder = self

        def compile_hook(kernel, signature, context, compute_capability=None):
            name = kernel._pyfunc.__name__
            if signature.symbol is None:
                signature = signature.with_mangled_symbol(name)
            recorder._add(Specialization(name, signature.symbol,
                                         tuple(compute_capability or (0, 0))))
            raise _Recorded()

        def launch(stream, grid, kernel, args, *rest, **kw):
            recorder.launches += 1
            try:
                recorder._launch(0, grid, fresh(kernel), tuple(_as_device(a) for a in args),
                                 *rest, **kw)
            except _Recorded:
                pass

        fresh = FreshKernels()
        ct.kernel._compile = compile_hook
        ct.launch = launch
        return self

    def _add(self, spec: Specialization) -> None:
        if spec.symbol not in self._seen:
            self._seen.add(spec.symbol)
            self.specializations.append(spec)

    def __exit__(self, *exc) -> bool:
        self._ct.launch = self._launch
        self._ct.kernel._compile = self._compile
        return False
