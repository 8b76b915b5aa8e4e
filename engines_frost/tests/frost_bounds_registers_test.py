"""The cu_seqlens safety must not change what ptxas makes of the FROST forward's chunk loop
(sm_90a, no GPU).

The safety (seq_bounds.py: bounds clamped into [0, T], zeros into the output rows no
sequence covers) is a handful of instructions, yet while the zeroing ran in the chunk
loop's CTAs (after the loop, warp 0 of the last sequence's CTAs) ptxas allocated that
kernel differently: pipelined GDN 172 registers against 233 with the safety compiled out, and
+26 us of 0.48 ms on the H200 (bench/cu_seqlens_cost.py). The zeroing now runs in CTAs of
its own (FrostFwdMma.grid's extra row), so the loop's CTAs never reach it. Each case
compiles the shipped kernel and the same config with the tooling's skip_stages =
("bounds",) (frost_fwd_experiments.py; what cu_seqlens_cost times against) and asserts: no local memory or stack
(a spill sits in the serial chunk chain) and no fewer registers than the bounds-free
kernel, up to MARGIN. Narrow and wide allocations of one kernel differ by 45-60
registers, the same allocation by a few, so a change that brings zeroing (or other
safety code) back onto the loop's path and the narrow allocation with it fails here.

One direction only: the bounds-free kernel is not always the wide one (pipelined KDA compiles
it at 186 registers, the shipped kernel at 238), and wider than that reference is what
the safety's cost measurement showed to be faster (KDA: -25 us with the safety).
Skips where cuobjdump or CuTe DSL is absent; 24 compiles, 3-15 s each.

The matrix's core (compile_tiers; 10 of the 24 compiles, ~40 s on one core, the full
matrix ~135 s): the product's forwards at the bench's K = V = 128, wgmma (bf16 on sm_90a) for
every family and GDN's training forward on it, and pipelined (fp16, and every forward off sm_90a)
for GDN, where the zeroing first cost the allocation. pipelined for KDA and GDN-2 and the other
training forwards wait for FROST_FULL_MATRIX=1.
"""
import dataclasses
import os
import sys
import tempfile

import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import frost_cubin_report as report  # noqa: E402
from compile_tiers import tiered  # noqa: E402
from frost_fwd_experiments import tooling_config  # noqa: E402

pytestmark = pytest.mark.skipif(report.tool("CUOBJDUMP", "cuobjdump") is None,
                                reason="cuobjdump not found (set CUOBJDUMP)")

#: registers the shipped kernel may have fewer than the bounds-free one: the same
#: allocation of the two differs by 0-4 (mma/pipelined/wgmma, every family), a narrow one by 45+
MARGIN = 8

CASES = [  # (algorithm, family, training forward: write_checkpoints and write_values)
    ("pipelined", fam, False) for fam in ("gdn", "kda", "gdn2")     # the other-GPU forward
] + [
    ("pipelined", fam, True) for fam in ("gdn", "kda", "gdn2")      # training calls on other GPUs
] + [
    ("wgmma", fam, False) for fam in ("gdn", "kda", "gdn2")     # the forward on sm_90a
] + [
    ("wgmma", fam, True) for fam in ("gdn", "kda", "gdn2")      # training calls on sm_90a
]


def usage(cfg):
    with tempfile.TemporaryDirectory() as tmp:
        return report.resource_usage(report.compile_cubin(cfg, tmp))


CORE = [("pipelined", "gdn", False), ("wgmma", "gdn", False), ("wgmma", "kda", False), ("wgmma", "gdn2", False), ("wgmma", "gdn", True)]


@pytest.mark.parametrize("case", tiered(CASES, [CASES.index(c) for c in CORE],
                                        ids=lambda c: f"{c[0]}-{c[1]}{'-training' if c[2] else ''}"))
def test_safety_keeps_the_loop_allocation(case):
    alg, family, training = case
    cfg = report.config_for(family, "pipelined", 128, 128, False)  # the benchmark's product config
    if training:
        cfg = dataclasses.replace(cfg, write_checkpoints=True, write_values=True)
    shipped = usage(tooling_config(cfg, alg))
    bare = usage(tooling_config(cfg, alg, skip_stages=("bounds",)))
    print(f"{alg} {family} training={training}: shipped {shipped}, bounds compiled out {bare}")
    assert shipped["LOCAL"] == 0 and shipped["STACK"] == 0, shipped
    assert shipped["REG"] >= bare["REG"] - MARGIN, (shipped, bare)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q", "-s"]))
