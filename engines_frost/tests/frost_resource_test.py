"""ptxas's resource usage of the FROST tensor-core kernels: no register spills (sm_90a, no GPU).

The kernels run one CTA per SM with 2V threads and hold the state in registers, so ptxas
works at its 255-register ceiling; a spill (local memory or a stack frame) puts a
local-memory round trip into the serial chunk chain. Each case compiles through
frost_cubin_report (the same cute.compile the launch uses, keeping the cubin) and reads
cuobjdump --dump-resource-usage. The first v2 draft spilled 88 bytes at KDA K=V=64 fp16
(hoisted index arithmetic), which this catches. The GDN backward kernels likewise
(frost_cubin_report.compile_bwd_cubin); a draft of the grads kernel's cp.async load phase
kept a 32-byte stack frame for the element-wise copy of a transposed A operand, replaced
by ldmatrix.trans. Skips where cuobjdump or CuTe DSL is absent.

The matrix's core (compile_tiers; 8 builds, ~60 s on one core, the full matrix ~200 s):
the product's forwards, v3 for bf16 on sm_90a (every family at the bench's K = V = 128;
GDN's and KDA's no-spill checks on test_v3_state_update_retires_after_the_next_rows_stage's
builds, which test_no_spills would repeat with l2norm off) and v2 for fp16 (KDA at
K = V = 64, where v2's first draft spilled, with its gates 16- and 4-byte aligned: the
awkward config), v2's training launcher for KDA (the product's training forward off
sm_90a), and where v3's chain retires its state update in GDN's and KDA's plain builds and
GDN's recompute. v1 (tooling only), v2's bf16 builds at other configs, v3 forced onto
fp16, the other families' v2 training builds, the output-free summary build and the
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
    (alg, fam, 128, 128, False, "bfloat16", True) for alg in ("v1", "v2") for fam in ("gdn", "kda", "gdn2")
] + [
    ("v2", "kda", 128, 128, False, "bfloat16", False),
    ("v2", "kda", 64, 64, False, "float16", True),
    ("v2", "kda", 64, 64, False, "float16", False),
    ("v2", "kda", 64, 128, True, "bfloat16", True),
    ("v2", "gdn2", 128, 64, True, "float16", True),
] + [  # v3: the wgmma accumulators share the state's registers (no copies), so no growth expected
    ("v3", fam, 128, 128, False, "bfloat16", True) for fam in ("gdn", "kda", "gdn2")
] + [
    ("v3", "kda", 64, 64, False, "float16", False),
    ("v3", "gdn2", 128, 64, True, "float16", True),
    ("v3", "kda", 128, 128, True, "bfloat16", True),
]


@pytest.mark.parametrize("case", tiered(  # core: v3 bf16 GDN-2, v3 fp16 (KDA K = V = 64, GDN-2 K = 128 V = 64),
    CASES, [13, 14, 15, 7],               # v2 fp16 KDA K = V = 64 (the forward on other archs); v3 bf16 GDN's
    # and KDA's spills are checked on test_v3_state_update_retires_after_the_next_rows_stage's
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
def test_v3_gdn_l2norm_adds_only_v2s_rows_code():
    """On the H200 smoke, use_l2norm cost v3 GDN 0.216 ms and v2 0.037 ms (NOTES.md, v3).
    What ptxas made of it says the kernel is not why: for v3 and v2 the q/k L2 norms are
    the same rows-stage code (fwd_mma.qk_hat, in place on the staged rows), v3 GDN with
    l2norm keeps 250 registers and no local memory, every region after the rows stage is
    identical with and without l2norm, and l2norm adds the same instructions to v3's rows
    stage as to v2's. A v3 change that made the norms cost more (recomputed per product,
    moved into the chain, spilled around the wgmma accumulators) fails here. (v3 with the
    decays folded, the chain these numbers were measured on; the product's GDN chain has
    them as factors now.)"""
    if report.tool("NVDISASM", "nvdisasm") is None:
        pytest.skip("nvdisasm not found (set NVDISASM)")
    regions = {}
    for alg in ("v2", "v3"):
        for l2 in (False, True):
            with tempfile.TemporaryDirectory() as tmp:
                cubin = report.compile_cubin(report.config_for("gdn", alg, 128, 128, l2, "bfloat16",
                                                               decay="folded"), tmp)
                usage = report.resource_usage(cubin)
                assert usage["LOCAL"] == 0 and usage["STACK"] == 0, (alg, l2, usage)
                regions[alg, l2] = _regions(cubin)
    plain, normed = regions["v3", False], regions["v3", True]
    assert len(plain) == len(normed) == 6, [len(r) for r in (plain, normed)]  # init, rows, operands, gram, chain, tail
    assert plain[0] == normed[0] and plain[2:] == normed[2:], "l2norm changed v3 outside the rows stage"

    def added(alg):  # instructions l2norm adds to the rows stage, by opcode family
        ops = lambda r: collections.Counter(re.sub(r"^@!?P\s+", "", i).split()[0].split(".")[0] for i in r)  # noqa: E731
        with_l2, without = ops(regions[alg, True][1]), ops(regions[alg, False][1])
        return {op: with_l2[op] - without[op] for op in set(with_l2) | set(without) if with_l2[op] != without[op]}

    v2_added, v3_added = added("v2"), added("v3")
    for op in ("SHFL", "MUFU", "LDS", "STS", "FFMA"):
        assert v3_added.get(op, 0) == v2_added.get(op, 0), (op, v3_added, v2_added)
    assert abs(sum(v3_added.values()) - sum(v2_added.values())) <= 0.05 * sum(v2_added.values()), \
        (v3_added, v2_added)


@pytest.mark.parametrize("family", tiered(["gdn", "kda", "gdn2"], [1]))
def test_training_forward_no_spills(family):
    """The v2 forward writing checkpoints (16-byte stores through the quad exchange,
    fragment_stores.py) and U (write_values; the product's training forward on archs other
    than sm_90a, v3's there: frost_compile_wgmma_test): still no local memory, every family."""
    import dataclasses

    with tempfile.TemporaryDirectory() as tmp:
        cfg = dataclasses.replace(report.config_for(family, "v2", 128, 128, False, "bfloat16", True),
                                  write_checkpoints=True, write_values=True)
        usage = report.resource_usage(report.compile_cubin(cfg, tmp))
    print(f"{family} training forward: {usage}")
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, usage
    assert usage["REG"] <= 255, usage


@pytest.mark.parametrize("family,build", tiered(  # core: GDN's and KDA's plain builds, GDN's recompute
    [("gdn", "plain"), ("gdn", "recompute"), ("kda", "plain"), ("gdn2", "no-output")], [0, 1, 2],
    ids=lambda c: f"{c[0]}-{c[1]}", unpack=True))
def test_v3_state_update_retires_after_the_next_rows_stage(family, build):
    """v3's chain leaves its last wgmma group (the state update S^T <- S^T D + U^T KD, N = K)
    in flight; fwd_wgmma.settle_state retires it at the end of the next chunk's rows stage,
    before that stage's barrier (the operand stage then rewrites KD^T), and after the loop.
    In the SASS: the chain region issues the HGMMA.64x128 and waits for nothing after it
    (no DEPBAR to zero groups: ptxas did not serialise the group either), and the rows
    region's last instructions wait for zero groups right before its barrier. Every build:
    no local memory or stack (test_no_spills' check of v3 bf16 GDN and KDA, made on these
    builds). The plain builds (the product's forwards at the bench's config): no ptxas
    performance note either (frost_ptxas_notes_test's gdn and kda, read from this build)."""
    notes = set() if build == "plain" else None
    with tempfile.TemporaryDirectory() as tmp:
        cubin = report.compile_cubin(report.config_for(family, "v3", 128, 128, True, "bfloat16", build=build), tmp,
                                     notes)
        usage = report.resource_usage(cubin)
        print(f"v3 {family} {build}: {usage}")
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
