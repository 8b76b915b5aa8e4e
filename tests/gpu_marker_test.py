"""The `gpu` marker skips with a reason exactly when no GPU is usable, and only then."""

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


def _run(pytester, monkeypatch, reason):
    monkeypatch.setattr(gpu, "unavailable_reason", lambda: reason)
    pytester.makeini("[pytest]\nmarkers =\n    gpu: needs a GPU\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_sample=SAMPLE)
    return pytester.runpytest_inprocess("-rs")


def test_gpu_test_skipped_with_reason_when_no_gpu(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, "no CUDA device (test)")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*needs a GPU: no CUDA device (test)*"])


def test_gpu_test_runs_when_gpu_present(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, None)
    result.assert_outcomes(passed=2)


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
