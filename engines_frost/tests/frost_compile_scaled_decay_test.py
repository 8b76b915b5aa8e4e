"""sm_90a compiles of the scaled-decay forward (kernels/fwd_wgmma_scaled.py, the product's GDN
chain, compile_kernel.product_decay; the tooling's knob decay="folded" builds the A/B): no spills, fewer registers than the wgmma layer's folded chain at K = 128, the chain's wgmma with
the state update reading k-hat as a transposed (MN-major) B, no operand-stage transpose
left, with "scaled-lead" no row copy issued inside the chain, and the knob's reach.

Each case compiles the kernel and reads cuobjdump's resource usage and the SASS
(frost_cubin_report). GDN only: the knob is dropped elsewhere.

The matrix's core (compile_tiers; ~30 s on one core, the full matrix ~90 s): the
product's scaled chain (each case builds it and the folded chain it is compared with) at
K = 128 with l2norm in its plain and training builds, and at K = 64 without l2norm in
its output-free build (the backward's recompute) as the awkward config. The other
l2norm / build combinations and every "scaled-lead" build (an experiment) wait for
FROST_FULL_MATRIX=1.
"""
import dataclasses
import functools
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

MODES = ("plain", "training", "output-free")  # output-free: the backward's recompute (checkpoints + U)
CASES = [(128, True, "plain"), (128, False, "plain"), (64, True, "plain"), (128, True, "training"),
         (128, False, "training"), (128, True, "output-free"), (64, False, "output-free")]


def _config(K, l2, mode, decay):
    cfg = report.config_for("gdn", "product", K, K, l2)
    if mode == "training":
        cfg = dataclasses.replace(cfg, has_initial_state=True, write_checkpoints=True, write_values=True)
    elif mode == "output-free":
        cfg = dataclasses.replace(cfg, write_checkpoints=True, write_values=True, write_output=False)
    return fx.tooling_config(cfg, "wgmma", decay=decay)


def _decay_of(cfg):
    """The decays a config's kernel runs with: the tooling's knob, else the product's."""
    from cudnn.linear_attention.frost.kernels.compile_kernel import product_decay

    return getattr(cfg, "decay", None) or product_decay(cfg, "sm_90a")


@functools.cache
def _build(K, l2, mode, decay):
    with tempfile.TemporaryDirectory() as tmp:
        cubin = report.compile_cubin(_config(K, l2, mode, decay), tmp)
        return report.resource_usage(cubin), tuple(report.sass_instructions(cubin))


BUILDS = [(case, decay) for decay in ("scaled", "scaled-lead") for case in CASES]
BUILDS_CORE = [((128, True, "plain"), "scaled"), ((128, True, "training"), "scaled"),
               ((64, False, "output-free"), "scaled")]


@pytest.mark.parametrize("case,decay", tiered(
    BUILDS, [BUILDS.index(b) for b in BUILDS_CORE], ids=lambda b: f"K{b[0][0]}-l2{int(b[0][1])}-{b[0][2]}-{b[1]}",
    unpack=True))
def test_scaled_decay_compiles_without_spills(case, decay):
    K, l2, mode = case
    cfg = _config(K, l2, mode, decay)
    assert _decay_of(cfg) == decay
    assert (type(cfg) is fx.FrostFwdConfig) == (decay == "scaled")  # the product's config for its own chain
    usage, sass = _build(K, l2, mode, decay)
    assert usage["LOCAL"] == 0 and usage["STACK"] == 0, usage
    folded, folded_sass = _build(K, l2, mode, "folded")
    # at K = V = 128 (the wgmma layer's GDN chain at 253 registers) the folded operands' stage is gone
    # and the chain needs fewer (K = 64 builds sit far below the file either way)
    if K == 128:
        assert usage["REG"] < folded["REG"], (usage, folded)
    wo = mode != "output-free"
    hgmma = [i for i in sass if i.startswith("HGMMA")]
    # X = S^T K^T (K/16) and, with the output, S^T Q^T (K/16) and P U (4); the state update (4)
    assert len(hgmma) == (2 * K // 16 + 8 if wo else K // 16 + 4), hgmma
    # the state update reads k-hat [t, d] transposed: its four m64nK are the only .tnspB ones
    transposed = [i for i in hgmma if ".tnspB" in i]
    assert len(transposed) == 4 and all(i.startswith(f"HGMMA.64x{K}x16.") for i in transposed), hgmma
    assert not any(".tnspB" in i for i in folded_sass if i.startswith("HGMMA"))
    # the pipelined layer's operand stage stored KD^T element by element (2-byte transposed stores) and
    # QA / KBA as 16-byte vectors; the scaled build stores neither
    assert sum(i.startswith("STS.U16") for i in sass) < sum(i.startswith("STS.U16") for i in folded_sass)
    # where the next chunk's rows are copied: inside the chain (between its first and last
    # wgmma) unless they lead by a chunk (issued in the operand stage, before the Gram)
    first = next(n for n, i in enumerate(sass) if i.startswith("HGMMA"))
    last = max(n for n, i in enumerate(sass) if i.startswith("HGMMA"))
    in_chain = sum(i.startswith("LDGSTS") for i in sass[first:last])
    assert (in_chain == 0) == (decay == "scaled-lead"), in_chain


def test_the_knob_reaches_gdn_bf16_wgmma_only():
    from cudnn.linear_attention.frost.kernels.compile_kernel import kernel_class
    from cudnn.linear_attention.frost.kernels.fwd_wgmma import FrostFwdWgmma, FrostFwdWgmmaValues
    from cudnn.linear_attention.frost.kernels.fwd_wgmma_scaled import ScaledDecayChain, ScaledDecayLeadChain

    gdn = report.config_for("gdn", "product", 128, 128, True)
    cls = kernel_class(gdn, "sm_90a")  # the product's wgmma for scalar gates
    assert issubclass(cls, ScaledDecayChain) and issubclass(cls, FrostFwdWgmma) and cls.decay_scaled
    assert kernel_class(fx.tooling_config(gdn, "wgmma", decay="scaled"), "sm_90a") is cls
    assert not cls.rows_lead and not issubclass(cls, ScaledDecayLeadChain)
    lead = kernel_class(fx.tooling_config(gdn, "wgmma", decay="scaled-lead"), "sm_90a")
    assert issubclass(lead, ScaledDecayLeadChain) and lead.rows_lead
    train = kernel_class(_config(128, True, "training", "scaled"), "sm_90a")
    assert issubclass(train, ScaledDecayChain) and issubclass(train, FrostFwdWgmmaValues)
    # the folded chain is the tooling's A/B; vector gates and pipelined never carry the factors
    folded = kernel_class(fx.tooling_config(gdn, "wgmma", decay="folded"), "sm_90a")
    assert issubclass(folded, FrostFwdWgmma) and not getattr(folded, "decay_scaled", False)
    kda = report.config_for("kda", "product", 128, 128, True)
    assert kernel_class(kda, "sm_90a") is FrostFwdWgmma and not getattr(FrostFwdWgmma, "decay_scaled", False)
    assert not getattr(kernel_class(gdn, "sm_80"), "decay_scaled", False)  # pipelined there
    fp16 = dataclasses.replace(gdn, io_dtype="float16")
    assert not getattr(kernel_class(fp16, "sm_90a"), "decay_scaled", False)
    # where the kernel does not exist the switch leaves the config alone
    assert fx.tooling_config(kda, "wgmma", decay="scaled") == fx.tooling_config(kda, "wgmma")
    with pytest.raises(ValueError, match="scaled-decay chain is built for scalar gates"):
        ScaledDecayChain.__init__(object.__new__(cls), dataclasses.replace(gdn, io_dtype="float16"))


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
