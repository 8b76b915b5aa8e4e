"""L0: the v1.2 kernels (state checkpoints) cross-compile for sm_90a (no GPU needed).

The v2 forward compiled with write_checkpoints (its launcher takes the extra
state_checkpoints pointer: the argument list of launch_abi.fake_args for that config),
the backward's ``values`` kernel (U per chunk from the forward's checkpoints) and the
``grads`` kernels reading S from the packed checkpoint rows, through the entries the GPU
launch uses (compile_kernel.compile_fwd, bwd_compile.compile_bwd). Skips where
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


def _fwd(family, K=128, V=128, H=4, HV=4, l2=True, h0=True, ckpt=True):
    vec, per_beta = FAMILY[family]
    return FrostFwdConfig("bfloat16", "float32" if h0 else None, H, H, HV, K, V, vec, per_beta, per_beta, l2,
                          h0, False, algorithm="v2", gate_align16=vec, write_checkpoints=ckpt)


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


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
