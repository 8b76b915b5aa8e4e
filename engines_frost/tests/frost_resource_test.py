"""ptxas's resource usage of the FROST tensor-core kernels: no register spills (sm_90a, no GPU).

The kernels run one CTA per SM with 2V threads and hold the state in registers, so ptxas
works at its 255-register ceiling; a spill (local memory or a stack frame) puts a
local-memory round trip into the serial chunk chain. Each case compiles through
frost_cubin_report (the same cute.compile the launch uses, keeping the cubin) and reads
cuobjdump --dump-resource-usage. The first pipelined draft spilled 88 bytes at KDA K=V=64 fp16
(hoisted index arithmetic), which this catches. The GDN backward kernels likewise
(frost_cubin_report.compile_bwd_cubin); a draft of the grads kernel's cp.async load phase
kept a 32-byte stack frame for the element-wise copy of a transposed A operand, replaced
by ldmatrix.trans. Skips where cuobjdump or CuTe DSL is absent.

The matrix's core (compile_tiers; 8 builds, ~60 s on one core, the full matrix ~200 s):
the product's forwards, wgmma for bf16 on sm_90a (every family at the bench's K = V = 128;
GDN's and KDA's no-spill checks on test_wgmma_state_update_retires_after_the_next_rows_stage's
builds, which test_no_spills would repeat with l2norm off) and pipelined for fp16 (KDA at
K = V = 64, where the pipelined layer's first draft spilled, with its gates 16- and 4-byte aligned: the
awkward config), the pipelined layer's training launcher for KDA (the product's training forward off
sm_90a), and where the wgmma layer's chain retires its state update in GDN's and KDA's plain builds and
GDN's recompute. mma (tooling only), the pipelined layer's bf16 builds at other configs, wgmma forced onto
fp16, the other families' pipelined training builds, the output-free summary build and the
l2norm investigation (on the folded GDN chain the product no longer runs) wait for
FROST_FULL_MATRIX=1.
"""
import collections
import os
import re
import sys
import tempfile

import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import frost_cubin_report as report  # noqa: E402
from compile_tiers import FULL_ENV, full_matrix, tiered  # noqa: E402

pytestmark = pytest.mark.skipif(report.tool("CUOBJDUMP", "cuobjdump") is None,
                                reason="cuobjdump not found (set CUOBJDUMP)")

CASES = [  # (algorithm, family, K, V, l2norm, io, vector gates 16-byte aligned)
    (alg, fam, 128, 128, False, "bfloat16", True) for alg in ("mma", "pipelined") for fam in ("gdn", "kda", "gdn2")
] + [
    ("pipelined", "kda", 128, 128, False, "bfloat16", False),
    ("pipelined", "kda", 64, 64, False, "float16", True),
    ("pipelined", "kda", 64, 64, False, "float16", False),
    ("pipelined", "kda", 64, 128, True, "bfloat16", True),
    ("pipelined", "gdn2", 128, 64, True, "float16", True),
] + [  # wgmma: the wgmma accumulators share the state's registers (no copies), so no growth expected
    ("wgmma", fam, 128, 128, False, "bfloat16", True) for fam in ("gdn", "kda", "gdn2")
] + [
    ("wgmma", "kda", 64, 64, False, "float16", False),
    ("wgmma", "gdn2", 128, 64, True, "float16", True),
    ("wgmma", "kda", 128, 128, True, "bfloat16", True),
]


@pytest.mark.parametrize("case", tiered(  # core: wgmma bf16 GDN-2, wgmma fp16 (KDA K = V = 64, GDN-2 K = 128 V = 64),
    CASES, [13, 14, 15, 7],               # pipelined fp16 KDA K = V = 64 (the forward on other archs); wgmma bf16 GDN's
    # and KDA's spills are checked on test_wgmma_state_update_retires_after_the_next_rows_stage's
    # plain builds (the bench's config with l2norm: the larger rows stage), one build each
    ids=lambda c: f"{c[0]}-{c[1]}-K{c[2]}V{c[3]}-l2{int(c[4])}-{c[5]}-galign{16 if c[6] else 4}"))
def test_no_spills(case):
    alg, fam, K, V, l2, io, align16 = case
    with tempfile.TemporaryDirectory() as tmp:
        usage = report.resource_usage(report.compile_cubin(report.config_for(fam, alg, K, V, l2, io, align16), tmp))
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, usage
    assert usage["REG"] <= 255, usage


def _regions(cubin):
    """The SASS between CTA barriers (frost_cubin_report's regions), register and
    predicate names blanked so that two allocations of the same code compare equal."""
    regions, cur = [], []
    for ins in report.sass_instructions(cubin):
        cur.append(re.sub(r"\bU?P[0-6T]\b", "P", re.sub(r"\bU?R\d+\b", "R", ins)))
        if "BAR.SYNC" in ins:
            regions.append(cur)
            cur = []
    return regions + [cur]


@pytest.mark.skipif(not full_matrix(), reason=f"outside the matrix's core: set {FULL_ENV}=1 to run it")
def test_wgmma_gdn_l2norm_adds_only_the_pipelined_rows_code():
    """On the H200 smoke, use_l2norm cost wgmma GDN 0.216 ms and pipelined 0.037 ms (NOTES.md, the wgmma layer's first H200 run).
    What ptxas made of it says the kernel is not why: for wgmma and pipelined the q/k L2 norms are
    the same rows-stage code (fwd_mma.qk_hat, in place on the staged rows), wgmma GDN with
    l2norm keeps 250 registers and no local memory, every region after the rows stage is
    identical with and without l2norm, and l2norm adds the same instructions to the wgmma layer's rows
    stage as to the pipelined layer's. A wgmma change that made the norms cost more (recomputed per product,
    moved into the chain, spilled around the wgmma accumulators) fails here. (wgmma with the
    decays folded, the chain these numbers were measured on; the product's GDN chain has
    them as factors now.)"""
    if report.tool("NVDISASM", "nvdisasm") is None:
        pytest.skip("nvdisasm not found (set NVDISASM)")
    regions = {}
    for alg in ("pipelined", "wgmma"):
        for l2 in (False, True):
            with tempfile.TemporaryDirectory() as tmp:
                cubin = report.compile_cubin(report.config_for("gdn", alg, 128, 128, l2, "bfloat16",
                                                               decay="folded"), tmp)
                usage = report.resource_usage(cubin)
                assert usage["LOCAL"] == 0 and usage["STACK"] == 0, (alg, l2, usage)
                regions[alg, l2] = _regions(cubin)
    plain, normed = regions["wgmma", False], regions["wgmma", True]
    assert len(plain) == len(normed) == 6, [len(r) for r in (plain, normed)]  # init, rows, operands, gram, chain, tail
    assert plain[0] == normed[0] and plain[2:] == normed[2:], "l2norm changed wgmma outside the rows stage"

    def added(alg):  # instructions l2norm adds to the rows stage, by opcode family
        ops = lambda r: collections.Counter(re.sub(r"^@!?P\s+", "", i).split()[0].split(".")[0] for i in r)  # noqa: E731
        with_l2, without = ops(regions[alg, True][1]), ops(regions[alg, False][1])
        return {op: with_l2[op] - without[op] for op in set(with_l2) | set(without) if with_l2[op] != without[op]}

    pipelined_added, wgmma_added = added("pipelined"), added("wgmma")
    for op in ("SHFL", "MUFU", "LDS", "STS", "FFMA"):
        assert wgmma_added.get(op, 0) == pipelined_added.get(op, 0), (op, wgmma_added, pipelined_added)
    assert abs(sum(wgmma_added.values()) - sum(pipelined_added.values())) <= 0.05 * sum(pipelined_added.values()), \
        (wgmma_added, pipelined_added)


@pytest.mark.parametrize("family", tiered(["gdn", "kda", "gdn2"], [1]))
def test_training_forward_no_spills(family):
    """The pipelined forward writing checkpoints (16-byte stores through the quad exchange,
    fragment_stores.py) and U (write_values; the product's training forward on archs other
    than sm_90a, the wgmma layer's there: frost_compile_wgmma_test): still no local memory, every family."""
    import dataclasses

    with tempfile.TemporaryDirectory() as tmp:
        cfg = dataclasses.replace(report.config_for(family, "pipelined", 128, 128, False, "bfloat16", True),
                                  write_checkpoints=True, write_values=True)
        usage = report.resource_usage(report.compile_cubin(cfg, tmp))
    print(f"{family} training forward: {usage}")
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, usage
    assert usage["REG"] <= 255, usage


@pytest.mark.parametrize("family,build", tiered(  # core: GDN's and KDA's plain builds, GDN's recompute
    [("gdn", "plain"), ("gdn", "recompute"), ("kda", "plain"), ("gdn2", "no-output")], [0, 1, 2],
    ids=lambda c: f"{c[0]}-{c[1]}", unpack=True))
def test_wgmma_state_update_retires_after_the_next_rows_stage(family, build):
    """The wgmma layer's chain leaves its last wgmma group (the state update S^T <- S^T D + U^T KD, N = K)
    in flight; fwd_wgmma.settle_state retires it at the end of the next chunk's rows stage,
    before that stage's barrier (the operand stage then rewrites KD^T), and after the loop.
    In the SASS: the chain region issues the HGMMA.64x128 and waits for nothing after it
    (no DEPBAR to zero groups: ptxas did not serialise the group either), and the rows
    region's last instructions wait for zero groups right before its barrier. Every build:
    no local memory or stack (test_no_spills' check of wgmma bf16 GDN and KDA, made on these
    builds). The plain builds (the product's forwards at the bench's config): no ptxas
    performance note either (frost_ptxas_notes_test's gdn and kda, read from this build)."""
    notes = set() if build == "plain" else None
    with tempfile.TemporaryDirectory() as tmp:
        cubin = report.compile_cubin(report.config_for(family, "wgmma", 128, 128, True, "bfloat16", build=build), tmp,
                                     notes)
        usage = report.resource_usage(cubin)
        print(f"wgmma {family} {build}: {usage}")
        assert usage["LOCAL"] == 0 and usage["STACK"] == 0, usage
        assert usage["REG"] <= 255, usage
        assert not notes, notes
        if report.tool("NVDISASM", "nvdisasm") is None:
            pytest.skip("nvdisasm not found (set NVDISASM): resources and notes checked, the SASS not")
        regions = _regions(cubin)
    assert len(regions) == 6, [len(r) for r in regions]  # init, rows, operands, gram, chain, tail
    rows, chain, tail = regions[1], regions[4], regions[5]
    update = [i for i, ins in enumerate(chain) if ins.startswith("HGMMA.64x128x16")]
    assert update, "no state update (HGMMA.64x128x16) in the chain region"
    drained = [i for i, ins in enumerate(chain) if "DEPBAR.LE gsb0, 0x0" in ins]
    assert not drained or max(drained) < min(update), "the chain waits for its state update"
    assert any("DEPBAR.LE gsb0, 0x0" in ins for ins in rows[-4:]), rows[-4:]
    assert any("DEPBAR.LE gsb0, 0x0" in ins for ins in tail[:8]), tail[:8]


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
