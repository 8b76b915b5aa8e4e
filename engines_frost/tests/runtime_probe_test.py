"""CPU tests of the FROST runtime gate (runtime_probe.py) and the handle-device gate.

Hardware answers (the device's SM, the installed CuTe DSL version) are replaced by
monkeypatching the probe's query functions, so the gating logic itself runs for real.
"""
import sys
import types

import pytest
from frost_graphs import op_graph

from cudnn.linear_attention.frost import runtime_probe
from cudnn.linear_attention.frost.gdn_engine import GdnFrostEngine
from cudnn.linear_attention.frost.kda_engine import KdaFrostEngine

torch = pytest.importorskip("torch")


@pytest.fixture
def cuda_sm(monkeypatch):
    """Pretend a CUDA device with the given SM and a CuTe DSL version are present."""
    def setup(sm=90, cutlass=((4, 8, 1), "version 4.8.1")):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(runtime_probe, "device_sm", lambda device=None: sm)
        monkeypatch.setattr(runtime_probe, "cutlass_dsl_version", lambda: cutlass)
    return setup


def test_hopper_with_cutlass_passes(cuda_sm):
    cuda_sm(sm=90)
    assert runtime_probe.runtime_reason("gdn_frost") is None
    assert runtime_probe.kernel_arch(None).sm == 90


@pytest.mark.parametrize("sm", [80, 89, 100, 103, 120])
def test_other_sms_decline_naming_the_sm(cuda_sm, sm):
    cuda_sm(sm=sm)
    msg = runtime_probe.runtime_reason("kda_frost", torch.device("cuda", 1))
    assert msg == (f"kda_frost: no kernel build for sm_{sm} (cuda:1); FROST kernels are built "
                   "for sm_90")
    assert runtime_probe.kernel_arch(None) is None


def test_arch_table_rows_are_consistent():
    for sm, arch in runtime_probe.KERNEL_ARCHS.items():
        assert arch.sm == sm and arch.variant


@pytest.mark.parametrize("found, needle", [
    ((None, "not importable (ModuleNotFoundError: No module named 'cutlass')"),
     "needs nvidia-cutlass-dsl (module 'cutlass') >= 4.7; not importable (ModuleNotFound"),
    (((4, 6, 2), "version 4.6.2"), ">= 4.7; version 4.6.2"),
])
def test_missing_or_old_cute_dsl_declines(cuda_sm, found, needle):
    cuda_sm(cutlass=found)
    msg = runtime_probe.runtime_reason("gdn2_frost")
    assert msg.startswith("gdn2_frost: ") and needle in msg


def test_cutlass_probe_reports_an_unimportable_module(monkeypatch):
    runtime_probe.cutlass_dsl_version.cache_clear()
    monkeypatch.setitem(sys.modules, "cutlass", None)   # import raises ImportError
    try:
        version, found = runtime_probe.cutlass_dsl_version()
        assert version is None and found.startswith("not importable (")
    finally:
        runtime_probe.cutlass_dsl_version.cache_clear()


def test_without_torch_declines(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    assert runtime_probe.runtime_reason("gdn_frost") == (
        "gdn_frost: torch is not installed (the kernels launch on torch streams)")


def test_without_cuda_declines(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert runtime_probe.runtime_reason("gdn_frost") == "gdn_frost: no CUDA device is visible"


def test_check_support_uses_the_probe_of_the_handles_device(cuda_sm, monkeypatch):
    cuda_sm(sm=100)
    seen = []
    real = runtime_probe.runtime_reason
    monkeypatch.setattr(runtime_probe, "runtime_reason",
                        lambda engine, device=None: seen.append(device) or real(engine, device))
    handle = types.SimpleNamespace(device=torch.device("cuda", 3), stream=None)
    g, _ = op_graph("kda", handle=handle)
    with pytest.raises(NotImplementedError, match=r"kda_frost: no kernel build for sm_100 "
                                                  r"\(cuda:3\)"):
        KdaFrostEngine().check_support(g)
    assert seen == [torch.device("cuda", 3)]


def test_non_cuda_handle_declines_before_any_device_query(monkeypatch):
    monkeypatch.setattr(runtime_probe, "runtime_reason",
                        lambda *a: pytest.fail("the runtime probe must not run"))
    g, _ = op_graph("gdn", handle=types.SimpleNamespace(device=torch.device("cpu"),
                                                         stream=None))
    with pytest.raises(NotImplementedError,
                       match="gdn_frost: runs on CUDA devices; the graph's handle is on cpu"):
        GdnFrostEngine().check_support(g)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
