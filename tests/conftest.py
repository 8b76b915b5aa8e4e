"""pytest hooks shared by the tests under tests/: skip `gpu`-marked tests without a GPU.

Loaded by pytest for every test file below this folder (rootdir is the repository root,
set by pytest.ini); Bazel test targets get it through the `//tests:conftest` dependency.
"""

import pytest

from tests import gpu


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return  # spare the torch import when nothing needs a GPU
    reason = gpu.unavailable_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"needs a GPU: {reason}")
    for item in gpu_items:
        item.add_marker(skip)
