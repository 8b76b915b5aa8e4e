"""The forward kernels compiled with write_output=False (config.py; what the span summaries'
passes run by default, kernels/summary.py, and the backward's recompute path,
kernels/bwd.py recompute_configs), on the CPU:

- the config rules (a final state required, or checkpoints with U: the backward's
  recompute; never checkpoints alone) and the kernel-store key
  and description that tell such a kernel from its twin;
- frost_fwd's checks: q and out must be None exactly for write_output=False, with the
  stand-in head count (operand_checks.queryless_heads) in the config;
- where nvidia-cutlass-dsl (and cuobjdump / nvdisasm) are installed: the product kernels of
  such configs (wgmma on sm_90a, bf16 and fp16 io) compile for sm_90a without local memory
  or a stack frame, with fewer instructions than their write_output=True twins, no 16-bit
  global stores (the o rows), half the twin's warpgroup MMAs on wgmma (R and the state update
  of R, O, P U and the state update), fewer warp MMAs, and the twin's barriers; the mma layer's own
  class and the wgmma Gram experiment refuse them by name.

The compiles' core (compile_tiers; 12 of the 20 builds, ~70 s on one core, the full
matrix ~115 s): one no-output build per product kernel class (compile_kernel.product_class)
the summary's passes reach - GDN bf16 (the scaled chain, the bench's config), GDN fp16 (wgmma
folded, scalar gates), GDN-2 with an initial state (wgmma folded, vector gates and vector
beta) - and every recompute forward. The other switch combinations of the same classes (no
l2norm, GDN with an initial state, KDA bf16 and fp16) wait for FROST_FULL_MATRIX=1.
"""
from __future__ import annotations

import dataclasses
import os
import sys

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cudnn.linear_attention.frost.kernels import kernel_store  # noqa: E402
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig  # noqa: E402
from cudnn.linear_attention.frost.kernels.fwd import check_operands, frost_fwd  # noqa: E402
from cudnn.linear_attention.frost.kernels.operand_checks import queryless_heads  # noqa: E402

from compile_tiers import tiered  # noqa: E402

BF = torch.bfloat16


def _config(family="gdn", io="bfloat16", **over):
    gpc, bpc = {"gdn": (False, False), "kda": (True, False), "gdn2": (True, True)}[family]
    base = dict(io_dtype=io, state_dtype="float32", H=16, HK=16, HV=16, K=128, V=128,
                gate_per_channel=gpc, beta_per_channel=bpc, has_w=bpc, use_l2norm=True,
                has_initial_state=False, has_final_state=True,
                gate_align16=gpc and io == "bfloat16")
    base.update(over)
    return FrostFwdConfig(**base)


def test_config_rules():
    assert _config().write_output is True  # the default: every existing config keeps its kernel
    _config(write_output=False)
    _config(write_output=False, has_initial_state=True)
    for over in (dict(write_checkpoints=True), dict(has_final_state=False, state_dtype=None)):
        with pytest.raises(ValueError, match="FrostFwdConfig: write_output must be True"):
            _config(write_output=False, **over)
    # the backward's recompute on the forward kernel: checkpoints and U, no final state
    _config(write_output=False, write_checkpoints=True, write_values=True, has_final_state=False,
            state_dtype=None)


def test_the_store_key_and_description_tell_the_twins_apart():
    cfg = _config()
    twin = dataclasses.replace(cfg, write_output=False)
    tools = {"cutlass_dsl": "x", "cuda": "y"}
    keys = {kernel_store.entry_key(c, "sm_90a", "cute", tools, host="h") for c in (cfg, twin)}
    assert len(keys) == 2
    assert "no-out" in kernel_store.describe(twin) and "no-out" not in kernel_store.describe(cfg)


# (family, H, HK, HV): the head groupings the head rules allow, with their q head count
HEADS = [("gdn", 2, 2, 2), ("kda", 1, 1, 2), ("gdn2", 2, 1, 1), ("kda", 2, 2, 1), ("gdn", 1, 2, 2)]


def _operands(family, H, HK, HV, T=10, K=64, V=64, **over):
    HO = max(H, HV)
    ops = dict(
        q=torch.zeros(T, H, K, dtype=BF), k=torch.zeros(T, HK, K, dtype=BF),
        v=torch.zeros(T, HV, V, dtype=BF),
        g=torch.zeros((T, HO) if family == "gdn" else (T, HO, K)),
        beta=torch.zeros(T, HO, K, dtype=BF) if family == "gdn2" else torch.zeros(T, HO),
        w=torch.zeros(T, HO, V, dtype=BF) if family == "gdn2" else None,
        cu_seqlens=torch.tensor([0, 4, T], dtype=torch.int32), out=torch.zeros(T, HO, V, dtype=BF),
        initial_state=torch.zeros(2, HO, V, K), final_state=torch.zeros(2, HO, V, K),
        use_l2norm=True, gate_per_channel=family != "gdn", beta_per_channel=family == "gdn2")
    ops.update(over)
    return ops


@pytest.mark.parametrize("family,H,HK,HV", HEADS, ids=[f"{f}-H{h}HK{k}HV{v}" for f, h, k, v in HEADS])
def test_queryless_launch_checks(family, H, HK, HV):
    HO = max(H, HV)
    full = check_operands(**_operands(family, H, HK, HV)).config
    ops = _operands(family, H, HK, HV, q=None, out=None)
    launch = check_operands(**ops, write_output=False)
    cfg = launch.config
    assert cfg.write_output is False and launch.tensors["q"] is None and launch.tensors["out"] is None
    assert cfg.H == queryless_heads(HK, HV, HO) and max(cfg.H, cfg.HV) == HO
    # everything but q's heads and the output is the twin's
    assert dataclasses.replace(cfg, H=full.H, write_output=True) == full
    with pytest.raises(ValueError, match="frost_fwd: q must be None for a kernel compiled with write_output=False"):
        check_operands(**_operands(family, H, HK, HV, out=None), write_output=False)
    with pytest.raises(ValueError, match="frost_fwd: out must be None for a kernel compiled with write_output=False"):
        check_operands(**_operands(family, H, HK, HV, q=None), write_output=False)
    for name in ("q", "out"):
        with pytest.raises(ValueError, match=f"frost_fwd: {name} must be a tensor \\(None only with write_output"):
            check_operands(**_operands(family, H, HK, HV, **{name: None}))
    with pytest.raises(ValueError, match="write_output must be True without final_state"):
        check_operands(**{**ops, "final_state": None}, write_output=False)
    with pytest.raises(ValueError, match="k must be a CUDA tensor"):
        frost_fwd(**ops, scale=1.0, stream=None, write_output=False)


def test_queryless_checks_still_name_bad_operands():
    ops = _operands("kda", 2, 2, 2, q=None, out=None)
    with pytest.raises(ValueError, match="g must be of shape"):
        check_operands(**{**ops, "g": torch.zeros(10, 2, 32)}, write_output=False)
    with pytest.raises(ValueError, match="k must be of dtype bfloat16 or float16"):
        check_operands(**{**ops, "k": torch.zeros(10, 2, 64)}, write_output=False)
    with pytest.raises(ValueError, match="write_output must be True or False"):
        check_operands(**_operands("kda", 2, 2, 2), write_output=1)


# ----------------------------------------------------------------------------- compiles
# (id, family, io, has_initial_state, use_l2norm): the summary's two passes (final state from
# zero; the transition from the identity), wgmma for bf16 and fp16 io
COMPILED = [("wgmma-gdn", "gdn", "bfloat16", False, True), ("wgmma-gdn-nol2", "gdn", "bfloat16", False, False),
            ("wgmma-gdn-h0", "gdn", "bfloat16", True, True), ("wgmma-kda", "kda", "bfloat16", False, True),
            ("wgmma-gdn2-h0", "gdn2", "bfloat16", True, True), ("wgmma-gdn-fp16", "gdn", "float16", False, True),
            ("wgmma-kda-h0-fp16", "kda", "float16", True, False)]


def _sass(cfg, tmp_path):
    cutlass = pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")  # noqa: F841
    from frost_cubin_report import compile_cubin, resource_usage, sass_instructions, tool

    if tool("CUOBJDUMP", "cuobjdump") is None or tool("NVDISASM", "nvdisasm") is None:
        pytest.skip("cuobjdump / nvdisasm not found")
    out = tmp_path / ("noout" if not cfg.write_output else "twin")
    out.mkdir()
    cubin = compile_cubin(cfg, str(out))
    return resource_usage(cubin), sass_instructions(cubin)


def _count(instrs, prefix):
    return sum(1 for ins in instrs if ins.split()[1 if ins.startswith("@") else 0].startswith(prefix))


@pytest.mark.parametrize("case", tiered(  # core: one case per product class (module docstring)
    COMPILED, [0, 4, 5], ids=lambda c: c[0]))
def test_no_output_kernels_compile_smaller_without_spills(case, tmp_path):
    _, family, io, h0, l2 = case
    twin = _config(family, io, has_initial_state=h0, use_l2norm=l2)
    cfg = dataclasses.replace(twin, write_output=False)
    res, ins = _sass(cfg, tmp_path)
    twin_res, twin_ins = _sass(twin, tmp_path)
    assert res["LOCAL"] == 0 and res["STACK"] == 0, res
    assert len(ins) < len(twin_ins), (len(ins), len(twin_ins))
    assert _count(twin_ins, "STG.E.U16") > 0 and _count(ins, "STG.E.U16") == 0  # the o rows
    assert 0 < _count(ins, "STG") < _count(twin_ins, "STG")  # the final state's stores stay
    assert _count(ins, "BAR.SYNC") == _count(twin_ins, "BAR.SYNC")  # the same stages
    assert _count(ins, "HMMA") < _count(twin_ins, "HMMA")  # no P tiles
    assert _count(ins, "LDGSTS") < _count(twin_ins, "LDGSTS")  # no q rows prefetched
    # wgmma: R and the state update, of R, O, P U and the state update
    assert 2 * _count(ins, "HGMMA") == _count(twin_ins, "HGMMA") > 0


# (id, family, io, has_initial_state): the backward's recompute forwards (bwd.py
# recompute_configs): checkpoints and U without the output or a final state
RECOMPUTE = [("wgmma-gdn", "gdn", "bfloat16", False), ("wgmma-kda-h0", "kda", "bfloat16", True),
             ("wgmma-gdn-fp16", "gdn", "float16", False)]


@pytest.mark.parametrize("case", RECOMPUTE, ids=[c[0] for c in RECOMPUTE])
def test_recompute_forwards_compile_smaller_than_the_training_forward(case, tmp_path):
    """Against the training forward (checkpoints, U and the output): the same checkpoint
    and U stores and barriers, no o rows, no q rows, half the warpgroup MMAs on wgmma."""
    _, family, io, h0 = case
    twin = _config(family, io, has_initial_state=h0, has_final_state=False,
                   state_dtype="float32" if h0 else None, write_checkpoints=True, write_values=True)
    cfg = dataclasses.replace(twin, write_output=False)
    res, ins = _sass(cfg, tmp_path)
    twin_res, twin_ins = _sass(twin, tmp_path)
    assert res["LOCAL"] == 0 and res["STACK"] == 0, res
    assert len(ins) < len(twin_ins), (len(ins), len(twin_ins))
    assert _count(ins, "BAR.SYNC") == _count(twin_ins, "BAR.SYNC")
    assert 0 < _count(ins, "STG") < _count(twin_ins, "STG")  # checkpoints and U stay, o goes
    assert _count(ins, "LDGSTS") < _count(twin_ins, "LDGSTS")  # no q rows prefetched
    assert 2 * _count(ins, "HGMMA") == _count(twin_ins, "HGMMA") > 0


def test_the_tooling_refuses_no_output_experiments_that_would_read_q():
    from frost_fwd_experiments import experiment

    cfg = _config(write_output=False)
    for algorithm in ("pipelined", "wgmma"):
        assert experiment(cfg, algorithm).write_output is False
    for algorithm, knobs in (("oracle", {}), ("mma", {}), ("wgmma", {"gram": "wgmma"})):
        with pytest.raises(ValueError, match="FrostFwdExperiment: write_output must be True unless"):
            experiment(cfg, algorithm, **knobs)


def test_other_kernel_classes_refuse_no_output_configs():
    pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
    from cudnn.linear_attention.frost.kernels.fwd_mma import FrostFwdMma
    from cudnn.linear_attention.frost.kernels.fwd_pipelined import FrostFwdPipelined
    from cudnn.linear_attention.frost.kernels.fwd_wgmma import FrostFwdWgmma
    from cudnn.linear_attention.frost.kernels.fwd_wgmma_gram import GramWgmma

    cfg = _config(write_output=False)
    with pytest.raises(ValueError, match="FrostFwdMma: write_output=False is compiled by the pipelined and wgmma"):
        FrostFwdMma(cfg)
    FrostFwdPipelined(cfg)
    FrostFwdWgmma(cfg)

    class Gram(GramWgmma, FrostFwdWgmma):
        pass
    with pytest.raises(ValueError, match="write_output=False is the product pipelined / wgmma kernels'"):
        Gram(cfg)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
