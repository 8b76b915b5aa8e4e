"""tools/gpu/matrix_families.sh on stub matrices (test files with the real matrices' id
patterns, one test per family and kind; the forward's also with tests that name no
family): one pytest process per family, each selecting exactly its family's tests (gdn's
not gdn2's), the forward's family-free tests in a process of their own, a log per family
under $OUT, the script failing when any family fails and naming the failure, a bad family
or matrix refused."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().with_name("matrix_families.sh")

STUB = """import os
import pytest


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
@pytest.mark.parametrize("shape", ["one_seq_T1-l20-h00", "mixed-l21-h01"])
def test_backward(shape, family):
    with open(os.environ["STUB_LOG"], "a") as log:
        log.write(f"{family} {shape}\\n")
    assert family != os.environ.get("STUB_FAIL"), f"{family} gradients off"


@pytest.mark.parametrize("family", ["gdn", "kda", "gdn2"])
def test_batch_invariance(family):
    with open(os.environ["STUB_LOG"], "a") as log:
        log.write(f"{family} invariance\\n")
"""


# the forward matrix's checks that run once, not per family
FWD_STUB = STUB.replace("test_backward", "test_forward") + """

def test_execute_refuses_cpu_buffers():
    with open(os.environ["STUB_LOG"], "a") as log:
        log.write("other refuses\\n")
"""

MATRIX_FILES = {"bwd": "test_la_frost_bwd_engines.py", "fwd": "test_la_frost_engines.py"}


def _run(tmp_path, *families, fail=None, matrix=None):
    tree = tmp_path / "tree"
    (tree / "tests" / "numerics").mkdir(parents=True, exist_ok=True)
    (tree / "tests" / "numerics" / MATRIX_FILES["bwd"]).write_text(STUB)
    (tree / "tests" / "numerics" / MATRIX_FILES["fwd"]).write_text(FWD_STUB)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    log = tmp_path / "ran"
    # this interpreter first on PATH, and its import path, so the script's python3 finds pytest
    # wherever the test runner keeps it (a Bazel sandbox included)
    env = dict(os.environ, OUT=str(out), STUB_LOG=str(log), PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
               PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    env.pop("STUB_FAIL", None)
    env.pop("MATRIX", None)
    if matrix:
        env["MATRIX"] = matrix
    if fail:
        env["STUB_FAIL"] = fail
    p = subprocess.run(["bash", str(SCRIPT), *families], cwd=tree, env=env, capture_output=True, text=True,
                       timeout=300)
    ran = sorted(log.read_text().splitlines()) if log.exists() else []
    return p, out, ran


def test_each_family_runs_its_own_tests(tmp_path):
    p, out, ran = _run(tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert ran == sorted(f"{f} {what}" for f in ("gdn", "kda", "gdn2")
                         for what in ("one_seq_T1-l20-h00", "mixed-l21-h01", "invariance"))
    for f in ("gdn", "kda", "gdn2"):
        text = (out / f"bwdmatrix_{f}.log").read_text()
        ids = [line.split("::")[1].split(" ")[0] for line in text.splitlines() if " PASSED" in line]
        assert len(ids) == 3 and all(i.endswith(f"-{f}]") or i.endswith(f"[{f}]") for i in ids), ids
        assert f"== {f}: 3 passed" in p.stdout


def test_a_failing_family_fails_the_script(tmp_path):
    p, out, _ = _run(tmp_path, fail="kda")
    assert p.returncode == 1
    assert "== kda: 1 passed" in p.stdout and "FAILED" in p.stdout and "kda gradients off" in \
        (out / "bwdmatrix_kda.log").read_text()
    assert "== gdn: 3 passed" in p.stdout and "== gdn2: 3 passed" in p.stdout


def test_families_asked_for_only(tmp_path):
    p, out, ran = _run(tmp_path, "gdn2")
    assert p.returncode == 0, p.stdout + p.stderr
    assert {line.split()[0] for line in ran} == {"gdn2"}
    assert sorted(x.name for x in out.iterdir()) == ["bwdmatrix_gdn2.log"]


def test_bad_family_refused(tmp_path):
    p, out, ran = _run(tmp_path, "gdn3")
    assert p.returncode == 2 and "FAMILY must be gdn, kda, gdn2 or other, got 'gdn3'" in p.stderr
    assert ran == []


def test_forward_matrix_runs_its_family_free_tests_apart(tmp_path):
    p, out, ran = _run(tmp_path, matrix="fwd")
    assert p.returncode == 0, p.stdout + p.stderr
    assert ran == sorted([f"{f} {what}" for f in ("gdn", "kda", "gdn2")
                          for what in ("one_seq_T1-l20-h00", "mixed-l21-h01", "invariance")]
                         + ["other refuses"])
    assert sorted(x.name for x in out.iterdir()) == sorted(
        f"fwdmatrix_{f}.log" for f in ("gdn", "kda", "gdn2", "other"))
    assert "test_forward[" in (out / "fwdmatrix_kda.log").read_text()
    assert "== other: 1 passed" in p.stdout


def test_bad_matrix_refused(tmp_path):
    p, out, ran = _run(tmp_path, matrix="both")
    assert p.returncode == 2 and "MATRIX must be bwd or fwd, got 'both'" in p.stderr
    assert ran == []
