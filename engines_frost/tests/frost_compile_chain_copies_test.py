"""The vector-gate chain's next-chunk copies: dO staged in shared memory, the rows by bulk
copies (sm_90a, no GPU).

FrostBwdConfig.chain_staged_do: the chain kernel copies chunk c - 1's dO rows into KE's
shared slot (cp.async, issued with the q / k / gate rows after the Gram's barrier) while
chunk c's chain step runs, and the rows stage reads them from there instead of loading
them from global memory inside the serial chain. Checked on the KDA and GDN-2 wgmma chains
(the product's class) and the serial chain: the build has no spill, stack or ptxas note;
the rows stage's 16-byte global loads of dO are gone (C V / (8 threads) per thread fewer
LDG.E.128), and as many 16-byte cp.async more at each of the two prefetch sites (before
the chunk loop and in it); the product's build (the flag off) is unchanged by the flag's
existence (its config compares equal to one that never names it).
FrostBwdConfig.chain_bulk_rows: the same rows (and the staged dO) by one cp.async.bulk
each onto an mbarrier (bulk_rows.py): no 16-byte cp.async is left in the kernel, every
job's copies are there (a UBLKCP per row of a warp's run, unrolled by four, per issue
site), no spill or note.
Both are the product's for vector gates (bwd.product_choice; the test tooling's
FROST_BWD_CHAIN_DO=0, FROST_BWD_CHAIN_BULK=0 turn them off). Numerics: on the GPU, the backward smoke against float64 (stage frostbwd
of tools/gpu/gpu_suite.sh); the A/B: stage chainbulk.
"""
import dataclasses
import os
import sys

import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import frost_cubin_report as report  # noqa: E402
from compile_tiers import tiered  # noqa: E402

_TOOLS = pytest.mark.skipif(report.sass_tools_missing(), reason="cuobjdump / nvdisasm not found (set CUOBJDUMP, NVDISASM)")
#: the rows stage's dO rows per thread and chunk, in 16-byte (8-element) pieces: 64 x 128 / 8 / 256
DO_PIECES = 64 * 128 // 8 // 256


def _chain_config(family, wgmma):
    cfg = report.bwd_config_for(family, "chain", H=16, HV=16, h0=False)
    return dataclasses.replace(cfg, chain_wgmma=wgmma)


def _build(cfg):
    notes, usage, ops = report.build_opcodes(cfg, backward=True)
    # 16-byte global loads and 16-byte cp.async, whatever their cache modifiers; bulk copies
    return (notes, usage, report.count_ops(ops, "LDG.", ".128"), report.count_ops(ops, "LDGSTS.", ".128"),
            report.count_ops(ops, "UBLKCP"))


@_TOOLS
@pytest.mark.parametrize("family,wgmma", tiered([("kda", True), ("gdn2", True), ("kda", False)], [0],
                                                ids=lambda c: f"{c[0]}-{'wgmma' if c[1] else 'serial'}",
                                                unpack=True))
def test_staged_do_replaces_the_global_loads(family, wgmma):
    product = _chain_config(family, wgmma)
    staged = dataclasses.replace(product, chain_staged_do=True)
    notes, usage, loads, copies, _ = _build(staged)
    _, _, base_loads, base_copies, _ = _build(product)
    assert notes == set() and usage["LOCAL"] == 0 and usage["STACK"] == 0, (notes, usage)
    assert base_loads - loads == DO_PIECES, (base_loads, loads)
    assert copies - base_copies == 2 * DO_PIECES, (base_copies, copies)


@_TOOLS
@pytest.mark.parametrize("family,staged_do", tiered([("kda", False), ("gdn2", True), ("kda", True)], [0],
                                                   ids=lambda c: f"{c[0]}{'-staged-do' if c[1] else ''}",
                                                   unpack=True))
def test_bulk_rows_replace_the_copies(family, staged_do):
    cfg = dataclasses.replace(_chain_config(family, True), chain_bulk_rows=True, chain_staged_do=staged_do)
    notes, usage, loads, copies, bulk = _build(cfg)
    assert notes == set() and usage["LOCAL"] == 0 and usage["STACK"] == 0, (notes, usage)
    assert copies == 0, copies  # no 16-byte cp.async left (KDA's scalar beta: 4-byte ones)
    # per issue site (before the loop, in it) each job's run loop, unrolled by four:
    # q, k, the gate rows; GDN-2's b and w; the staged dO
    jobs = 3 + 2 * (family == "gdn2") + staged_do
    assert bulk == 2 * 4 * jobs, (bulk, jobs)
    if staged_do:
        assert loads == 0, loads  # no dO row read from global memory in the rows stage


def test_staged_do_config_rules():
    """The flag is the chain's alone (with_stage drops it elsewhere) and needs vector gates
    with K >= V; a config that leaves it unset equals the product's."""
    from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig

    kda = _chain_config("kda", True)
    on = dataclasses.replace(kda, chain_staged_do=True)
    assert on.with_stage("chain").chain_staged_do
    for stage in ("states", "grads"):
        assert on.with_stage(stage) == kda.with_stage(stage)
    with pytest.raises(ValueError, match="chain_staged_do must be False unless the gates are per channel"):
        dataclasses.replace(_chain_config("gdn", True), chain_staged_do=True)
    narrow = report.bwd_config_for("kda", "chain", K=64, V=128, h0=False)
    with pytest.raises(ValueError, match="K >= V"):
        dataclasses.replace(narrow, chain_staged_do=True)
    fields = {f.name: getattr(kda, f.name) for f in dataclasses.fields(FrostBwdConfig)
              if f.name not in ("chain_staged_do", "chain_bulk_rows")}
    assert FrostBwdConfig(**fields) == kda
    bulk = dataclasses.replace(kda, chain_bulk_rows=True)
    for stage in ("states", "grads"):
        assert bulk.with_stage(stage) == kda.with_stage(stage)
    with pytest.raises(ValueError, match="chain_bulk_rows must be False unless the gates are per channel"):
        dataclasses.replace(_chain_config("gdn", True), chain_bulk_rows=True)
