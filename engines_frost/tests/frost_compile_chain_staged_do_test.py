"""The vector-gate chain with dO staged in shared memory (sm_90a, no GPU).

FrostBwdConfig.chain_staged_do: the chain kernel copies chunk c - 1's dO rows into KE's
shared slot (cp.async, issued with the q / k / gate rows after the Gram's barrier) while
chunk c's chain step runs, and the rows stage reads them from there instead of loading
them from global memory inside the serial chain. Checked on the KDA and GDN-2 wgmma chains
(the product's class) and the serial chain: the build has no spill, stack or ptxas note;
the rows stage's 16-byte global loads of dO are gone (C V / (8 threads) per thread fewer
LDG.E.128), and as many 16-byte cp.async more at each of the two prefetch sites (before
the chunk loop and in it); the product's build (the flag off) is unchanged by the flag's
existence (its config compares equal to one that never names it).
Numerics: on the GPU, stage chaindo of tools/gpu/gpu_suite.sh (the backward smoke against
float64 with FROST_BWD_CHAIN_DO=1).
"""
import collections
import dataclasses
import os
import sys
import tempfile

import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import frost_cubin_report as report  # noqa: E402
from compile_tiers import tiered  # noqa: E402

#: the rows stage's dO rows per thread and chunk, in 16-byte (8-element) pieces: 64 x 128 / 8 / 256
DO_PIECES = 64 * 128 // 8 // 256


def _chain_config(family, wgmma):
    cfg = report.bwd_config_for(family, "chain", H=16, HV=16, h0=False)
    return dataclasses.replace(cfg, chain_wgmma=wgmma)


def _build(cfg):
    notes = set()
    with tempfile.TemporaryDirectory() as tmp:
        cubin = report.compile_bwd_cubin(cfg, tmp, notes)
        usage, sass = report.resource_usage(cubin), report.sass_instructions(cubin)
    ops = collections.Counter(next(w for w in line.split() if not w.startswith("@")) for line in sass if line.split())
    # 16-byte global loads and 16-byte cp.async, whatever their cache modifiers
    loads = sum(n for op, n in ops.items() if op.startswith("LDG.") and op.endswith(".128"))
    copies = sum(n for op, n in ops.items() if op.startswith("LDGSTS.") and op.endswith(".128"))
    return notes, usage, loads, copies


@pytest.mark.parametrize("family,wgmma", tiered([("kda", True), ("gdn2", True), ("kda", False)], [0],
                                                ids=lambda c: f"{c[0]}-{'wgmma' if c[1] else 'serial'}",
                                                unpack=True))
def test_staged_do_replaces_the_global_loads(family, wgmma):
    product = _chain_config(family, wgmma)
    staged = dataclasses.replace(product, chain_staged_do=True)
    notes, usage, loads, copies = _build(staged)
    _, _, base_loads, base_copies = _build(product)
    assert notes == set() and usage["LOCAL"] == 0 and usage["STACK"] == 0, (notes, usage)
    assert base_loads - loads == DO_PIECES, (base_loads, loads)
    assert copies - base_copies == 2 * DO_PIECES, (base_copies, copies)


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
    fields = {f.name: getattr(kda, f.name) for f in dataclasses.fields(FrostBwdConfig) if f.name != "chain_staged_do"}
    assert FrostBwdConfig(**fields) == kda
