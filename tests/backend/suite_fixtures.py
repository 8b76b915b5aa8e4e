"""What the GPU backend suites share: their marks (tag `gpu`; skipped with the reason
without a CUDA device or a usable cuDNN backend) and fixtures imported by name into each
suite module: one cuDNN handle on torch's current stream per module, a seed per test, and
the result table printed (with `-s`) when a module finishes."""
import zlib

import pytest
import torch

from cudnn.backend import handles
from cudnn.backend.adapter import CudnnBackendAdapter
from tests.backend.native_runner import ROWS, table


def gpu_suite_marks() -> list:
    """`pytestmark` of a GPU suite (skip marks rather than module-level skips: Bazel runs
    each suite file as a script first)."""
    if not torch.cuda.is_available():
        skip = "no CUDA device"
    else:
        skip = CudnnBackendAdapter().unavailable_reason()
    return [pytest.mark.gpu, pytest.mark.skipif(skip is not None, reason=str(skip))]


@pytest.fixture(scope="module", autouse=True)
def result_table():
    yield
    if ROWS:
        print("\n" + table())
        ROWS.clear()


@pytest.fixture(scope="module")
def handle():
    with handles.create_handle(torch.cuda.current_stream().cuda_stream) as h:
        yield h


@pytest.fixture(autouse=True)
def seeded(request):
    torch.manual_seed(zlib.crc32(request.node.name.encode()))  # distinct per test, replayable


def device_sm() -> int:
    """The current CUDA device's compute capability as major * 10 + minor (90 on an H200)."""
    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor
