"""The vector-gate wgmma forward's O and U rows through per-warp shared buffers
(fwd_wgmma.FrostFwdWgmma.STAGED_STORES, the product's; sm_90a, no GPU).

The chain's outputs (O; U in the training launchers) are per-token rows stored from the
transposed accumulators. The product's build writes each warp's blocks into a [C, 16] bf16
buffer in KE's tile (dead during the chain) and flushes 16-byte rows (gmem_vector_io, the
backward chain's dR path), where the tooling's stores="elements" build
(FROST_FWD_STORES=elements) keeps one 2-byte global store per value: the product has 32
fewer 2-byte global stores per staged tensor, thread and chunk and 4 more 16-byte ones
(64 rows x 2 slices / 32 lanes), no spill, stack or ptxas note. The knob's rules:
"elements" for vector-gate wgmma with K >= V and bf16 io only (the buffers and their row
copies are bf16: an fp16 build keeps the 2-byte stores); tooling_config drops it elsewhere.
Numerics: on the GPU, the forward and backward smoke against float64 (stages frostsmoke,
frostbwd of tools/gpu/gpu_suite.sh); the A/B: stage fwdstores.
"""
import os
import sys

import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import frost_cubin_report as report  # noqa: E402
from compile_tiers import tiered  # noqa: E402
from frost_fwd_experiments import FrostFwdExperiment, product_fields, tooling_config  # noqa: E402

#: 2-byte stores of one per-token tensor per thread and chunk (64 tokens x 16 values / 32
#: lanes), and the 16-byte stores that replace them
ELEMENT_STORES = 64 * 16 // 32
ROW_STORES = 64 * 2 // 32
_TOOLS = pytest.mark.skipif(report.sass_tools_missing(), reason="cuobjdump / nvdisasm not found (set CUOBJDUMP, NVDISASM)")


def _build(cfg):
    notes, usage, ops = report.build_opcodes(cfg)
    return notes, usage, report.count_ops(ops, "STG.", ".U16"), report.count_ops(ops, "STG.", ".128")


@_TOOLS
@pytest.mark.parametrize("family,build", tiered([("kda", "plain"), ("gdn2", "values"), ("kda", "recompute"),
                                                  ("gdn2", "checkpoints")], [0, 1],
                                                 ids=lambda c: f"{c[0]}-{c[1]}", unpack=True))
def test_staged_stores_replace_the_element_stores(family, build):
    product, elements = report.product_and_twin(family, build, stores="elements")
    notes, usage, u16, wide = _build(product)
    _, _, element_u16, element_wide = _build(elements)
    assert notes == set() and usage["LOCAL"] == 0 and usage["STACK"] == 0, (notes, usage)
    tensors = product.write_output + product.write_values  # O, U
    assert element_u16 - u16 == tensors * ELEMENT_STORES, (element_u16, u16)
    assert wide - element_wide == tensors * ROW_STORES, (element_wide, wide)


@_TOOLS
def test_fp16_keeps_the_element_stores():
    """The buffers are bf16: the product's fp16 build stores O element-wise, as the bf16
    build with stores="elements" does."""
    fp16 = report.config_for("kda", "wgmma", 128, 128, True, io="float16")
    elements = tooling_config(report.config_for("kda", "wgmma", 128, 128, True), "wgmma", stores="elements")
    _, _, u16, wide = _build(fp16)
    _, _, element_u16, element_wide = _build(elements)
    assert (u16, wide) == (element_u16, element_wide), ((u16, wide), (element_u16, element_wide))


def test_stores_knob_rules():
    kda = report.config_for("kda", "wgmma", 128, 128, True)
    narrow = report.config_for("kda", "wgmma", 64, 128, True)  # KE's rows too short for 8 buffers
    gdn = report.config_for("gdn", "wgmma", 128, 128, True)
    fp16 = report.config_for("kda", "wgmma", 128, 128, True, io="float16")
    for cfg, algorithm in ((gdn, "wgmma"), (narrow, "wgmma"), (kda, "pipelined"), (fp16, "wgmma")):
        assert tooling_config(cfg, algorithm, stores="elements") == tooling_config(cfg, algorithm)
    assert tooling_config(kda, "wgmma", stores="staged") == kda  # the product's config, no experiment
    for cfg, algorithm, stores in ((kda, "wgmma", "tma"), (kda, "pipelined", "elements"), (narrow, "wgmma", "elements"),
                                   (fp16, "wgmma", "elements")):
        with pytest.raises(ValueError, match="stores must be one of"):
            FrostFwdExperiment(**product_fields(cfg), algorithm=algorithm, stores=stores)
    elements = tooling_config(kda, "wgmma", stores="elements")
    assert "stores-elements" in elements.kernel_label and not elements.kernel_class().STAGED_STORES
