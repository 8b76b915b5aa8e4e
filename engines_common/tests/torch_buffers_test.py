"""torch_buffers: caller buffers as zero-copy torch views, streams, handle devices."""
from __future__ import annotations

import types

import pytest

from cudnn.linear_attention.common.torch_buffers import (as_torch, handle_device_reason,
                                                        torch_stream)

torch = pytest.importorskip("torch")


def test_torch_tensors_pass_through_and_none_stays_none():
    t = torch.zeros(3)
    assert as_torch(t, "q") is t and as_torch(None, "q") is None


def test_dlpack_exporters_are_viewed_not_copied():
    np = pytest.importorskip("numpy")
    a = np.zeros(4, dtype=np.float32)
    view = as_torch(a, "q")
    view[1] = 5.0                       # writes must land in the caller's buffer
    assert a[1] == 5.0


def test_other_objects_are_refused_naming_the_port():
    with pytest.raises(TypeError, match="'beta': expected a torch tensor or a DLPack"):
        as_torch([1.0, 2.0], "beta")


def test_streams_other_than_none_and_ints_pass_through():
    s = object()
    assert torch_stream(s) is s


@pytest.mark.parametrize("device, declined", [(None, False), ("cuda", False), ("cpu", True)])
def test_handle_device_reason(device, declined):
    graph = types.SimpleNamespace(handle=None if device is None else
                                  types.SimpleNamespace(device=torch.device(device)))
    msg = handle_device_reason(graph, "eng")
    assert (msg == f"eng: runs on CUDA devices; the graph's handle is on {device}") == declined
    assert declined or msg is None


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
