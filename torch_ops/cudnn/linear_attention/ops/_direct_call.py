"""When an eager op call may skip torch's dispatcher and run the op's kernel directly.

Going through `torch.ops.cudnn.<op>` costs ~8-10 us of Python and C++ dispatch per call
(autograd key, the custom-op wrappers, the dynamo-disable guard) before our kernel runs;
a cached call's own work is a few microseconds, so on the hot path (inference, or any
call that needs no autograd) the dispatcher is most of the overhead.

The kernel the dispatcher would reach for a plain CPU/CUDA call is the very function we
registered, so calling it directly gives the same results, as long as nothing the
dispatcher provides is in play. `needs_dispatcher(tensors)` says when something is:
- torch.compile tracing (the op must appear in the graph);
- an active TorchDispatchMode or TorchFunctionMode (FakeTensorMode, FlopCounterMode,
  user modes), a functorch transform (vmap, grad), or the autograd profiler (the op should
  show up in its trace);
- a tensor subclass (FakeTensor, FunctionalTensor, DTensor, ...) or a tensor outside
  cpu/cuda (meta tensors go to the fake kernel);
- autograd: grad mode on and any input requires grad (the autograd node is recorded by
  the dispatcher's Autograd key).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

_C = torch._C


def needs_dispatcher(values: Sequence[object], tensor_positions: Sequence[int]) -> bool:
    """True when the call with these argument values (tensors at `tensor_positions`, each
    a tensor or None) must go through torch.ops (see the module docstring)."""
    if (torch.compiler.is_compiling() or _C._len_torch_dispatch_stack()
            or _C._is_torch_function_mode_enabled() or _C._are_functorch_transforms_active()
            or _C._autograd._profiler_enabled()):
        return True
    grad = torch.is_grad_enabled()
    plain = torch.Tensor
    for position in tensor_positions:  # a plain loop: this runs on every eager call
        t = values[position]
        if t is None:
            continue
        if type(t) is not plain or not (t.is_cuda or t.is_cpu):
            return True
        if grad and t.requires_grad:
            return True
    return False
