"""The `gpu` marker skips with a reason exactly when no GPU is usable, and only then; the
`frost` marker likewise when the FROST kernels cannot launch."""

import pathlib

import pytest

from tests import gpu

pytest_plugins = ["pytester"]

CONFTEST = pathlib.Path(__file__).with_name("conftest.py").read_text()

SAMPLE = """
import pytest

@pytest.mark.gpu
def test_needs_gpu():
    pass

def test_runs_anywhere():
    pass
"""

FROST_SAMPLE = """
import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.frost]

def test_launches_frost():
    pass
"""


def _run(pytester, monkeypatch, reason, frost_reason=None, frost_probes=None):
    monkeypatch.setattr(gpu, "unavailable_reason", lambda: reason)

    def frost_probe():
        if frost_probes is not None:
            frost_probes.append(1)
        return frost_reason

    monkeypatch.setattr(gpu, "frost_unavailable_reason", frost_probe)
    pytester.makeini("[pytest]\nmarkers =\n    gpu: needs a GPU\n    frost: needs FROST\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_sample=SAMPLE, test_frost_sample=FROST_SAMPLE)
    return pytester.runpytest_inprocess("-rs")


def test_gpu_test_skipped_with_reason_when_no_gpu(pytester, monkeypatch):
    probes = []
    result = _run(pytester, monkeypatch, "no CUDA device (test)", frost_probes=probes)
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*SKIPPED*needs a GPU: no CUDA device (test)*"])
    assert probes == []  # the FROST probe (CuTe DSL import) is spared once the GPU skip applies


def test_gpu_test_runs_when_gpu_present(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, None)
    result.assert_outcomes(passed=3)


def test_frost_test_skipped_with_reason_when_frost_cannot_launch(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, None, frost_reason="frost: no kernel build for sm_75 (test)")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*needs the FROST kernels: frost: no kernel build for sm_75 (test)*"])


def test_real_frost_probe_skips_without_gpu():
    """Without a GPU the FROST probe gives the GPU probe's reason (no CuTe DSL import)."""
    if gpu.unavailable_reason() is None:
        pytest.skip("a GPU is present (the probe's GPU branch needs the FROST package)")
    assert gpu.frost_unavailable_reason() == gpu.unavailable_reason()


def test_real_probe_agrees_with_torch():
    reason = gpu.unavailable_reason()
    try:
        import torch
    except ImportError:
        assert reason == "torch is not installed"
        return
    assert (reason is None) == torch.cuda.is_available()


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
