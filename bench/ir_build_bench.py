"""IR building and planning cost: a pointwise chain of N nodes, per node, in this process.

Run the same file under two Pythons to compare packages that both install a top-level
`cudnn` (this one and cudnn-frontend's `pygraph`; install the latter in a separate venv):

    PYTHONPATH=$(python3 tools/pythonpath.py) python3 bench/ir_build_bench.py
    /path/to/other-venv/bin/python bench/ir_build_bench.py --label cudnn-frontend

`--json FILE` writes the numbers; `--compare A.json B.json` prints the side-by-side table.
What is timed (CPU time of the process, `time.process_time`, so other jobs on a shared
machine are not counted; each cell is "median (best)" over `--reps` repetitions):
- build: a fresh graph, one input tensor and one scalar-like operand, then N nodes
  alternating add / relu, each reading the previous output; the chain's last output
  marked as a graph output. Reported as microseconds per node.
- plan (this package only): validate + create_execution_plans + explain_plans().render()
  of the 100-node chain. On a machine without the cuDNN backend no engine proposes a
  plan: planning raises cudnnGraphNotSupportedError and the explanation carries it (the
  whole path still runs: validation, freeze, candidates, backend answer, the error text).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

#: CPU time of this process: on a shared machine other jobs' time is not counted.
CLOCK = time.process_time

SIZES = (10, 100, 1000)


def build_chain(cudnn, n: int):
    D = cudnn.data_type
    g = cudnn.pygraph(io_data_type=D.FLOAT, intermediate_data_type=D.FLOAT,
                      compute_data_type=D.FLOAT)
    x = g.tensor(name="x", dim=[8, 64, 32], stride=[64 * 32, 32, 1], data_type=D.FLOAT)
    b = g.tensor(name="b", dim=[8, 64, 32], stride=[64 * 32, 32, 1], data_type=D.FLOAT)
    y = x
    for i in range(n):
        y = g.add(a=y, b=b) if i % 2 == 0 else g.relu(input=y)
    y.set_output(True)
    return g


def time_build(cudnn, n: int, reps: int) -> tuple[float, float]:
    """(median, best) microseconds per node of building an n-node chain."""
    build_chain(cudnn, n)  # warm
    samples = []
    for _ in range(reps):
        t0 = CLOCK()
        build_chain(cudnn, n)
        samples.append((CLOCK() - t0) / n * 1e6)
    return statistics.median(samples), min(samples)


def time_plan(cudnn, n: int, reps: int) -> tuple[float, float] | None:
    """(median, best) milliseconds of validate + create_execution_plans + explain (ours
    only)."""
    if not hasattr(cudnn.pygraph, "explain_plans"):
        return None

    def once() -> float:
        g = build_chain(cudnn, n)
        t0 = CLOCK()
        g.validate()
        try:
            g.create_execution_plans()
        except cudnn.cudnnGraphNotSupportedError:
            pass
        g.explain_plans().render()
        return (CLOCK() - t0) * 1e3

    once()
    samples = [once() for _ in range(reps)]
    return statistics.median(samples), min(samples)


def measure(label: str, reps: int) -> dict:
    import cudnn
    out = {"label": label, "python": sys.version.split()[0],
           "module": getattr(cudnn, "__file__", "?"),
           "version": str(getattr(cudnn, "backend_version_string", lambda: "")() if False
                          else getattr(cudnn, "__version__", "")),
           "build_us_per_node": {}, "plan_ms_100": None}
    for n in SIZES:
        out["build_us_per_node"][str(n)] = time_build(cudnn, n, reps if n < 1000 else
                                                      max(3, reps // 4))
    out["plan_ms_100"] = time_plan(cudnn, 100, reps)
    return out


def table(results: list[dict]) -> str:
    head = "| package | " + " | ".join(f"build, {n} nodes (us/node)" for n in SIZES) + \
        " | validate+plan+explain, 100 nodes (ms) |"
    lines = [head, "|" + "---|" * (len(SIZES) + 2)]
    for r in results:
        cells = ["{:.1f} ({:.1f})".format(*r["build_us_per_node"][str(n)]) for n in SIZES]
        plan = "-" if r["plan_ms_100"] is None else "{:.2f} ({:.2f})".format(*r["plan_ms_100"])
        lines.append(f"| {r['label']} {r['version']} | " + " | ".join(cells) + f" | {plan} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="cudnn-pygraph (this checkout)")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--json", help="write the results to this file")
    parser.add_argument("--compare", nargs="+", help="print the table of these JSON files")
    args = parser.parse_args()
    if args.compare:
        results = []
        for path in args.compare:
            with open(path, encoding="utf-8") as f:
                results.append(json.load(f))
        print(table(results))
        return 0
    result = measure(args.label, args.reps)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    print(table([result]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
