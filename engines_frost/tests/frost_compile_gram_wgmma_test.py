"""sm_90a compiles of the wgmma-Gram forward (kernels/fwd_wgmma_gram.py, the tooling's knob
gram="wgmma"): no spills, the Gram's HGMMA in the SASS, and the knob's reach.

The first attempt at this Gram (m64n64 accumulator, NOTES.md, "Plan after this step", item 2) compiled at
255 registers with a 48-byte stack frame; fwd_wgmma_gram's drafts had 8 to 144 bytes (hoisted
epilogue and swizzled rows-stage addresses, the final state's offsets kept across the
loop), so each case here compiles the kernel and reads cuobjdump's resource usage and
the SASS (frost_cubin_report). GDN only: the knob is refused elsewhere.

The matrix's core (compile_tiers; ~17 s on one core, the full matrix ~80 s): on the wgmma layer's
chain the wgmma Gram is an experiment; its m64n64 form is the product's four-role
forward's Gram (frost_compile_ws4_test builds that kernel). So the core builds the
m64n64 Gram at K = 128 in a plain build with l2norm and a training build without, and
the knob's default m64n32 Gram at K = 64 as the awkward config; the other widths and
combinations wait for FROST_FULL_MATRIX=1.
"""
import dataclasses
import os
import sys
import tempfile

import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import frost_cubin_report as report  # noqa: E402
import frost_fwd_experiments as fx  # noqa: E402
from compile_tiers import tiered  # noqa: E402

pytestmark = pytest.mark.skipif(report.tool("CUOBJDUMP", "cuobjdump") is None
                                or report.tool("NVDISASM", "nvdisasm") is None,
                                reason="cuobjdump / nvdisasm not found")

CASES = [  # (K = V, use_l2norm, training launcher writing checkpoints and U, gram knob)
    (K, l2, training, gram)
    for gram in fx.GRAM_WIDTHS
    for K, l2, training in ((128, True, False), (128, False, False), (128, True, True), (128, False, True),
                            (64, True, False))
]


def _config(K, l2, training, gram="wgmma"):
    cfg = report.config_for("gdn", "product", K, K, l2)
    if training:
        cfg = dataclasses.replace(cfg, has_initial_state=True, write_checkpoints=True, write_values=True)
    return fx.tooling_config(cfg, "wgmma", gram=gram)


CASES_CORE = [(128, True, False, "wgmma64"), (128, False, True, "wgmma64"), (64, True, False, "wgmma")]


@pytest.mark.parametrize("case", tiered(CASES, [CASES.index(c) for c in CASES_CORE],
                                        ids=lambda c: f"{c[3]}-K{c[0]}-l2{int(c[1])}{'-train' if c[2] else ''}"))
def test_gram_on_wgmma_compiles_without_spills(case):
    K, l2, training, gram = case
    cfg = _config(K, l2, training, gram)
    n = fx.GRAM_WIDTHS[gram]
    assert cfg.gram == gram and f"gram-{gram}" in cfg.kernel_label
    with tempfile.TemporaryDirectory() as tmp:
        cubin = report.compile_cubin(cfg, tmp)
        usage = report.resource_usage(cubin)
        sass = report.sass_instructions(cubin)
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, usage
    hgmma = [i for i in sass if i.startswith("HGMMA")]
    # the chain (fwd_wgmma): R and O K/16 each, P U and the state update 4 each; the Gram: two
    # products (M and P branches) x 64 / n column blocks x K/16 m64nNk16
    chain, grams = 2 * K // 16 + 8, 2 * (64 // n) * K // 16
    assert len(hgmma) == chain + grams, len(hgmma)
    chain_n64 = 2 * K // 16 + 4 + (4 if K == 64 else 0)  # R, O, P U (and the state update at K = 64)
    assert sum(i.startswith(f"HGMMA.64x{n}x16.") for i in hgmma) == grams + (chain_n64 if n == 64 else 0)
    # no mma.sync left in the Gram: the block solve's 20 HMMA per warp are the only ones
    assert sum(i.startswith("HMMA") for i in sass) == 20


def test_the_knob_reaches_gdn_bf16_wgmma_only():
    from cudnn.linear_attention.frost.kernels.compile_kernel import kernel_class
    from cudnn.linear_attention.frost.kernels.fwd_wgmma import FrostFwdWgmma, FrostFwdWgmmaValues
    from cudnn.linear_attention.frost.kernels.fwd_wgmma_gram import GramWgmma

    gdn = report.config_for("gdn", "product", 128, 128, True)
    cls = kernel_class(fx.tooling_config(gdn, "wgmma", gram="wgmma"), "sm_90a")
    assert issubclass(cls, GramWgmma) and issubclass(cls, FrostFwdWgmma) and cls.gram_wgmma and cls.gram_n == 32
    assert kernel_class(fx.tooling_config(gdn, "wgmma", gram="wgmma16"), "sm_90a").gram_n == 16
    train = kernel_class(_config(128, True, True), "sm_90a")
    assert issubclass(train, GramWgmma) and issubclass(train, FrostFwdWgmmaValues)
    # the product's classes never carry it (GDN's wgmma: the scaled-decay chain over FrostFwdWgmma)
    assert issubclass(kernel_class(gdn, "sm_90a"), FrostFwdWgmma)
    assert not getattr(kernel_class(gdn, "sm_90a"), "gram_wgmma", False)
    # where the kernel does not exist the switch leaves the config alone (one switch, mixed runs)
    kda = report.config_for("kda", "product", 128, 128, True)
    assert fx.tooling_config(kda, "wgmma", gram="wgmma") == fx.tooling_config(kda, "wgmma")
    assert fx.tooling_config(gdn, "pipelined", gram="wgmma").gram == "mma"
    fp16 = dataclasses.replace(gdn, io_dtype="float16")
    assert fx.tooling_config(fp16, "wgmma", gram="wgmma") == fx.tooling_config(fp16, "wgmma")
    with pytest.raises(ValueError, match="gram"):
        fx.experiment(kda, "wgmma", gram="wgmma")
    with pytest.raises(ValueError, match="gram"):
        fx.experiment(gdn, "wgmma", gram="tma")
    with pytest.raises(ValueError):
        GramWgmma.__init__(cls.__new__(cls), kda)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
