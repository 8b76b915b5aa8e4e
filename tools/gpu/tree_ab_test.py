"""tools/gpu/tree_ab.sh on stub trees: a warm-up pass over both trees, then rounds in the
order A B A B, each tree's commands run from that tree with its own sources first on
PYTHONPATH (the caller's entries kept after them), only the smoke's TIME / SUMMARY lines
and the bench's table rows kept, and a failing measurement fails the script."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().with_name("tree_ab.sh")

SMOKE = """import os, sys
tree = os.path.basename(os.getcwd())
timed = "--no-time" not in sys.argv
with open(os.environ["AB_LOG"], "a") as log:
    log.write(f"smoke {tree} {'time' if timed else 'warm'} {os.environ['PYTHONPATH']}\\n")
print("compiling ...")
if timed:
    print(f"TIME gdn bwd[grads] {1.0 if tree == 'a' else 2.0:.3f} ms")
print("SUMMARY 3 passed, 0 failed")
"""
BENCH = """import os, sys
tree = os.path.basename(os.getcwd())
reps = sys.argv[sys.argv.index("--reps") + 1]
with open(os.environ["AB_LOG"], "a") as log:
    log.write(f"bench {tree} {reps}\\n")
if os.environ.get("AB_FAIL_BENCH") == tree:
    sys.exit(1)
print("GPU: stub")
print(f"| GDN fwd+bwd | op FROST | {tree} | {tree} |")
"""


def _tree(root: Path, name: str) -> Path:
    tree = root / name
    for rel, text in (("tools/pythonpath.py", f"print('{tree}/src')\n"),
                      ("tests/numerics/la_frost_bwd_smoke.py", SMOKE), ("bench/bench_linear_attention.py", BENCH)):
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    return tree


def _run(tmp_path, **env):
    a, b = _tree(tmp_path, "a"), _tree(tmp_path, "b")
    log = tmp_path / "log"
    full = dict(os.environ, AB_LOG=str(log), PYTHONPATH="/kit", PATH=f"{Path(sys.executable).parent}:"
                f"{os.environ['PATH']}", **env)
    out = subprocess.run(["bash", str(SCRIPT), str(b), "2"], cwd=a, env=full, capture_output=True, text=True)
    return out, log.read_text().splitlines(), a, b


def test_rounds_alternate_with_each_trees_sources_first(tmp_path):
    out, log, a, b = _run(tmp_path)
    assert out.returncode == 0, out.stderr
    assert [line.split()[:3] for line in log] == [
        ["smoke", "a", "warm"], ["bench", "a", "2"], ["smoke", "b", "warm"], ["bench", "b", "2"],
        ["smoke", "a", "time"], ["bench", "a", "20"], ["smoke", "b", "time"], ["bench", "b", "20"],
        ["smoke", "a", "time"], ["bench", "a", "20"], ["smoke", "b", "time"], ["bench", "b", "20"]]
    for line in log:
        if line.startswith("smoke"):
            tree = a if line.split()[1] == "a" else b
            assert line.split()[3] == f"/tmp/site:{tree}/src:{tree}/bench:/kit"
    lines = out.stdout.splitlines()
    assert lines[:8] == [f"== round 1, A: {a}", "TIME gdn bwd[grads] 1.000 ms", "SUMMARY 3 passed, 0 failed",
                         "| GDN fwd+bwd | op FROST | a | a |",
                         f"== round 1, B: {b}", "TIME gdn bwd[grads] 2.000 ms", "SUMMARY 3 passed, 0 failed",
                         "| GDN fwd+bwd | op FROST | b | b |"]
    assert len(lines) == 16 and lines[8] == f"== round 2, A: {a}"


def test_a_failing_measurement_fails_the_script(tmp_path):
    out, _, _, _ = _run(tmp_path, AB_FAIL_BENCH="b")
    assert out.returncode == 1 and "warm-up bench failed" in out.stdout


def test_no_smoke_without_families(tmp_path):
    out, log, _, _ = _run(tmp_path, AB_SMOKE_FAMILIES="")
    assert out.returncode == 0 and not [line for line in log if line.startswith("smoke")]


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
