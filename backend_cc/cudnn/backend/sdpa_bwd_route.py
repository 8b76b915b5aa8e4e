"""Which lowering an IR `sdpa_backward` node gets: cuDNN's native SDPA_BWD descriptor, or
the composite fused-attention graph (sdpa_bwd_composite.py).

Measured against the libraries themselves (sdpa_descriptors.cc, no GPU needed): cuDNN
9.17-9.20 cannot build an operation graph holding SDPA_BWD, and 9.21-9.24 build it but
every engine refuses anything but sm_100+ ("Unified SDPA bprop currently only supports
ARCH_10X"). The composite graph (matmuls, pointwise ops, a reduction and the forward's
softmax statistics) is the pattern cuDNN's fused-attention bprop engines recognise on
Ampere, Hopper and later. So the native descriptor is used only where it is known to run
(a loaded cuDNN >= 9.21 on a device of compute capability 10.0 or newer) and the composite
graph everywhere else, including when the device cannot be asked (no handle, a library
without the DEVICEPROP descriptor, no GPU).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cudnn.ops.errors import cudnnGraphNotSupportedError

#: the first cuDNN whose operation graphs can hold SDPA_BWD.
NATIVE_MIN_CUDNN = 92100
#: the first compute capability (major * 10 + minor) SDPA_BWD's engines run on.
NATIVE_MIN_SM = 100


@dataclass(frozen=True)
class SdpaBackwardRoute:
    composite: bool
    #: why this lowering, for explanations and declines ("cuDNN 9.19.0 < 9.21.0", ...)
    reason: str

    @property
    def name(self) -> str:
        return "composite" if self.composite else "native"


def version_string(version: int) -> str:
    """92100 -> "9.21.0" (CUDNN_VERSION units)."""
    return f"{version // 10000}.{version // 100 % 100}.{version % 100}"


def choose_route(cudnn_version: int | None, sm_version: int | None) -> SdpaBackwardRoute:
    """The lowering for a loaded cuDNN `cudnn_version` (None: none loaded) on a device of
    compute capability `sm_version` (90 for sm_90; None: unknown)."""
    if cudnn_version is None:
        return SdpaBackwardRoute(True, "no cuDNN library is loaded to ask")
    if cudnn_version < NATIVE_MIN_CUDNN:
        return SdpaBackwardRoute(True, f"cuDNN {version_string(cudnn_version)} < "
                                       f"{version_string(NATIVE_MIN_CUDNN)} cannot build an "
                                       "operation graph holding SDPA_BWD")
    if sm_version is None:
        return SdpaBackwardRoute(True, "the device's compute capability is unknown and "
                                       "SDPA_BWD runs on sm_100+ only")
    if sm_version < NATIVE_MIN_SM:
        return SdpaBackwardRoute(True, f"SDPA_BWD's engines run on sm_100+ only, this device "
                                       f"is sm_{sm_version}")
    return SdpaBackwardRoute(False, f"cuDNN {version_string(cudnn_version)} on sm_{sm_version}")


def sm_from_device_json(text: str) -> int | None:
    """Compute capability from cuDNN's device JSON ("deviceVer": 900 on sm_90), or None."""
    try:
        props = json.loads(text)
    except ValueError:
        return None
    version = props.get("deviceVer") if isinstance(props, dict) else None
    if isinstance(version, bool) or not isinstance(version, int) or version <= 0:
        return None
    return version // 10


def device_sm_version(ext: Any, handle: int | None) -> int | None:
    """The compute capability of `handle`'s GPU as cuDNN describes it, None when it cannot
    be asked (no handle, no GPU, or a library or build without the DEVICEPROP
    descriptor)."""
    if not handle:
        return None
    ask = getattr(ext, "device_properties_json", None)
    if ask is None:
        return None
    try:
        return sm_from_device_json(ask(handle))
    except (RuntimeError, ValueError, cudnnGraphNotSupportedError):
        return None


def route_for(ext: Any, handle: int | None) -> SdpaBackwardRoute:
    """The route for graphs lowered into `ext` on `handle`."""
    ask_version = getattr(ext, "cudnn_version", None)
    version = ask_version() if ask_version is not None else None
    if version is None or version < NATIVE_MIN_CUDNN:
        return choose_route(version, None)  # no need to ask the device
    return choose_route(version, device_sm_version(ext, handle))
