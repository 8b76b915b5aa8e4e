"""pytest hooks shared by the tests under tests/: skip `gpu`-marked tests without a GPU and
`frost`-marked ones where the FROST kernels cannot launch, and
--frost-fwd-kernel, the test tooling's choice of FROST forward kernel.

Loaded by pytest for every test file below this folder (rootdir is the repository root,
set by pytest.ini); Bazel test targets get it through the `//tests:conftest` dependency.
"""

import pytest

from tests import gpu


def pytest_addoption(parser):
    parser.addoption(
        "--frost-fwd-kernel", default=None, metavar="LAYER",
        help="launch the FROST forward (so the FROST engines' forward) with this kernel layer "
             "of the test tooling (engines_frost/tests/frost_fwd_experiments.py: oracle, mma, pipelined, "
             "wgmma; e.g. pipelined, the product's kernel before wgmma); the product launches wgmma "
             "on sm_90a, pipelined on other archs; forwards that write state checkpoints stay on the "
             "product's kernel")


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
    # each probe runs only when some collected test carries its marker (spares the torch
    # and CuTe DSL imports otherwise); a test with both markers gets the first skip only
    for marker, probe, what in (("gpu", gpu.unavailable_reason, "a GPU"),
                                ("frost", gpu.frost_unavailable_reason, "the FROST kernels")):
        marked = [item for item in items if item.get_closest_marker(marker) is not None
                  and item.get_closest_marker("skip") is None]
        reason = probe() if marked else None
        if reason is None:
            continue
        skip = pytest.mark.skip(reason=f"needs {what}: {reason}")
        for item in marked:
            item.add_marker(skip)
