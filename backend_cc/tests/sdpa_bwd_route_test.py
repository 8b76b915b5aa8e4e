"""cudnn.backend.sdpa_bwd_route on CPU: which lowering sdpa_backward gets for a loaded cuDNN
and a device, and how the device is asked (cuDNN's DEVICEPROP JSON through the extension)."""
import json
import re

import pytest

import cudnn
from cudnn.backend import loader
from cudnn.backend.sdpa_bwd_route import (NATIVE_MIN_CUDNN, choose_route, device_sm_version,
                                          route_for, sm_from_device_json, version_string)


@pytest.mark.parametrize("version, sm, composite, why", [
    (None, 100, True, "no cuDNN library"),
    (91900, 90, True, r"cuDNN 9\.19\.0 < 9\.21\.0 cannot build"),
    (91900, 100, True, r"cuDNN 9\.19\.0 < 9\.21\.0"),  # the version gate comes first
    (92100, 90, True, r"sm_100\+ only, this device is sm_90"),
    (92400, 89, True, "this device is sm_89"),
    (92400, None, True, "compute capability is unknown"),
    (92100, 100, False, r"cuDNN 9\.21\.0 on sm_100"),
    (92400, 120, False, "sm_120"),
])
def test_the_native_descriptor_only_where_it_is_known_to_run(version, sm, composite, why):
    route = choose_route(version, sm)
    assert route.composite is composite
    assert route.name == ("composite" if composite else "native")
    assert re.search(why, route.reason), route.reason


def test_version_string_reads_cudnn_version_units():
    assert version_string(NATIVE_MIN_CUDNN) == "9.21.0"
    assert version_string(91900) == "9.19.0" and version_string(100203) == "10.2.3"


@pytest.mark.parametrize("text, sm", [
    (json.dumps({"deviceVer": 900, "smVersion": 900}), 90),
    (json.dumps({"deviceVer": 1000}), 100),
    (json.dumps({"deviceVer": 1030}), 103),
    (json.dumps({"smVersion": 900}), None),   # no deviceVer: unknown, never guessed
    (json.dumps({"deviceVer": "900"}), None),
    (json.dumps({"deviceVer": True}), None),
    (json.dumps({"deviceVer": 0}), None),
    (json.dumps([900]), None),
    ("not json", None),
])
def test_compute_capability_from_cudnn_s_device_json(text, sm):
    assert sm_from_device_json(text) == sm


class Ext:
    """An extension stand-in: a loaded version and a device description (or a failure)."""

    def __init__(self, version, device=None, error=None):
        self.version, self.device, self.error = version, device, error
        self.asked = []

    def cudnn_version(self):
        return self.version

    def device_properties_json(self, handle):
        self.asked.append(handle)
        if self.error is not None:
            raise self.error
        return json.dumps({"deviceVer": self.device})


def test_an_old_library_takes_the_composite_graph_without_asking_the_device():
    ext = Ext(91900, device=1000)
    route = route_for(ext, handle=0x1234)
    assert route.composite and ext.asked == []


def test_a_new_library_asks_the_handle_s_device():
    ext = Ext(92400, device=1000)
    assert not route_for(ext, handle=0x1234).composite
    assert ext.asked == [0x1234]
    assert route_for(Ext(92400, device=900), handle=7).composite


@pytest.mark.parametrize("error", [RuntimeError("CUDNN_STATUS_NOT_SUPPORTED"),
                                   ValueError("a cuDNN handle is required"),
                                   cudnn.cudnnGraphNotSupportedError("no DEVICEPROP")])
def test_a_device_that_cannot_be_asked_takes_the_composite_graph(error):
    ext = Ext(92400, error=error)
    assert device_sm_version(ext, 7) is None
    route = route_for(ext, handle=7)
    assert route.composite and "unknown" in route.reason


def test_no_handle_means_no_device_question():
    ext = Ext(92400, device=1000)
    assert route_for(ext, handle=None).composite and ext.asked == []


def test_the_extension_refuses_to_describe_the_device_of_a_null_handle():
    ext = loader.extension()
    if ext is None:
        pytest.skip("needs the built extension: " + loader.unavailable_reason())
    with pytest.raises(ValueError, match="a cuDNN handle is required"):
        ext.device_properties_json(0)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
