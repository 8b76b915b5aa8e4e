"""pytest hooks shared by the tests under tests/: skip `gpu`-marked tests without a GPU, and
--frost-fwd-kernel, the test tooling's choice of FROST forward kernel.

Loaded by pytest for every test file below this folder (rootdir is the repository root,
set by pytest.ini); Bazel test targets get it through the `//tests:conftest` dependency.
"""

import pytest

from tests import gpu


def pytest_addoption(parser):
    parser.addoption(
        "--frost-fwd-kernel", default=None, metavar="VERSION",
        help="launch the FROST forward (so the FROST engines' forward) with this kernel version "
             "of the test tooling (engines_frost/tests/frost_fwd_experiments.py: v0, v1, v2, v3; e.g. "
             "v2, the product's kernel before v3); the product launches v3 for bf16 forwards on "
             "sm_90a, v2 for the rest; forwards that write state checkpoints stay on the product's "
             "kernel")


@pytest.fixture(autouse=True, scope="session")
def _frost_fwd_kernel(request):
    """Routes frost_fwd through --frost-fwd-kernel for the whole session (nothing without it)."""
    algorithm = request.config.getoption("--frost-fwd-kernel")
    if algorithm is None:
        yield
        return
    from frost_fwd_experiments import use_kernel  # engines_frost/tests: on sys.path (root conftest.py)

    with use_kernel(algorithm):
        yield


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
