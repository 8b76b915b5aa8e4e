"""route: an eager call skips torch's dispatcher only when nothing the dispatcher provides
(tracing, modes, subclasses, meta, profiling) is in play; a call that records autograd
is told so (DIRECT_AUTOGRAD)."""
from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from cudnn.linear_attention.ops._direct_call import DIRECT, DIRECT_AUTOGRAD, DISPATCHER, route


def needs_dispatcher(values, positions):
    return route(values, positions) == DISPATCHER


def _args(*tensors):
    # tensors interleaved with non-tensor values, as in an op's argument tuple
    values, positions = [], []
    for t in tensors:
        positions.append(len(values))
        values += [t, 0.5]
    return values, positions


def test_plain_cpu_tensors_without_grad_go_direct():
    assert not needs_dispatcher(*_args(torch.randn(3), torch.randn(2, 2), None))


def test_requires_grad_routes_to_the_eager_autograd_unless_grad_is_off():
    x = torch.randn(3, requires_grad=True)
    assert route(*_args(torch.randn(3), x)) == DIRECT_AUTOGRAD
    assert route(*_args(torch.randn(3), None)) == DIRECT
    with torch.no_grad():
        assert route(*_args(torch.randn(3), x)) == DIRECT
    with torch.inference_mode():
        assert route(*_args(torch.randn(3), x)) == DIRECT


def test_meta_and_subclass_tensors_need_the_dispatcher():
    assert needs_dispatcher(*_args(torch.randn(3), torch.empty(3, device="meta")))

    class Sub(torch.Tensor):
        pass

    assert needs_dispatcher(*_args(torch.randn(3).as_subclass(Sub)))


def test_fake_tensor_mode_needs_the_dispatcher():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        x = mode.from_tensor(torch.randn(3)) if hasattr(mode, "from_tensor") else torch.randn(3)
        assert needs_dispatcher(*_args(x))


def test_dispatch_mode_and_profiler_need_the_dispatcher():
    class Seen(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    plain = _args(torch.randn(3))
    with Seen():
        assert needs_dispatcher(*plain)
    with torch.autograd.profiler.profile():
        assert needs_dispatcher(*plain)
    assert not needs_dispatcher(*plain)


def test_vmap_needs_the_dispatcher():
    seen = []

    def body(x):
        seen.append(needs_dispatcher([x], [0]))
        return x

    torch.vmap(body)(torch.randn(4, 3))
    assert seen == [True]


def test_compile_tracing_needs_the_dispatcher():
    seen = []

    def body(x):
        seen.append(needs_dispatcher([x], [0]))
        return x + 1

    torch.compile(body, backend="eager", fullgraph=False)(torch.randn(3))
    assert True in seen


def test_jit_tracing_needs_the_dispatcher():
    seen = []

    def body(x):
        seen.append(needs_dispatcher([x], [0]))
        return x + 1

    torch.jit.trace(body, torch.randn(3), check_trace=False)
    assert seen == [True]
    assert not needs_dispatcher([torch.randn(3)], [0])


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
