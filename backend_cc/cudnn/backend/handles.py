"""cuDNN handles for the backend: the caller's `BackendHandle`, and the process defaults.

- `create_handle()` gives a `BackendHandle`, the object to pass as `pygraph(handle=...)` or
  `graph.execute(..., handle=...)`. It exposes `get_stream()`, which is how the router reads
  the stream an execution runs on (a bare int handle cannot say).
- `default_handle()` is the handle a graph without one lowers and executes with: one per
  (thread, CUDA device), created on first use and destroyed at exit. A graph never owns it.
- `handle_address(h)` turns any accepted handle spelling into the `cudnnHandle_t` address
  the extension takes: a BackendHandle, a plain int address, or an object holding one in
  `.handle` / `__int__`.

Creating a handle needs a working GPU: `cudnnCreate` fails on machines without one, which
is how the adapter learns that the backend cannot run here.
"""
from __future__ import annotations

import atexit
import numbers
import sys
import threading
from typing import Any

from cudnn.backend import loader


class BackendHandle:
    """A cuDNN handle created by this package; destroyed by `close()` (or at exit)."""

    def __init__(self, address: int) -> None:
        if not address:
            raise ValueError("BackendHandle: the cudnnHandle_t address must be non-zero")
        self._address = int(address)
        self._closed = False

    @property
    def address(self) -> int:
        if self._closed:
            raise RuntimeError("this cuDNN handle was closed")
        return self._address

    def get_stream(self) -> int:
        """The CUDA stream (as an int address, 0 = the default stream) work is issued on."""
        return int(loader.load().get_stream(self.address))

    def set_stream(self, stream: Any) -> BackendHandle:
        """Bind the handle to `stream`: an int address, or an object with `.cuda_stream`
        (torch.cuda.Stream) or `.ptr` (cupy)."""
        loader.load().set_stream(self.address, stream_address(stream))
        return self

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            _OWNED.discard(self)
            loader.load().destroy_handle(self._address)

    def __int__(self) -> int:
        return self.address

    def __enter__(self) -> BackendHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else hex(self._address)
        return f"BackendHandle({state})"


_OWNED: set[BackendHandle] = set()


def create_handle(stream: Any = None) -> BackendHandle:
    """A new cuDNN handle on the current device (raises CudnnBackendError without a GPU)."""
    handle = BackendHandle(loader.load().create_handle())
    _OWNED.add(handle)
    if stream is not None:
        handle.set_stream(stream)
    return handle


def stream_address(stream: Any) -> int:
    if stream is None:
        return 0
    if isinstance(stream, numbers.Integral) and not isinstance(stream, bool):
        return int(stream)
    for attr in ("cuda_stream", "ptr"):
        value = getattr(stream, attr, None)
        if isinstance(value, numbers.Integral):
            return int(value)
    raise TypeError(f"expected a CUDA stream (an int address, or an object with .cuda_stream "
                    f"or .ptr), got {type(stream).__name__}")


def handle_address(handle: Any) -> int | None:
    """The cudnnHandle_t address of `handle`, or None for no handle."""
    if handle is None:
        return None
    if isinstance(handle, BackendHandle):
        return handle.address
    if isinstance(handle, numbers.Integral) and not isinstance(handle, bool):
        return int(handle)
    inner = getattr(handle, "handle", None)
    if isinstance(inner, numbers.Integral) and not isinstance(inner, bool):
        return int(inner)
    if hasattr(handle, "__int__") and not isinstance(handle, (bool, float)):
        return int(handle)
    raise TypeError(f"expected a cuDNN handle (cudnn.backend.handles.BackendHandle or an int "
                    f"address), got {type(handle).__name__}")


def _current_device() -> int:
    # Only asks torch when torch is already in use: this package never imports it.
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and cuda.is_available() and cuda.is_initialized():
        return int(cuda.current_device())
    return 0


_DEFAULTS: dict[tuple[int, int], BackendHandle] = {}
_DEFAULTS_LOCK = threading.Lock()


def default_handle() -> int:
    """The calling thread's default handle on the current device (created on first use)."""
    key = (threading.get_ident(), _current_device())
    with _DEFAULTS_LOCK:
        handle = _DEFAULTS.get(key)
        if handle is None:
            handle = create_handle()
            _DEFAULTS[key] = handle
        return handle.address


@atexit.register
def _destroy_owned() -> None:
    for handle in list(_OWNED):
        try:
            handle.close()
        except Exception:  # noqa: BLE001 - at exit the library may already be unloading
            pass
