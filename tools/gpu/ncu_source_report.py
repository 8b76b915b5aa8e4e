#!/usr/bin/env python3
"""Where a kernel's warps wait, per stage: reads the per-SASS-instruction CSV that
`ncu -i REPORT --page source --csv --print-source sass` writes (tools/gpu/gpu_suite.sh stage
ncu brings it back as ncu_<family>_sass.csv) and prints

- per barrier-delimited region (a region ends at each BAR.SYNC, the way the FROST kernels'
  stages end at a CTA barrier): PC samples, share of all samples, instructions executed
  and the three largest stall reasons;
- per role of a warp-specialised kernel (cut at its setmaxnreg sites: producer /
  consumers, or copies / math / chain for the four-role kernels): the same totals;
- the N instructions with the most samples, with their region, role and stall reasons;
- with --lines (a map of the same kernel from tools/gpu/sass_line_map.py, made on the
  build machine from the same sources): the samples per role and Python function of the
  kernel sources, so a barrier-free stretch splits by sub-stage.

  python3 tools/gpu/ncu_source_report.py ncu_gdn_sass.csv [--top 25] [--lines gdn_lines.json]
"""
from __future__ import annotations

import argparse
import collections
import csv
import json
import sys


def _num(text: str) -> float:
    try:
        return float(text.replace(",", "")) if text else 0.0
    except ValueError:
        return 0.0


def read_rows(path: str) -> list[dict]:
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"Address"'))
    return list(csv.DictReader(lines[start:]))


def stall_columns(row: dict) -> list[str]:
    return [c for c in row if c.startswith("stall_") and "(Not Issued)" not in c]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--lines", help="sass_line_map.py's map of the same kernel: samples per source function")
    args = ap.parse_args(argv)
    rows = read_rows(args.csv)
    if not rows:
        print("no instructions in the CSV", file=sys.stderr)
        return 1
    stalls = stall_columns(rows[0])
    total = sum(_num(r["Warp Stall Sampling (All Samples)"]) for r in rows) or 1.0
    region, regions = 0, collections.OrderedDict()
    tagged = []
    for r in rows:
        samples = _num(r["Warp Stall Sampling (All Samples)"])
        agg = regions.setdefault(region, {"samples": 0.0, "executed": 0.0, "first": r["Address"],
                                          "stalls": collections.Counter(), "instrs": 0})
        agg["samples"] += samples
        agg["executed"] += _num(r["Instructions Executed"])
        agg["instrs"] += 1
        for c in stalls:
            agg["stalls"][c] += _num(r[c])
        tagged.append((region, r, samples))
        if r["Source"].strip().startswith("BAR.SYNC") or " BAR.SYNC" in r["Source"]:
            region += 1
    print(f"{len(rows)} SASS instructions, {total:.0f} PC samples, {len(regions)} barrier-delimited regions")
    print(f"{'region':>6} {'from':>8} {'instrs':>6} {'samples':>8} {'share':>6} {'executed':>10}  top stalls")
    for i, agg in regions.items():
        if agg["samples"] < 0.005 * total:
            continue
        top = ", ".join(f"{c[6:]} {v / agg['samples']:.0%}" for c, v in agg["stalls"].most_common(3) if v)
        print(f"{i:>6} {agg['first']:>8} {agg['instrs']:>6} {agg['samples']:>8.0f} "
              f"{agg['samples'] / total:>6.1%} {agg['executed']:>10.0f}  {top}")
    print_roles(rows, stalls, total)
    role_of = {id(r): name for name, part in role_segments(rows) for r in part}
    print(f"\ntop {args.top} instructions by samples")
    for region_i, r, samples in sorted(tagged, key=lambda t: -t[2])[:args.top]:
        top = ", ".join(f"{c[6:]} {_num(r[c]):.0f}" for c in sorted(stalls, key=lambda c: -_num(r[c]))[:3]
                        if _num(r[c]))
        print(f"  r{region_i:<3} {role_of.get(id(r), ''):8s} {r['Address']:>6} {samples:6.0f} {samples / total:5.1%}  "
              f"{r['Source'].strip()[:60]:60s} {top}")
    if args.lines:
        try:
            with open(args.lines) as f:
                entries = json.load(f)["instructions"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"--lines {args.lines}: not a map from tools/gpu/sass_line_map.py ({exc!r})", file=sys.stderr)
            return 2
        return print_functions(rows, entries, stalls, total, role_of, args.top)
    return 0


def join_lines(rows: list[dict], entries: list[dict]) -> int:
    """How many of the profile's rows disagree in opcode with the line map's instruction at
    the same index (-1: the two list a different number of instructions). The map is of the
    same kernel only if this is 0."""
    if len(rows) != len(entries):
        return -1
    return sum(opcode(r["Source"]) != opcode(e["sass"]) for r, e in zip(rows, entries))


def function_totals(rows: list[dict], entries: list[dict], stalls: list[str], role_of: dict) -> dict:
    """(role, function) -> samples, executed, instrs and stall counter, over the joined rows."""
    out = {}
    for r, e in zip(rows, entries):
        key = (role_of.get(id(r), ""), e["function"])
        agg = out.setdefault(key, {"samples": 0.0, "executed": 0.0, "instrs": 0, "stalls": collections.Counter()})
        agg["samples"] += _num(r["Warp Stall Sampling (All Samples)"])
        agg["executed"] += _num(r["Instructions Executed"])
        agg["instrs"] += 1
        for c in stalls:
            agg["stalls"][c] += _num(r[c])
    return out


def print_functions(rows, entries, stalls, total, role_of, top) -> int:
    """The samples per (role, source function) of a line map joined with the profile."""
    bad = join_lines(rows, entries)
    if bad:
        what = "a different instruction count" if bad < 0 else f"{bad} opcodes that differ"
        print(f"\n--lines: the map does not describe this kernel ({what}: {len(entries)} mapped, "
              f"{len(rows)} profiled); build it from the same sources and shape", file=sys.stderr)
        return 1
    totals = function_totals(rows, entries, stalls, role_of)
    print(f"\nby role and source function (the {top} with the most samples)")
    print(f"  {'role':8s} {'function':52s} {'instrs':>6} {'samples':>8} {'share':>6} {'executed':>10}  top stalls")
    for (role, fn), agg in sorted(totals.items(), key=lambda kv: -kv[1]["samples"])[:top]:
        s = agg["samples"] or 1.0
        stall = ", ".join(f"{c[6:]} {v / s:.0%}" for c, v in agg["stalls"].most_common(3) if v)
        print(f"  {role:8s} {fn[-52:]:52s} {agg['instrs']:>6} {agg['samples']:>8.0f} "
              f"{agg['samples'] / total:>6.1%} {agg['executed']:>10.0f}  {stall}")
    return 0


def role_segments(rows: list[dict]) -> list[tuple[str, list[dict]]]:
    """A warp-specialised kernel's SASS rows cut at its setmaxnreg sites, in address order
    (ptxas lays the register-lowering roles' branches out first, the raising role's last):
    one USETMAXREG.DEALLOC then one TRY_ALLOC (producer / consumers: fwd_ws.py,
    bwd_chain_ws.py), or two DEALLOCs then one TRY_ALLOC (copies / math / chain: the
    four-role kernels, fwd_ws4.py and bwd_chain_ws4.py). [] for any other kernel."""
    src = [r["Source"].strip() for r in rows]

    def sites(op):
        return [n for n, t in enumerate(src) if t.startswith(op) or f" {op}" in t]

    dealloc, alloc = sites("USETMAXREG.DEALLOC"), sites("USETMAXREG.TRY_ALLOC")
    if len(alloc) != 1 or not dealloc or dealloc[-1] > alloc[0] or len(dealloc) > 2:
        return []
    names = ("producer", "consumers") if len(dealloc) == 1 else ("copies", "math", "chain")
    cuts = dealloc + alloc + [len(rows)]
    return [("prologue", rows[:cuts[0]])] + [(n, rows[a:b]) for n, a, b in zip(names, cuts, cuts[1:])]


def opcode(source: str) -> str:
    """An instruction's opcode without its predicate and modifiers ("@!P0 HGMMA.64x64x16..."
    -> "HGMMA"; WARPGROUP.ARRIVE and WARPGROUP.DEPBAR stay apart: one is the wgmma fence, the
    other the wait for a group)."""
    words = [w for w in source.split() if not w.startswith("@")]
    if not words:
        return "?"
    parts = words[0].split(".")
    return ".".join(parts[:2]) if parts[0] == "WARPGROUP" else parts[0]


def opcode_samples(part: list[dict]) -> collections.Counter:
    """PC samples of `part` summed by opcode."""
    by = collections.Counter()
    for r in part:
        by[opcode(r["Source"])] += _num(r["Warp Stall Sampling (All Samples)"])
    return by


def print_roles(rows: list[dict], stalls: list[str], total: float) -> None:
    """Per role of a warp-specialised kernel (role_segments): instructions, samples,
    instructions executed, the top stalls and the opcodes holding the most samples (where
    a role waits; in the FROST kernels' profiles the wait at a BAR.SYNC.DEFER_BLOCKING
    shows on a later instruction, e.g. the next wgmma, rather than on the barrier)."""
    segments = role_segments(rows)
    if not segments:
        return
    print("\nroles (register split)")
    for name, part in segments:
        samples = sum(_num(r["Warp Stall Sampling (All Samples)"]) for r in part) or 1.0
        executed = sum(_num(r["Instructions Executed"]) for r in part)
        agg = collections.Counter()
        for r in part:
            for c in stalls:
                agg[c] += _num(r[c])
        top = ", ".join(f"{c[6:]} {v / samples:.0%}" for c, v in agg.most_common(5) if v)
        print(f"  {name:20s} {len(part):>5} instrs {samples:>8.0f} samples ({samples / total:.1%}) "
              f"{executed:>10.0f} executed  {top}")
        ops = ", ".join(f"{op} {v / samples:.0%}" for op, v in opcode_samples(part).most_common(5) if v)
        print(f"  {'':20s} by opcode: {ops}")

if __name__ == "__main__":
    raise SystemExit(main())
