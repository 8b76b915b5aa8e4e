"""dv written by the backward chain instead of the grads kernel (FrostBwdConfig.chain_dv,
FROST_BWD_CHAIN_DV=1; kernels/NOTES_bwd.md "Next: dv and the v . dR sums in the chain").

sm_90a builds of the product's GDN chain (four roles, raw rows, the inverse in the chain;
K = V = 128, bf16, grouped and ungrouped v heads) and of its wgmma grads kernel, with and
without the switch: the chain's consumers gain exactly one 2-byte global store per dR
element (dv beside dR), the math warpgroup one shared store per token (beta's factor row),
no role spills; the grads kernel loses its dv row stores and keeps its dbeta sums. Then the
config rules (which families and chains take it, which stage configs keep it), the test
tooling's switch, and that a launch of some stages without both chain and grads does not
move dv.
"""
import dataclasses
import functools
import os
import re
import sys
import tempfile

import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import frost_cubin_report as report  # noqa: E402
from frost_cubin_report import bwd_config_for as _cfg  # noqa: E402

needs_tools = pytest.mark.skipif(report.tool("CUOBJDUMP", "cuobjdump") is None
                                 or report.tool("NVDISASM", "nvdisasm") is None,
                                 reason="cuobjdump / nvdisasm not found")

#: the product's GDN chain at K = V = 128 with bf16 io (bwd.product_choice)
CHAIN = dict(chain_wgmma=True, chain_async=True, chain_scaled=True, chain_ws=True, chain_wy=True, chain_ws4=True,
             chain_a_in_chain=True, chain_raw_rows=True)


def _chain_config(dv: bool, H: int = 16):
    """The chain on the forward-values path; H = 32 q / k heads over 16 v heads groups the
    v heads (dv then goes to the fp32 per-output-head partials)."""
    return dataclasses.replace(_cfg("gdn", "chain", K=128, V=128, H=H, HV=16, l2=True, h0=False), **CHAIN,
                               forward_values=True, chain_dv=dv)


def _grads_config(dv: bool):
    return dataclasses.replace(_cfg("gdn", "grads", K=128, V=128, H=16, HV=16, l2=True, h0=False),
                               grads_wgmma=True, grads_prefetch=True, checkpoints=True, chain_dv=dv)


@functools.cache
def _build(cfg):
    with tempfile.TemporaryDirectory() as tmp:
        cubin = report.compile_bwd_cubin(cfg, tmp)
        sass = report.sass_instructions(cubin)
        return report.resource_usage(cubin), tuple(re.sub(r"^@!?U?P[0-9T]+\s+", "", i) for i in sass)


def _count(instrs, prefix):
    return sum(i.startswith(prefix) for i in instrs)


def _roles(sass):
    """(copies and math, chain) instructions: before and after the chain's setmaxnreg raise."""
    dealloc, alloc = report.setmaxnreg_sites(sass)
    return sass[:alloc[-1]], sass[alloc[-1]:]


@needs_tools
@pytest.mark.parametrize("H", [16, 32], ids=["v_heads", "v_grouped"])
def test_chain_stores_dv_beside_dr(H):
    from cudnn.linear_attention.frost.kernels import fwd_ws as ws

    (off_use, off), (on_use, on) = _build(_chain_config(False, H)), _build(_chain_config(True, H))
    for usage in (off_use, on_use):
        assert usage["REG"] <= 65536 // ws.BLOCK_THREADS and usage["LOCAL"] == 0, usage
    assert on_use["STACK"] == off_use["STACK"], (off_use, on_use)
    state_free_off, chain_off = _roles(off)
    state_free_on, chain_on = _roles(on)
    # dR^T: 64 tokens x 16 value rows per warp, 32 per thread, one 2-byte store each; dv
    # the same count again (bf16, or fp32 per output head where v heads are grouped)
    dr_stores = _count(chain_off, "STG.E.U16")
    assert dr_stores >= 32
    assert _count(chain_on, "STG.E.U16") - dr_stores == (32 if H == 16 else 0)
    assert _count(chain_on, "STG.E ") - _count(chain_off, "STG.E ") == (0 if H == 16 else 32)
    # the chain's few spills (a 16-byte frame at this split) are the product's, not more
    for op in ("STL", "LDL"):
        assert _count(chain_on, op) == _count(chain_off, op), op
    # the math warpgroup writes beta's factor row (one fp32 shared store per token thread)
    assert _count(state_free_on, "STS") == _count(state_free_off, "STS") + 1
    assert _count(chain_on, "HGMMA") == _count(chain_off, "HGMMA")


@needs_tools
def test_grads_leaves_dv_to_the_chain():
    (_, off), (on_use, on) = _build(_grads_config(False)), _build(_grads_config(True))
    assert on_use["LOCAL"] == 0 and on_use["STACK"] == 0, on_use
    # dv's rows: 16-byte stores, C * (V / 8) / 256 = 4 per thread and item
    wide_off, wide_on = _count(off, "STG.E.128"), _count(on, "STG.E.128")
    assert wide_off - wide_on == 4, (wide_off, wide_on)
    assert _count(on, "HGMMA") == _count(off, "HGMMA")
    assert _count(on, "SHFL") == _count(off, "SHFL")  # dbeta's v . dR sums stay


def test_config_rules():
    from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig

    chain = _chain_config(True)
    assert chain.with_stage("chain").chain_dv and chain.with_stage("grads").chain_dv
    assert not dataclasses.replace(chain, forward_values=False).with_stage("states").chain_dv
    assert not dataclasses.replace(chain, stage="values", checkpoints=True, forward_values=False).with_stage(
        "values").chain_dv
    for family in ("kda", "gdn2"):
        with pytest.raises(ValueError, match="chain_dv"):
            dataclasses.replace(_cfg(family, "grads", h0=False), chain_dv=True)
    with pytest.raises(ValueError, match="chain_dv.*chain_raw_rows"):
        dataclasses.replace(chain, chain_raw_rows=False, chain_a_in_chain=False)
    with pytest.raises(ValueError, match="chain_dv must be a bool"):
        dataclasses.replace(chain, chain_dv=1)
    assert FrostBwdConfig.__dataclass_fields__["chain_dv"].default is False


def test_a_launch_of_some_stages_keeps_dv_in_the_grads_kernel():
    from cudnn.linear_attention.frost.kernels import bwd

    cfg = dataclasses.replace(_chain_config(True), stage="chain")
    both = bwd.stage_configs(cfg, ("chain", "grads"))
    assert [c.chain_dv for c in both] == [True, True]
    for stages in (("chain",), ("grads",)):
        assert [c.chain_dv for c in bwd.stage_configs(cfg, stages)] == [False]


def test_the_tooling_switch_sets_it_for_raw_row_chains_only(monkeypatch):
    import frost_bwd_experiments as fx
    from cudnn.linear_attention.frost.kernels import bwd

    f = _chain_config(True).fwd
    assert bwd.product_choice(f)["chain_dv"] is False
    monkeypatch.setenv(fx.CHAIN_DV_ENV, "1")
    assert fx.config_fields(f, fx.requested())["chain_dv"] is True
    monkeypatch.setenv(fx.CHAIN_ENV, "wgmma_ws4c")  # four roles, rows stage: not raw rows
    assert fx.config_fields(f, fx.requested())["chain_dv"] is False
    monkeypatch.delenv(fx.CHAIN_ENV)
    assert fx.config_fields(_cfg("kda", "chain").fwd, fx.requested())["chain_dv"] is False
