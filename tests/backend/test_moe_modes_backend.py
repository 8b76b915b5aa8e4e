"""GPU suite for the MoE grouped matmul modes NONE, GATHER and SCATTER on the backend plan
path, against the float64 reference of moe_reference.py. Each case runs in its own process
(moe_modes_probe.py): an illegal memory access in one mode cannot poison the CUDA context
of the others or of the tests after this module. A case the backend or cuDNN refuses is
skipped with the reason; a case whose process dies is a failure that shows its stderr
(cuDNN's error log is on: CUDNN_LOGLEVEL_DBG=2).

  PYTHONPATH=.:ops:ir:router:backend_cc python3 -m pytest tests/backend/test_moe_modes_backend.py -q -s
"""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="the GPU suite needs torch")

from tests.backend.moe_modes_probe import CASES, RESULT_TAG  # noqa: E402
from tests.backend.native_runner import ROWS, Row  # noqa: E402
from tests.backend.suite_fixtures import gpu_suite_marks, result_table  # noqa: E402,F401

pytestmark = gpu_suite_marks()
PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "moe_modes_probe.py")
#: a case compiles and runs one small grouped matmul; the rest is importing torch
TIMEOUT_S = 120


def probe(name: str) -> tuple[dict | None, str]:
    """(the probe's verdict or None if it printed none, its output tail)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    env.setdefault("CUDNN_LOGLEVEL_DBG", "2")
    env.setdefault("CUDNN_LOGDEST_DBG", "stderr")
    try:
        done = subprocess.run([sys.executable, PROBE, name], capture_output=True, text=True,
                              env=env, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as err:
        return None, f"timed out after {TIMEOUT_S} s\n{(err.stderr or '')[-3000:]}"
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(RESULT_TAG)]
    tail = f"exit code {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return (json.loads(lines[-1][len(RESULT_TAG):]) if lines else None), tail


@pytest.mark.parametrize("name", sorted(CASES))
def test_moe_mode(name):
    verdict, tail = probe(name)
    assert verdict is not None, f"{name}: the probe process died without a verdict:\n{tail}"
    label = verdict.get("label", name)
    status = verdict["status"]
    if status == "declined":
        ROWS.append(Row(label, "-", float("nan"), float("nan"), verdict["reason"], True))
        pytest.skip(f"{label}: declined: {verdict['reason']}")
    assert status != "error", f"{label}: {verdict['reason']}\n{tail}"
    ROWS.append(Row(label, verdict["shape"], verdict["rel_err"], verdict["bound"],
                    verdict["plan"]))
    assert status == "pass", (f"{label}: relative error {verdict['rel_err']:.3e} > "
                              f"{verdict['bound']:.1e}")


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q", "-s"]))
