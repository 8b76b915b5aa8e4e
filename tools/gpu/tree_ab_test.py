"""tools/gpu/tree_ab.sh on stub trees: a warm-up pass over the trees, then rounds in the
order A B A B (A B C A B C with three), each tree's commands run from that tree with its
own sources first on PYTHONPATH (the caller's entries kept after them), only the smoke's
TIME / SUMMARY lines and the bench's table rows kept, a trailing number taken as the
rounds, AB_CHECK=1's warm-up running every smoke case and failing the script on a failed
check, a failing measurement failing the script, a tree's TREE::VAR=VALUE settings in
its commands' environment only, and AB_CASES' cases (";"-separated) one bench run each."""
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
mode = "time" if timed else ("warm" if "--only" in sys.argv else "check")
with open(os.environ["AB_LOG"], "a") as log:
    log.write(f"smoke {tree} {mode} {os.environ['PYTHONPATH']}\\n")
print("compiling ...")
if timed:
    print(f"TIME gdn bwd[grads] {1.0 if tree == 'a' else 2.0:.3f} ms")
if mode == "check" and os.environ.get("AB_FAIL_SMOKE") == tree:
    print("FAIL gdn plain dq 0.5")
    print("SUMMARY 2 passed, 1 failed")
    sys.exit(1)
print("SUMMARY 3 passed, 0 failed")
"""
BENCH = """import os, sys
tree = os.path.basename(os.getcwd())
reps = sys.argv[sys.argv.index("--reps") + 1]
with open(os.environ["AB_LOG"], "a") as log:
    cases = sys.argv[sys.argv.index("--cases") + 1]
    log.write(f"bench {tree} {reps} {os.environ.get('AB_STUB_FLAG', '-')} {cases}\\n")
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


def _run(tmp_path, *others, rounds=("2",), **env):
    a = _tree(tmp_path, "a")
    trees = [_tree(tmp_path, name) for name in (others or ("b",))]
    log = tmp_path / "log"
    full = dict(os.environ, AB_LOG=str(log), PYTHONPATH="/kit", PATH=f"{Path(sys.executable).parent}:"
                f"{os.environ['PATH']}", **env)
    out = subprocess.run(["bash", str(SCRIPT), *map(str, trees), *rounds], cwd=a, env=full, capture_output=True,
                         text=True)
    return out, log.read_text().splitlines(), a, trees[0]


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


def test_three_trees_alternate_and_a_trailing_number_is_the_rounds(tmp_path):
    out, log, a, _ = _run(tmp_path, "b", "c", rounds=("1",))
    assert out.returncode == 0, out.stderr
    assert [line.split()[:3] for line in log] == [
        ["smoke", "a", "warm"], ["bench", "a", "2"], ["smoke", "b", "warm"], ["bench", "b", "2"],
        ["smoke", "c", "warm"], ["bench", "c", "2"],
        ["smoke", "a", "time"], ["bench", "a", "20"], ["smoke", "b", "time"], ["bench", "b", "20"],
        ["smoke", "c", "time"], ["bench", "c", "20"]]
    heads = [line for line in out.stdout.splitlines() if line.startswith("==")]
    assert heads == [f"== round 1, A: {a}", f"== round 1, B: {tmp_path / 'b'}", f"== round 1, C: {tmp_path / 'c'}"]


def test_default_rounds_without_a_number(tmp_path):
    out, log, _, _ = _run(tmp_path, "b", rounds=())
    assert out.returncode == 0 and sum(line.startswith("bench a 20") for line in log) == 2


def test_check_runs_every_case_and_a_failed_check_fails_the_script(tmp_path):
    out, log, a, b = _run(tmp_path, AB_CHECK="1")
    assert out.returncode == 0, out.stderr
    assert [line.split()[:3] for line in log][:3] == [["smoke", "a", "check"], ["bench", "a", "2"],
                                                      ["smoke", "b", "check"]]
    assert f"== check A gdn: {a}" in out.stdout and f"== check B gdn: {b}" in out.stdout
    (tmp_path / "again").mkdir()
    out, _, _, b = _run(tmp_path / "again", AB_CHECK="1", AB_FAIL_SMOKE="b")
    assert out.returncode == 1
    assert "FAIL gdn plain dq 0.5" in out.stdout and f"check failed: {b} gdn (exit 1)" in out.stdout


def test_settings_reach_only_their_trees_commands(tmp_path):
    a = _tree(tmp_path, "a")
    log = tmp_path / "log"
    env = dict(os.environ, AB_LOG=str(log), PYTHONPATH="/kit", PATH=f"{Path(sys.executable).parent}:"
               f"{os.environ['PATH']}", AB_SMOKE_FAMILIES="")
    env.pop("AB_STUB_FLAG", None)
    out = subprocess.run(["bash", str(SCRIPT), ".::AB_STUB_FLAG=off::OTHER=1", "1"], cwd=a, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert [line.split()[:4] for line in log.read_text().splitlines()] == [
        ["bench", "a", "2", "-"], ["bench", "a", "2", "off"], ["bench", "a", "20", "-"], ["bench", "a", "20", "off"]]
    heads = [line for line in out.stdout.splitlines() if line.startswith("==")]
    assert heads == [f"== round 1, A: {a}", f"== round 1, B: {a} (AB_STUB_FLAG=off OTHER=1)"]


def test_several_cases_run_one_bench_each(tmp_path):
    out, log, _, _ = _run(tmp_path, rounds=("1",), AB_SMOKE_FAMILIES="", AB_CASES="KDA fwd+bwd;GDN-2 fwd+bwd")
    assert out.returncode == 0, out.stderr
    timed = [line.split(" ", 4)[4] for line in log if line.startswith("bench a 20")]
    assert timed == ["KDA fwd+bwd", "GDN-2 fwd+bwd"]


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
