"""Running a cuTile cache test module in its own process when this one cannot host it.

cuda.tile binds the first `libcuda.so.1` a process loads.  The recorder and the launch
path need the sm_90 stub of tools/gpu/cutile_warm/driver_stub.py; when another test module
(aot_support's smaller stub) imported cuda.tile first in the same pytest process, the
module's tests are skipped there and one test reruns the whole file in a fresh process.
Under Bazel every test file is its own process, so the delegation never triggers.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "tools", "gpu")
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)


def foreign_driver() -> bool:
    """True when cuda.tile is already bound to a driver other than the stub."""
    from cutile_warm import driver_stub
    return "cuda.tile" in sys.modules and not driver_stub.loaded()


def rerun(test_file: str) -> None:
    """Run `test_file` under pytest in a new process; fail with its output if it fails."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-m", "pytest", test_file, "-q", "-p",
                        "no:cacheprovider"], env=env, capture_output=True, text=True,
                       timeout=1800)
    assert r.returncode == 0, f"{test_file} failed in a fresh process:\n" \
        f"{r.stdout[-6000:]}\n{r.stderr[-2000:]}"


def own_process_fixture(foreign: bool):
    """The autouse fixture of a module that needs the stub driver: where `foreign` (see
    foreign_driver), every test but test_in_a_fresh_process skips; that one reruns the
    module. Assign it to a module-level name so pytest finds it."""
    @pytest.fixture(autouse=True)
    def _own_process(request):
        if foreign and request.node.name != "test_in_a_fresh_process":
            pytest.skip("cuda.tile is bound to another driver in this process: "
                        "test_in_a_fresh_process runs this file")
    return _own_process
