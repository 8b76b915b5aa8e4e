"""The compiled extension imports as `cudnn._pybind_module` and was built from the pinned
cuDNN headers (requirements-headers.txt), not from whatever else is on the machine."""

import importlib.metadata
import os

import pytest

import cudnn
from cudnn import _pybind_module

CUDNN_WHEELS = ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12")


def _installed_cudnn_wheel_version() -> str:
    for dist in CUDNN_WHEELS:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    pytest.skip(f"none of {CUDNN_WHEELS} is installed, so there is no version to compare with")


def test_extension_lives_in_backend_source_root():
    path = os.path.normpath(_pybind_module.__file__)
    # Bazel names it _pybind_module.so; the in-place pip build adds Python's ABI tag
    folder, name = os.path.split(path)
    assert folder.endswith(os.path.join("backend_cc", "cudnn")), path
    assert name.startswith("_pybind_module.") and name.endswith(".so"), path
    # The package itself is ir/'s `cudnn/__init__.py`, extended over the other roots.
    assert os.path.normpath(cudnn.__file__).endswith(os.path.join("ir", "cudnn", "__init__.py"))


def test_compiled_version_matches_installed_cudnn_wheel():
    major, minor, patch = (int(x) for x in _installed_cudnn_wheel_version().split(".")[:3])
    assert _pybind_module.version() == major * 10000 + minor * 100 + patch


def test_backend_graph_is_a_class_with_a_default_constructor():
    assert isinstance(_pybind_module.backend_graph(), _pybind_module.backend_graph)
    with pytest.raises(TypeError):
        _pybind_module.backend_graph(1)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
