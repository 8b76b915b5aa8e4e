"""Which long-sequence GDN forwards the product runs on the four-role kernel (fwd_ws4.py,
RawRingInChain) and that the test tooling's product identity follows it: a pipelined bf16
GDN config at K = V = 128 with an output, or without one but writing U (the recompute
path's states stage), builds four_role_class on sm_90a; short launches, K = 64, the span
summaries (final state alone), vector gates and other archs keep their kernels; the
tooling's knobs still reach the scaled chain and the register-split experiments."""
import dataclasses
import os
import sys

import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import frost_cubin_report as report  # noqa: E402
import frost_fwd_experiments as fx  # noqa: E402

from cudnn.linear_attention.frost.kernels.compile_kernel import (FOUR_ROLE_DECAY, kernel_class,  # noqa: E402
                                                                 product_class, product_decay)


def _cfg(family="gdn", K=128, pipelined=True, **over):
    cfg = fx.product_config(report.config_for(family, "product", K, K, True))
    return dataclasses.replace(cfg, pipelined=pipelined, **over)


def test_long_gdn_forwards_run_four_roles():
    from cudnn.linear_attention.frost.kernels.fwd_wgmma_gram import GramWgmma
    from cudnn.linear_attention.frost.kernels.fwd_ws4 import RawRingInChain

    for over in ({}, dict(write_checkpoints=True), dict(write_checkpoints=True, write_values=True),
                 dict(has_initial_state=True), dict(use_l2norm=False),
                 dict(write_checkpoints=True, write_values=True, write_output=False, has_final_state=False,
                      state_dtype=None)):
        cfg = _cfg(**over)
        assert product_decay(cfg, "sm_90a") == FOUR_ROLE_DECAY, over
        cls = product_class(cfg, "sm_90a")
        assert issubclass(cls, RawRingInChain) and issubclass(cls, GramWgmma) and cls.gram_n == 64, over
        kernel = cls(cfg)
        assert kernel.gram_norms == cfg.use_l2norm and kernel.inverse_in_chain


@pytest.mark.parametrize("cfg, arch, decay", [
    (_cfg(pipelined=False), "sm_90a", "scaled"),
    (_cfg(K=64), "sm_90a", "scaled"),
    (_cfg(write_output=False, has_final_state=True), "sm_90a", "scaled"),
    (_cfg("kda"), "sm_90a", "folded"),
    (_cfg(), "sm_80", "folded"),
    (_cfg(io_dtype="float16"), "sm_90a", "folded"),
], ids=["short", "K64", "summary", "kda", "sm_80", "fp16"])
def test_other_forwards_keep_their_kernels(cfg, arch, decay):
    from cudnn.linear_attention.frost.kernels.fwd_ws4 import RawRing

    assert product_decay(cfg, arch) == decay
    assert not issubclass(product_class(cfg, arch), RawRing)


def test_pipelined_matters_exactly_where_four_roles_can_apply():
    """four_roles_possible (which fwd.check_operands asks before setting `pipelined`) holds
    for every config the four-role kernel serves and for none of the others, so dropping
    `pipelined` elsewhere changes no kernel."""
    from cudnn.linear_attention.frost.kernels.compile_kernel import four_roles_apply, four_roles_possible

    served = [_cfg(), _cfg(write_checkpoints=True, write_values=True),
              _cfg(write_checkpoints=True, write_values=True, write_output=False, has_final_state=False,
                   state_dtype=None)]
    others = [_cfg(K=64), _cfg(write_output=False, has_final_state=True), _cfg("kda"), _cfg("gdn2"),
              _cfg(io_dtype="float16")]
    assert all(four_roles_possible(c) and four_roles_apply(c) for c in served)
    for cfg in others:
        assert not four_roles_possible(cfg) and not four_roles_apply(cfg), cfg
        assert product_class(cfg, "sm_90a") is product_class(dataclasses.replace(cfg, pipelined=False), "sm_90a")


def test_the_tooling_follows_the_product():
    cfg = _cfg()
    assert fx.default_decay(cfg, "wgmma") == FOUR_ROLE_DECAY
    assert fx.tooling_config(cfg, "wgmma") is not None and type(fx.tooling_config(cfg, "wgmma")) is type(cfg)
    assert fx.tooling_config(cfg, "wgmma", decay=FOUR_ROLE_DECAY) == cfg  # the knob at the product's own value
    scaled = fx.tooling_config(cfg, "wgmma", decay="scaled")
    assert scaled.decay == "scaled" and "ScaledDecay" in kernel_class(scaled, "sm_90a").__name__
    regs = fx.tooling_config(cfg, "wgmma", decay=FOUR_ROLE_DECAY, ws_regs=(208, 72, 24))
    assert regs.ws_regs == (208, 72, 24)  # a split is an experiment, not the product
    assert fx.default_decay(_cfg(pipelined=False), "wgmma") == "scaled"


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
