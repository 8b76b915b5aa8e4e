"""ncu_source_report.py on a per-SASS CSV shaped as `ncu --page source --csv --print-source
sass` writes it: regions cut at BAR.SYNC, roles cut at the setmaxnreg sites (two roles or
the four-role kernels' three), each instruction's samples counted once."""

import csv
import io
import json
import random

import pytest

import ncu_source_report as report

COLUMNS = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed",
           "stall_barrier", "stall_long_sb", "stall_barrier (Not Issued)"]


def _csv(tmp_path, sources, rng):
    """A report CSV (with ncu's preamble line) of `sources`, random samples per row; returns
    its path and the rows' sample counts."""
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL)
    w.writerow(COLUMNS)
    samples = []
    for i, src in enumerate(sources):
        n = rng.randint(0, 500)
        barrier = rng.randint(0, n)
        samples.append(n)
        w.writerow([f"{16 * i:x}", src, str(n), str(rng.randint(1, 10_000)), str(barrier), str(n - barrier), "7"])
    path = tmp_path / "sass.csv"
    path.write_text("==PROF== Disconnected\n" + buf.getvalue())
    return str(path), samples


def _filler(rng, k):
    return [rng.choice(["FFMA R1, R2, R3, R4", "LDS.128 R4, [R2]", "HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], RZ"])
            for _ in range(k)]


@pytest.mark.parametrize("seed", [1, 2])
def test_four_role_kernel_splits_into_its_roles(tmp_path, seed):
    rng = random.Random(seed)
    parts = [_filler(rng, rng.randint(1, 6)) for _ in range(4)]
    sources = (parts[0] + ["USETMAXREG.DEALLOC.CTAPOOL 0x18"] + parts[1] + ["BAR.SYNC.DEFER_BLOCKING 0x2, 0x100"]
               + ["USETMAXREG.DEALLOC.CTAPOOL 0x78"] + parts[2] + ["USETMAXREG.TRY_ALLOC.CTAPOOL 0xb8"] + parts[3])
    path, samples = _csv(tmp_path, sources, rng)
    rows = report.read_rows(path)
    segments = report.role_segments(rows)
    assert [name for name, _ in segments] == ["prologue", "copies", "math", "chain"]
    assert [len(part) for _, part in segments] == [len(parts[0]), len(parts[1]) + 2, len(parts[2]) + 1,
                                                     len(parts[3]) + 1]
    assert [r["Source"] for _, part in segments for r in part] == sources  # each row once, in order
    counted = sum(report._num(r["Warp Stall Sampling (All Samples)"]) for _, part in segments for r in part)
    assert counted == sum(samples)


def test_two_role_kernel_and_plain_kernel(tmp_path):
    rng = random.Random(3)
    sources = _filler(rng, 2) + ["USETMAXREG.DEALLOC.CTAPOOL 0x48"] + _filler(rng, 3) + \
        ["USETMAXREG.TRY_ALLOC.CTAPOOL 0xd0"] + _filler(rng, 4)
    path, _ = _csv(tmp_path, sources, rng)
    assert [(n, len(p)) for n, p in report.role_segments(report.read_rows(path))] == \
        [("prologue", 2), ("producer", 4), ("consumers", 5)]
    path, _ = _csv(tmp_path, _filler(rng, 5), rng)
    assert report.role_segments(report.read_rows(path)) == []
    # the raising site before a lowering one is not a layout this kernel family has
    path, _ = _csv(tmp_path, ["USETMAXREG.TRY_ALLOC.CTAPOOL 0xd0", "USETMAXREG.DEALLOC.CTAPOOL 0x48"], rng)
    assert report.role_segments(report.read_rows(path)) == []


def test_report_prints_regions_roles_and_top_instructions(tmp_path, capsys):
    rng = random.Random(4)
    sources = (_filler(rng, 2) + ["USETMAXREG.DEALLOC.CTAPOOL 0x18", "BAR.SYNC 0x1"] + _filler(rng, 2)
               + ["USETMAXREG.DEALLOC.CTAPOOL 0x78"] + _filler(rng, 2) + ["USETMAXREG.TRY_ALLOC.CTAPOOL 0xb8"]
               + ["HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24"])
    path, samples = _csv(tmp_path, sources, rng)
    assert report.main([path, "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert f"{len(sources)} SASS instructions, {sum(samples)} PC samples, 2 barrier-delimited regions" in out
    for role in ("prologue", "copies", "math", "chain"):
        assert f"\n  {role} " in out
    top = out.split("instructions by samples\n")[1].splitlines()
    best = max(range(len(sources)), key=lambda i: samples[i])
    assert sources[best][:40] in top[0]


def test_samples_by_opcode(tmp_path):
    """opcode drops predicates and modifiers but keeps WARPGROUP's kind; a role's samples
    summed by opcode are its rows' samples, each counted once."""
    assert report.opcode("@!P0 HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], RZ") == "HGMMA"
    assert report.opcode("WARPGROUP.DEPBAR.LE gsb0, 0x0") == "WARPGROUP.DEPBAR"
    assert report.opcode("WARPGROUP.ARRIVE") == "WARPGROUP.ARRIVE"
    assert report.opcode("@P1 BRA 0x100") == "BRA"
    rng = random.Random(5)
    sources = ["HGMMA.64x64x16.F32.BF16 R24", "WARPGROUP.DEPBAR.LE gsb0, 0x0", "@P0 HGMMA.64x64x16 R24",
               "FFMA R1, R2, R3, R4", "WARPGROUP.ARRIVE"]
    path, samples = _csv(tmp_path, sources, rng)
    by = report.opcode_samples(report.read_rows(path))
    assert by == {"HGMMA": samples[0] + samples[2], "WARPGROUP.DEPBAR": samples[1], "FFMA": samples[3],
                  "WARPGROUP.ARRIVE": samples[4]}


def _entries(sources, functions):
    return [{"index": i, "sass": src, "file": "k.py", "line": i + 1, "function": fn}
            for i, (src, fn) in enumerate(zip(sources, functions))]


def test_lines_split_the_samples_by_role_and_function(tmp_path, capsys):
    """With a line map of the same kernel, every row's samples land in exactly one (role,
    function) bucket; a map of another kernel is refused, naming the mismatch."""
    rng = random.Random(6)
    sources = (_filler(rng, 3) + ["USETMAXREG.DEALLOC.CTAPOOL 0x18"] + _filler(rng, 4)
               + ["USETMAXREG.DEALLOC.CTAPOOL 0x78"] + _filler(rng, 9) + ["USETMAXREG.TRY_ALLOC.CTAPOOL 0xb8"]
               + _filler(rng, 5))
    functions = [rng.choice(["a.py:K.gram", "a.py:K.inverse", "b.py:helper"]) for _ in sources]
    path, samples = _csv(tmp_path, sources, rng)
    rows = report.read_rows(path)
    entries = _entries(sources, functions)
    assert report.join_lines(rows, entries) == 0
    role_of = {id(r): name for name, part in report.role_segments(rows) for r in part}
    totals = report.function_totals(rows, entries, report.stall_columns(rows[0]), role_of)
    assert sum(a["samples"] for a in totals.values()) == sum(samples)
    assert sum(a["instrs"] for a in totals.values()) == len(sources)
    math = [i for i, r in enumerate(rows) if role_of[id(r)] == "math" and functions[i] == "a.py:K.gram"]
    assert totals.get(("math", "a.py:K.gram"), {"samples": 0})["samples"] == sum(samples[i] for i in math)
    lines = tmp_path / "lines.json"
    lines.write_text(json.dumps({"instructions": entries}))
    assert report.main([path, "--top", "50", "--lines", str(lines)]) == 0
    out = capsys.readouterr().out.split("by role and source function")[1]
    for role, fn in totals:
        assert any(line.split()[:2] == [role, fn] for line in out.splitlines())
    # a map of another kernel: one opcode differs, or one instruction more
    other = [dict(e) for e in entries]
    other[5]["sass"] = "MUFU.EX2 R1, R2"
    lines.write_text(json.dumps({"instructions": other}))
    assert report.main([path, "--lines", str(lines)]) == 1
    assert "1 opcodes that differ" in capsys.readouterr().err
    lines.write_text(json.dumps({"instructions": entries + entries[:1]}))
    assert report.main([path, "--lines", str(lines)]) == 1
    assert "a different instruction count" in capsys.readouterr().err
    # no map at all, or a file of something else
    for bad in ("", "[1, 2]", json.dumps({"kernel": "x"})):
        lines.write_text(bad)
        assert report.main([path, "--lines", str(lines)]) == 2
        assert "not a map from tools/gpu/sass_line_map.py" in capsys.readouterr().err
    assert report.main([path, "--lines", str(tmp_path / "missing.json")]) == 2


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
