"""L0: the v1.2 / v1.3 kernels (state checkpoints, forward-written U) cross-compile for
sm_90a (no GPU needed).

The pipelined forward compiled with write_checkpoints (its launcher takes the extra
state_checkpoints pointer: the argument list of launch_abi.fake_args for that config),
the backward's ``values`` kernel (U per chunk from the forward's checkpoints) and the
``grads`` kernels reading S from the packed checkpoint rows; v1.3: the forward that also
writes U (write_values: state_checkpoints and values last in its argument list) and the
chain kernel that zeroes the uncovered gradient rows in place of states / values when U
comes from the forward (one configuration each: compiles are slow). Through the entries
the GPU launch uses (compile_kernel.compile_fwd, bwd_compile.compile_bwd). Skips where
nvidia-cutlass-dsl is not importable.
"""
import dataclasses

import pytest

cutlass = pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")

from cudnn.linear_attention.frost.kernels.bwd_compile import compile_bwd  # noqa: E402
from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig  # noqa: E402
from cudnn.linear_attention.frost.kernels.compile_kernel import compile_fwd  # noqa: E402
from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig, abi_operands  # noqa: E402
from cudnn.linear_attention.frost.kernels.launch_abi import fake_args  # noqa: E402

FAMILY = {"gdn": (False, False), "kda": (True, False), "gdn2": (True, True)}


def _fwd(family, K=128, V=128, H=4, HV=4, l2=True, h0=True, ckpt=True, values=False):
    vec, per_beta = FAMILY[family]
    return FrostFwdConfig("bfloat16", "float32" if h0 else None, H, H, HV, K, V, vec, per_beta, per_beta, l2,
                          h0, False, gate_align16=vec, write_checkpoints=ckpt, write_values=values)


def _bwd(family, stage, **kw):
    f = dataclasses.replace(_fwd(family, **kw), write_checkpoints=False)
    cfg = FrostBwdConfig(f, "values", "float32", "float32" if f.has_initial_state else None, checkpoints=True)
    return cfg.with_stage(stage)


def test_forward_abi_gains_one_pointer():
    cfg = _fwd("gdn")
    assert abi_operands(cfg)[-1] == "state_checkpoints"
    assert len(fake_args(cfg)) == len(fake_args(dataclasses.replace(cfg, write_checkpoints=False))) + 1


@pytest.mark.parametrize("family, kw", [("gdn", {}), ("kda", dict(K=64, V=128, H=2, HV=4, h0=False))],
                         ids=["gdn", "kda-grouped-64"])
def test_forward_with_checkpoints_compiles_for_sm90a(family, kw):
    assert callable(compile_fwd(_fwd(family, **kw), "sm_90a", ffi="cute"))


CASES = [("gdn", "values", {}), ("kda", "values", dict(K=64, V=64, H=2, HV=4, l2=False, h0=False)),
         ("gdn", "grads", {}), ("gdn2", "grads", dict(K=128, V=64))]


@pytest.mark.parametrize("family, stage, kw", CASES, ids=[f"{f}-{s}-{i}" for i, (f, s, _) in enumerate(CASES)])
def test_checkpoint_reading_kernels_compile_for_sm90a(family, stage, kw):
    assert callable(compile_bwd(_bwd(family, stage, **kw), "sm_90a", ffi="cute"))


def test_forward_abi_with_values_gains_two_pointers():
    cfg = _fwd("gdn", values=True)
    assert abi_operands(cfg)[-2:] == ("state_checkpoints", "values")
    assert len(fake_args(cfg)) == len(fake_args(_fwd("gdn", ckpt=False))) + 2
    with pytest.raises(ValueError, match="write_values"):
        _fwd("gdn", ckpt=False, values=True)


def test_forward_writing_values_compiles_for_sm90a():
    """The training forward of v1.3 (GDN, the bench family; grouped value heads, no h0)."""
    assert callable(compile_fwd(_fwd("gdn", H=2, HV=4, h0=False, values=True), "sm_90a", ffi="cute"))


def test_chain_zeroing_uncovered_rows_compiles_for_sm90a():
    """chain under forward_values (it takes over states' zeroing of uncovered gradient rows)."""
    f = dataclasses.replace(_fwd("gdn"), write_checkpoints=False)
    top = FrostBwdConfig(f, "chain", "float32", "float32", checkpoints=True, forward_values=True)
    assert top.stages == ("chain", "grads")
    chain = top.with_stage("chain")
    assert chain.forward_values and not chain.checkpoints
    assert callable(compile_bwd(chain, "sm_90a", ffi="cute"))


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
