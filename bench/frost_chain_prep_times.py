"""The backward chain kernel's time with its prep stages compiled out (a benchmark tool).

NOTES_bwd.md "Next: the chain without its prep" predicts what the chain gains if the
recompute path's forward stored the prep (the Gram products and inverses; the operand
tiles) and the chain read it instead of computing it. Before building that, this measures
the ceiling: the chain kernel of the product's config with stages replaced by nothing
(`--skip gram`, `--skip gram,operands`, ...), timed on the workspace a full backward
filled, against the same kernel with nothing skipped. A skipped stage leaves its tiles
stale, so the gradients are wrong: timing only.

    python3 bench/frost_chain_prep_times.py --family gdn [--skip gram[,operands[,rows]]]

One process per variant (the chain kernel with skipped stages is compiled, never taken
from or put in the compiled-kernel cache: its keys do not see the tooling subclass). The
chain runs inside a CUDA graph, so the times are the GPU's (the checked launcher's host
time stays out); median of --reps replays of 10 chains. Shape: 8 x 4096 tokens, 16
heads, K = V = 128, bf16.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "numerics"))

STAGES = ("rows", "operands", "gram")


def skipping(cls, skip: tuple[str, ...]):
    """A subclass of the chain kernel class whose skipped prep stages do nothing."""
    import cutlass.cute as cute

    attrs = {}
    if "rows" in skip:
        @cute.jit
        def stage_rows(self, s, mq, mk, mv, mg, mb, mw, heads, t0, eos, tid):
            pass
        attrs["stage_rows"] = stage_rows
    if "operands" in skip:
        @cute.jit
        def stage_operands(self, s, mb, heads, t0, eos, scale, tid):
            pass
        attrs["stage_operands"] = stage_operands
    if "gram" in skip:
        @cute.jit
        def stage_gram(self, s, mb, heads, t0, eos, scale, thr, lane, wid):
            pass
        attrs["stage_gram"] = stage_gram
    return type(cls.__name__ + "".join(f"Skip{st.title()}" for st in skip), (cls,), attrs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", default="gdn", choices=("gdn", "kda", "gdn2"))
    ap.add_argument("--skip", default="", help=f"comma-separated stages of {STAGES} to compile out of the chain")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args(argv)
    skip = tuple(st for st in args.skip.split(",") if st)
    if any(st not in STAGES for st in skip):
        ap.error(f"--skip takes stages of {STAGES}, got {args.skip!r}")

    import torch

    from cudnn.linear_attention.frost.kernels import bwd_compile, kernel_store
    from frost_bwd_profile import bench_shape_backward
    from la_frost_bwd_smoke import run_bwd

    if skip:
        product = bwd_compile.bwd_kernel_for

        def kernel_for(cfg):
            cls = product(cfg)
            return skipping(cls, skip) if cfg.stage == "chain" else cls

        bwd_compile.bwd_kernel_for = kernel_for
        stored = kernel_store.load_or_compile

        def load_or_compile(cfg, arch, ffi, compile_fn, *rest, **kw):
            if getattr(cfg, "stage", None) == "chain":
                return compile_fn()  # the skipping chain: never from or into the store
            return stored(cfg, arch, ffi, compile_fn, *rest, **kw)

        kernel_store.load_or_compile = load_or_compile

    x, dO, out, ws = bench_shape_backward(args.family)  # the chain's inputs in the workspace
    for _ in range(2):
        run_bwd(x, dO, None, False, out, ws, stages=("chain",))
    torch.cuda.synchronize()

    def ten_chains():
        for _ in range(10):
            run_bwd(x, dO, None, False, out, ws, stages=("chain",))

    run = ten_chains
    try:  # the GPU's time alone: the checked launcher's host work stays out of the graph
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            with torch.cuda.graph(graph, stream=side):
                ten_chains()
        torch.cuda.current_stream().wait_stream(side)
        run = graph.replay
    except Exception as exc:  # noqa: BLE001 - a timing tool: say so and time the launches
        print(f"note: no CUDA graph ({type(exc).__name__}: {exc}); timing 10 launches back to back, "
              "host time included where it exceeds the chain's", flush=True)
        torch.cuda.synchronize()
    run()
    torch.cuda.synchronize()
    times = []
    for _ in range(args.reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 10)
    ms = sorted(times)[len(times) // 2]
    print(f"TIME {args.family} chain skip={'+'.join(skip) or 'none'} {ms:.4f} ms "
          f"({ms / 64 * 1e3:.2f} us per chunk; {torch.cuda.get_device_name()}, 8 x 4096, 16 heads, "
          f"median of {args.reps})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
