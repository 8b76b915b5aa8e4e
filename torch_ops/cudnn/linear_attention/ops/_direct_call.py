"""How an eager op call is routed: through torch's dispatcher, or straight to our kernel.

Going through `torch.ops.cudnn.<op>` costs ~8-10 us of Python and C++ dispatch per call
(autograd key, the custom-op wrappers, the dynamo-disable guard) before our kernel runs,
and a call that records autograd pays torch's custom-op autograd wrapper on top (~25 us
more on the build machine); a cached call's own work is a few microseconds.

The kernel the dispatcher reaches for a plain CPU/CUDA call is the very function we
registered, and the autograd the op registers is our own setup_context/backward pair, so
an eager call can run them directly (`route`): DIRECT runs the kernel; DIRECT_AUTOGRAD
runs it inside a torch.autograd.Function built from the same setup_context/backward
(_op_factory.py). Everything the dispatcher provides sends the call to DISPATCHER:
- torch.compile or torch.jit.trace tracing (the op must appear in the graph);
- an active TorchDispatchMode or TorchFunctionMode (FakeTensorMode, FlopCounterMode,
  user modes), a functorch transform (vmap, grad), or the autograd profiler (the op should
  show up in its trace);
- a tensor subclass (FakeTensor, FunctionalTensor, DTensor, ...) or a tensor outside
  cpu/cuda (meta tensors go to the fake kernel).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

_C = torch._C


DISPATCHER, DIRECT, DIRECT_AUTOGRAD = "dispatcher", "direct", "direct_autograd"


# bound once: every eager call asks each of them (a global attribute chain costs more)
_is_compiling = torch.compiler.is_compiling
_dispatch_modes = _C._len_torch_dispatch_stack
_function_modes = _C._is_torch_function_mode_enabled
_functorch = _C._are_functorch_transforms_active
_profiling = _C._autograd._profiler_enabled
_tracing_state = _C._get_tracing_state
_grad_enabled = torch.is_grad_enabled
_PLAIN = torch.Tensor


def route(values: Sequence[object], tensor_positions: Sequence[int]) -> str:
    """How to run a call with these argument values (tensors at `tensor_positions`, each a
    tensor or None); see the module docstring."""
    if (_is_compiling() or _dispatch_modes() or _function_modes() or _functorch()
            or _profiling() or _tracing_state() is not None):
        return DISPATCHER
    grad = _grad_enabled()
    records = False
    for position in tensor_positions:  # a plain loop: this runs on every eager call
        t = values[position]
        if t is None:
            continue
        if type(t) is not _PLAIN or not (t.is_cuda or t.is_cpu):
            return DISPATCHER
        records = records or (grad and t.requires_grad)
    return DIRECT_AUTOGRAD if records else DIRECT
