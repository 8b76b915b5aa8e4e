"""The vector-gate wgmma forward's next-chunk rows by bulk copies (fwd_wgmma.FrostFwdWgmma.rows_by_bulk,
the product's; sm_90a, no GPU).

The chain's in-loop prefetch of q, k, the gate rows (GDN-2: b and w) is one cp.async.bulk
per row onto an mbarrier, where the tooling's rows="async" build (FROST_FWD_ROWS=async)
keeps the pipelined layer's 16-byte cp.async: the product's build has no spill, stack or ptxas note; those
rows' 16-byte cp.async are gone from the loop (the first chunk's, before the loop, and
each warp's v columns stay cp.async), and every job's copies are there (a UBLKCP per row
of a warp's run, unrolled by four). The knob's rules: "async" for wgmma with per-channel
gates only; tooling_config drops it where it does not apply.
Numerics: on the GPU, the forward and backward smoke against float64 (stages frostsmoke,
frostbwd of tools/gpu/gpu_suite.sh); the A/B: stage fwdbulk.
"""
import os
import sys

import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import frost_cubin_report as report  # noqa: E402
from compile_tiers import tiered  # noqa: E402
from frost_fwd_experiments import FrostFwdExperiment, product_fields, tooling_config  # noqa: E402

#: 16-byte pieces per thread and chunk of one [64, 128] row tile at 256 threads: bf16 rows,
#: fp32 gate rows
BF16_PIECES = 64 * 128 * 2 // 16 // 256
F32_PIECES = 2 * BF16_PIECES
_TOOLS = pytest.mark.skipif(report.sass_tools_missing(), reason="cuobjdump / nvdisasm not found (set CUOBJDUMP, NVDISASM)")


def _build(cfg):
    notes, usage, ops = report.build_opcodes(cfg)
    return notes, usage, report.count_ops(ops, "LDGSTS.", ".128"), report.count_ops(ops, "UBLKCP")


@_TOOLS
@pytest.mark.parametrize("family,build,aligned", tiered(
    [("kda", "plain", True), ("gdn2", "plain", True), ("kda", "plain", False), ("kda", "recompute", True),
     ("gdn2", "values", True), ("gdn2", "checkpoints", False)], [0, 1, 2],
    ids=lambda c: f"{c[0]}-{c[1]}{'' if c[2] else '-gates-unaligned'}", unpack=True))
def test_bulk_rows_replace_the_loop_copies(family, build, aligned):
    product, async_rows = report.product_and_twin(family, build, aligned, rows="async")
    notes, usage, copies, ublk = _build(product)
    _, _, async_copies, async_ublk = _build(async_rows)
    assert notes == set() and usage["LOCAL"] == 0 and usage["STACK"] == 0, (notes, usage)
    assert async_ublk == 0, async_ublk
    # the loop's bulk jobs: q (with an output), k; GDN-2's b and w; the gate rows where
    # 16-byte aligned (else both builds copy them by 4-byte cp.async)
    bf16_jobs = product.write_output + 1 + 2 * (family == "gdn2")
    assert ublk == 4 * (bf16_jobs + aligned), (ublk, bf16_jobs)
    assert async_copies - copies == bf16_jobs * BF16_PIECES + aligned * F32_PIECES, (async_copies, copies)


def test_rows_knob_rules():
    kda = report.config_for("kda", "wgmma", 128, 128, True)
    gdn = report.config_for("gdn", "wgmma", 128, 128, True)
    assert tooling_config(gdn, "wgmma", rows="async") == tooling_config(gdn, "wgmma")  # dropped: scalar gates
    assert tooling_config(kda, "pipelined", rows="async") == tooling_config(kda, "pipelined")  # dropped: pipelined
    assert tooling_config(kda, "wgmma", rows="bulk") == kda  # the product's config, no experiment
    for algorithm, rows in (("wgmma", "tma"), ("pipelined", "async")):
        with pytest.raises(ValueError, match="rows must be one of"):
            FrostFwdExperiment(**product_fields(kda), algorithm=algorithm, rows=rows)
    label = tooling_config(kda, "wgmma", rows="async").kernel_label
    assert "rows-async" in label, label
    assert not tooling_config(kda, "wgmma", rows="async").kernel_class().ROWS_BY_BULK
