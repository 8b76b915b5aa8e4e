"""The vector-gate v3 forward's operand stage with per-block exponent tables (the tooling's
exps="tables", fwd_v3.FrostFwdV3.EXP_TABLES; sm_90a, no GPU).

The operand stage forms e^Gam and e^(Gam_last - Gam) as products of a table entry (per
16-row block and channel, written by the gate scan) and the two exponents it computes for
the Gram rows and KE, so each thread's 32 elements per chunk take 2 ex2 instead of 4: the
build has 64 MUFU.EX2 fewer in the (unrolled) operand stage and the scan's 8 more, no
spill, stack or ptxas note, and 4 KB more shared memory (K = 128). The product's build is
unchanged by the knob's existence (its class has EXP_TABLES off and v3's plan).
Numerics: on the GPU, the forward and backward smoke against float64 with
FROST_FWD_EXPS=tables (tools/gpu/gpu_suite.sh fwdexps).
"""
import collections
import os
import sys
import tempfile

import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import frost_cubin_report as report  # noqa: E402
from compile_tiers import tiered  # noqa: E402
from frost_fwd_experiments import FrostFwdExperiment, product_fields, tooling_config  # noqa: E402

#: elements of the operand stage per thread and chunk: 64 rows x 128 channels / 256 threads
ELEMENTS = 64 * 128 // 256
_TOOLS = pytest.mark.skipif(report.tool("CUOBJDUMP", "cuobjdump") is None or report.tool("NVDISASM", "nvdisasm") is None,
                            reason="cuobjdump / nvdisasm not found (set CUOBJDUMP, NVDISASM)")


def _build(cfg):
    notes = set()
    with tempfile.TemporaryDirectory() as tmp:
        cubin = report.compile_cubin(cfg, tmp, notes)
        usage, sass = report.resource_usage(cubin), report.sass_instructions(cubin)
    ops = collections.Counter(next(w for w in line.split() if not w.startswith("@")) for line in sass if line.split())
    return notes, usage, ops["MUFU.EX2"]


@_TOOLS
@pytest.mark.parametrize("family,build", tiered([("kda", "plain"), ("gdn2", "checkpoints"), ("kda", "recompute")],
                                                 [0], ids=lambda c: f"{c[0]}-{c[1]}", unpack=True))
def test_tables_halve_the_operand_exponents(family, build):
    product = report.config_for(family, "v3", 128, 128, True, build=build)
    tables = tooling_config(product, "v3", exps="tables")
    assert isinstance(tables, FrostFwdExperiment) and tables.exps == "tables"
    notes, usage, ex2 = _build(tables)
    _, _, product_ex2 = _build(product)
    assert notes == set() and usage["LOCAL"] == 0 and usage["STACK"] == 0, (notes, usage)
    assert product_ex2 - ex2 == 2 * ELEMENTS - 8, (product_ex2, ex2)


def test_exps_knob_rules(monkeypatch):
    from cudnn.linear_attention.frost.kernels.fwd_v1 import smem_bytes

    from frost_fwd_experiments import EXPS_ENV, exps_requested

    kda = report.config_for("kda", "v3", 128, 128, True)
    gdn = report.config_for("gdn", "v3", 128, 128, True)
    assert tooling_config(gdn, "v3", exps="tables") == tooling_config(gdn, "v3")  # dropped: scalar gates
    assert tooling_config(kda, "v2", exps="tables") == tooling_config(kda, "v2")  # dropped: v2
    assert tooling_config(kda, "v3", exps="direct") == kda
    for algorithm, exps in (("v3", "fast"), ("v2", "tables")):
        with pytest.raises(ValueError, match="exps must be one of"):
            FrostFwdExperiment(**product_fields(kda), algorithm=algorithm, exps=exps)
    tables = tooling_config(kda, "v3", exps="tables")
    assert "exps-tables" in tables.kernel_label
    cls, product_cls = tables.kernel_class(), tooling_config(kda, "v3", rows="async").kernel_class().__mro__[1]
    assert cls.EXP_TABLES and not product_cls.EXP_TABLES
    assert smem_bytes(kda, cls.smem_plan) - smem_bytes(kda, product_cls.smem_plan) == 2 * 4 * 128 * 4
    monkeypatch.delenv(EXPS_ENV, raising=False)
    assert exps_requested() == "direct"
    monkeypatch.setenv(EXPS_ENV, "tables")
    assert exps_requested() == "tables"
    monkeypatch.setenv(EXPS_ENV, "fast")
    with pytest.raises(ValueError, match="FROST_FWD_EXPS must be one of"):
        exps_requested()
