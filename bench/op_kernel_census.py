"""Which GPU kernels one public-op call launches, and the device time of each.

    python3 bench/op_kernel_census.py [--family gdn,kda,gdn2] [--mode fwd+bwd|fwd] [--calls 10]

Runs the op as bench_linear_attention.py times it (the bench shape by default: 8 x 4096
tokens, 16 heads, K = V = 128, bf16; forward, then autograd's backward w.r.t. every input),
warm, `--calls` times under torch.profiler, and prints per kernel name: launches per call,
device us per call, share of the call's device time. What the FROST kernels leave to the
rest of the op (casts, zero fills, reductions the op does in torch) shows as the rows that
are not FROST's: the gap between the op's time and the kernels' time in the bench's tables.
Under torch.profiler the op takes the dispatcher path (ops/_direct_call.py: a profiler
must see the op), whose autograd recomputes the states in the backward: the opt-in training
checkpoints (set_training_checkpoints) belong to the eager path, so a census of fwd+bwd is
one of the recompute path whatever that setting. A benchmark tool, not a test: it checks
nothing.
"""
from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def census(step, calls: int):
    """{kernel name: (launches, device us)} summed over `calls` calls of step()."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):  # compile, plan, autotune and allocate outside the window
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            step()
        torch.cuda.synchronize()
    rows = collections.defaultdict(lambda: [0, 0.0])
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA and ev.device_time_total > 0:
            rows[ev.name][0] += 1
            rows[ev.name][1] += ev.device_time_total
    return rows


def short_name(name: str) -> str:
    """A CuTe DSL kernel's module and class (its mangled name spells the path and the
    arguments: `...frostkernelsfwd_wgmmaFrostFwdWgmma_object_at__tensorptr...`), else the name
    cut to 90 characters."""
    m = re.search(r"frostkernels(\w+?)_object_at", name)
    if m:
        return "FROST " + m.group(1)
    return name if len(name) <= 90 else name[:60] + "..." + name[-27:]


def print_census(title: str, rows, calls: int) -> None:
    total = sum(us for _, us in rows.values()) or 1.0
    print(f"\n{title}: {total / calls:.1f} us of kernels per call")
    print("| kernel | launches per call | us per call | share |")
    print("|---|---|---|---|")
    for name, (n, us) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
        print(f"| {short_name(name)} | {n / calls:g} | {us / calls:.1f} | {100 * us / total:.1f} % |")


def main():
    import torch

    from bench_linear_attention import make_inputs, op_fwd_bwd_runner, op_fwd_runner

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", default="gdn,kda,gdn2")
    p.add_argument("--mode", choices=("fwd+bwd", "fwd"), default="fwd+bwd")
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--seqs", type=int, default=8)
    p.add_argument("--len", type=int, default=4096)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--dim", type=int, default=128)
    a = p.parse_args()
    print(f"GPU: {torch.cuda.get_device_name()}; {a.seqs} x {a.len} tokens, {a.heads} heads, "
          f"K = V = {a.dim}, bfloat16; {a.mode}")
    for family in a.family.split(","):
        inp = make_inputs(a.seqs, a.len, a.heads, a.dim, a.dim, family != "gdn")
        if a.mode == "fwd":
            step = op_fwd_runner(inp, family)
        else:
            step = op_fwd_bwd_runner(inp, family)
        print_census(f"{family} {a.mode}", census(step, a.calls), a.calls)


if __name__ == "__main__":
    main()
