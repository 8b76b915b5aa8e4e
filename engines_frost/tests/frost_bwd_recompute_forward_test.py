"""The recompute path's states stage on the output-free training forward (kernels/bwd.py
recompute_configs: the product's; the test tooling's FROST_BWD_RECOMPUTE_FORWARD=0,
frost_bwd_experiments.py, puts it back on the states kernel) on the CPU:

- which calls it applies to (the recompute path; never the checkpoint paths), and that its kernels are ones the product already builds or a config the
  forward's own rules accept: the forward config is the call's own forward with
  checkpoints and U and without the output; the chain is exactly the forward-values
  path's chain kernel (the one that zeroes the gradient rows no sequence covers); grads
  is the checkpoint paths' kernel, which reads the states at the forward's packed rows
  (the states kernel's reader takes other rows once a sequence starts off a chunk
  boundary: the bug the first H200 run found, wrong dq / dk / dg for such tables);
- the stage list and launch order through frost_bwd with recording kernels: the forward
  gets the workspace's ckpt and u regions as its state_checkpoints and values and the
  backward's k, v, g, beta, w, cu_seqlens and initial state, never q, an output or a
  final state; chain and grads then read the same regions;
- the operand names it hands the forward kernel are that kernel's launch-ABI names.
"""
from __future__ import annotations

import dataclasses
import os
import sys

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import frost_bwd_experiments as fbx  # noqa: E402
from frost_bwd_operands import bwd_operands as _operands  # noqa: E402

from cudnn.linear_attention.frost.kernels import bwd as kernels_bwd  # noqa: E402
from cudnn.linear_attention.frost.kernels import fwd as kernels_fwd  # noqa: E402
from cudnn.linear_attention.frost.kernels.bwd_config import checkpoint_rows  # noqa: E402
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig, abi_operands  # noqa: E402

FAMILIES = ["gdn", "kda", "gdn2"]


def _flags(family):
    return dict(use_l2norm=True, gate_per_channel=family != "gdn", beta_per_channel=family == "gdn2")


def _config(family, **extra):
    x = _operands(family=family, h0=True, H=2, HV=4)
    x.update(extra)
    return kernels_bwd.check_bwd_operands(**x, **_flags(family))[0], x


def test_on_for_the_product_off_through_the_tooling(monkeypatch):
    monkeypatch.setenv(fbx.RECOMPUTE_FORWARD_ENV, "0")  # the product reads no switch
    cfg = _config("gdn")[0]
    assert set(kernels_bwd.recompute_configs(cfg)) == {"states", "chain", "grads"}
    assert isinstance(kernels_bwd.stage_configs(cfg)[0], FrostFwdConfig)
    # a call of the chain stage alone (the backward summary's) keeps the path's chain
    assert kernels_bwd.stage_configs(cfg, ("chain",)) == (cfg.with_stage("chain"),)
    with fbx.use_bwd_variants():
        assert kernels_bwd.recompute_configs(cfg) is None
        assert kernels_bwd.stage_configs(cfg) == tuple(cfg.with_stage(s) for s in cfg.stages)
    assert kernels_bwd.recompute_configs(cfg) is not None


@pytest.mark.parametrize("family", FAMILIES)
def test_the_kernels_it_runs(family):
    cfg, x = _config(family)
    plan = kernels_bwd.recompute_configs(cfg)
    forward = plan["states"]
    assert (forward.write_checkpoints, forward.write_values, forward.write_output) == (True, True, False)
    assert not forward.has_final_state
    assert dataclasses.replace(forward, write_checkpoints=False, write_values=False,
                               write_output=True) == cfg.fwd
    # the chain is the forward-values path's own kernel: that path's config, derived from
    # the call with the forward's checkpoints and U given
    T, N, HO, V, K = x["q"].shape[0], 3, 4, x["v"].shape[-1], x["k"].shape[-1]
    with_u, _ = _config(family, state_checkpoints=torch.zeros(checkpoint_rows(T, N), HO, V, K,
                                                              dtype=torch.bfloat16),
                        values=torch.zeros(T, HO, V, dtype=torch.bfloat16))
    assert plan["chain"] == with_u.with_stage("chain")
    # grads reads the states where the forward wrote them (packed rows): the checkpoint
    # paths' grads kernel, not the states kernel's reader (rows cu[n] // 64 + n + j)
    assert plan["grads"] == with_u.with_stage("grads")
    assert plan["grads"] != cfg.with_stage("grads")
    assert set(plan) == {"states", "chain", "grads"}


def test_long_gdn_states_run_the_forwards_four_role_kernel():
    """GDN at K = V = 128 with sequences averaging >= PIPELINE_MIN_TOKENS: the states
    stage is the forward config the user's forward had (pipelined), so it builds the
    four-role kernel without an output, as the U path's forward does with one (the two
    training paths then round U alike); batch_invariant, or a short batch, keeps the scaled
    kernel. Every backward kernel is the same for all three calls (one compiled kernel)."""
    from cudnn.linear_attention.frost.kernels.compile_kernel import FOUR_ROLE_DECAY, product_decay
    from cudnn.linear_attention.frost.kernels.config import PIPELINE_MIN_TOKENS

    N, long_T = 2, 2 * PIPELINE_MIN_TOKENS + 7
    plans = {}
    for name, T, invariant in (("long", long_T, False), ("invariant", long_T, True),
                               ("short", 2 * PIPELINE_MIN_TOKENS - 1, False)):
        x = _operands(T=T, N=N, K=128, V=128)
        x["cu_seqlens"] = torch.tensor([0, T // 3, T], dtype=torch.int32)
        cfg = kernels_bwd.check_bwd_operands(**x, **_flags("gdn"), batch_invariant=invariant)[0]
        plans[name] = kernels_bwd.recompute_configs(cfg)
        for stage in cfg.stages:
            assert not cfg.with_stage(stage).fwd.pipelined, (name, stage)
    decay = {name: product_decay(plan["states"], "sm_90a") for name, plan in plans.items()}
    assert decay == {"long": FOUR_ROLE_DECAY, "invariant": "scaled", "short": "scaled"}
    assert not plans["long"]["states"].write_output and plans["long"]["states"].write_values
    for stage in ("chain", "grads"):
        assert plans["long"][stage] == plans["invariant"][stage] == plans["short"][stage], stage


def test_not_on_the_checkpoint_paths():
    x = _operands(family="kda")
    T, N, HO, V, K = x["q"].shape[0], 3, 4, 64, 64
    ckpt = torch.zeros(checkpoint_rows(T, N), HO, V, K, dtype=torch.bfloat16)
    cfg, _, _ = kernels_bwd.check_bwd_operands(**x, state_checkpoints=ckpt, **_flags("kda"))
    assert kernels_bwd.recompute_configs(cfg) is None


def test_a_bad_switch_value_is_named(monkeypatch):
    monkeypatch.setenv(fbx.RECOMPUTE_FORWARD_ENV, "yes")
    with pytest.raises(ValueError, match=fbx.RECOMPUTE_FORWARD_ENV):
        with fbx.use_bwd_variants():
            pass


class _Kernel:
    def __init__(self, name, log):
        self.name, self.log = name, log

    def launch(self, tensors, T, N, scale, stream):
        self.log.append((self.name, dict(tensors)))


@pytest.mark.parametrize("family", FAMILIES)
def test_frost_bwd_launches_the_forward_then_chain_and_grads(family, monkeypatch):
    log, configs = [], {}

    def backward_kernel(cfg, arch, ffi, device=None):
        configs[cfg.stage] = cfg
        return _Kernel(cfg.stage, log)

    def forward_kernel(cfg, arch, ffi=None, device=None):
        configs["forward"] = cfg
        return _Kernel("forward", log)

    monkeypatch.setattr(kernels_bwd, "_compiled", backward_kernel)
    monkeypatch.setattr(kernels_fwd, "_compiled", forward_kernel)
    monkeypatch.setattr(kernels_fwd, "device_arch", lambda device: "sm_90a")
    monkeypatch.setattr(kernels_bwd, "_require_cuda", lambda q: None)
    cfg, x = _config(family)
    workspace = torch.zeros(kernels_bwd.frost_bwd_workspace_size(
        total_tokens=130, num_seqs=3, heads_q=2, heads_k=4, heads_v=4, head_dim_k=64,
        head_dim_v=64), dtype=torch.uint8)
    kernels_bwd.frost_bwd(**x, workspace=workspace, scale=0.125,
                          stream=type("S", (), {"cuda_stream": 0})(), **_flags(family))
    assert [name for name, _ in log] == ["forward", "chain", "grads"]
    plan = kernels_bwd.recompute_configs(cfg)
    assert configs["forward"] == plan["states"] and configs["chain"] == plan["chain"]
    assert configs["grads"] == plan["grads"]
    forward, chain, grads = (t for _, t in log)
    # the forward writes the regions chain and grads read, and reads the call's inputs
    assert forward["state_checkpoints"] is grads["ckpt"] and forward["values"] is grads["u"]
    assert forward["values"] is chain["u"]
    for name in ("k", "v", "g", "beta", "w", "cu_seqlens", "initial_state"):
        assert forward[name] is x[name], name
    assert "q" not in forward and "out" not in forward and "final_state" not in forward
    assert set(forward) <= set(abi_operands(configs["forward"]))


def test_the_forward_abi_takes_the_names_it_is_given():
    """Every name ForwardStates hands over is an operand of the recompute forward's launch
    ABI, so no operand is dropped on the way (a missing name would launch a null pointer)."""
    cfg, _ = _config("gdn2")
    forward = kernels_bwd.recompute_configs(cfg)["states"]
    log = []
    tensors = {name: torch.zeros(1) for name in ("k", "v", "g", "beta", "w", "cu_seqlens",
                                                  "initial_state", "ckpt", "u", "q", "dO")}
    kernels_bwd.ForwardStates(_Kernel("forward", log)).launch(tensors, 1, 1, 1.0, None)
    (_, given), = log
    abi = abi_operands(forward)
    assert set(given) <= set(abi)
    assert set(abi) - set(given) == {"q", "out", "final_state"}


@pytest.mark.parametrize("family", FAMILIES)
def test_precompile_lists_what_the_switch_launches(family):
    """frost_configs.call_configs (python -m cudnn precompile --backward) lists the kernels
    of the recompute path as the launcher runs them: the product's, the output-free
    forward, the forward-values chain and the packed-row grads; inside the tooling's block
    with the switch off, the states kernel."""
    from cudnn.linear_attention.frost.kernels import frost_configs

    x = _operands(family=family, h0=True, H=2, HV=4)
    args = {name: x[name] for name in ("q", "k", "v", "g", "beta", "w", "cu_seqlens",
                                       "initial_state")}
    lists = {}
    for value in ("0", "1"):
        with fbx.use_bwd_variants(fbx.BwdVariants(recompute_forward=value == "1")):
            lists[value] = frost_configs.call_configs(family, args, final_state=True, l2norm=True,
                                                      backward=True)
    cfg, _ = _config(family)
    plan = kernels_bwd.recompute_configs(cfg)
    assert plan["states"] in lists["1"] and plan["states"] not in lists["0"]
    assert plan["chain"] in lists["1"] and plan["grads"] in lists["1"]
    assert cfg.with_stage("states") in lists["0"] and cfg.with_stage("states") not in lists["1"]


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
