"""Handle, stream and buffer spellings the backend accepts (CPU: no handle is created)."""

import pytest

from cudnn.backend import handles
from cudnn.backend.compiled_plan import buffer_address


class TorchLikeStream:
    cuda_stream = 0x5000


class CupyLikeStream:
    ptr = 0x6000


class HoldsHandle:
    handle = 0x7000


def test_handle_address_accepts_every_spelling():
    assert handles.handle_address(None) is None
    assert handles.handle_address(0x1234) == 0x1234
    assert handles.handle_address(HoldsHandle()) == 0x7000
    assert handles.handle_address(handles.BackendHandle(0x4242)) == 0x4242


@pytest.mark.parametrize("bad", [True, 1.5, "0x10", object()])
def test_handle_address_refuses_what_is_not_a_handle(bad):
    with pytest.raises(TypeError, match="expected a cuDNN handle"):
        handles.handle_address(bad)


def test_a_backend_handle_needs_an_address_and_refuses_use_after_close(monkeypatch):
    with pytest.raises(ValueError, match="non-zero"):
        handles.BackendHandle(0)
    destroyed = []

    class Ext:
        def destroy_handle(self, address):
            destroyed.append(address)

    monkeypatch.setattr(handles.loader, "load", lambda: Ext())
    handle = handles.BackendHandle(0x99)
    handle.close()
    handle.close()  # once only
    assert destroyed == [0x99]
    with pytest.raises(RuntimeError, match="closed"):
        handles.handle_address(handle)


def test_stream_address_accepts_ints_and_framework_streams():
    assert handles.stream_address(None) == 0
    assert handles.stream_address(0x10) == 0x10
    assert handles.stream_address(TorchLikeStream()) == 0x5000
    assert handles.stream_address(CupyLikeStream()) == 0x6000
    with pytest.raises(TypeError, match="expected a CUDA stream"):
        handles.stream_address("default")


class HostArray:
    __array_interface__ = {"data": (0x8000, False), "shape": (1,), "typestr": "<f4"}


def test_buffer_address_of_each_buffer_kind():
    torch = pytest.importorskip("torch")
    t = torch.zeros(4)
    assert buffer_address(t, "x") == t.data_ptr()
    assert buffer_address(0x20, "x") == 0x20
    assert buffer_address(HostArray(), "x") == 0x8000
    with pytest.raises(TypeError, match="the buffer for uid 3: expected a framework tensor"):
        buffer_address("not a buffer", "the buffer for uid 3")
    with pytest.raises(TypeError):
        buffer_address(True, "x")


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
