"""Bad cu_seqlens tables at the torch ops, on a CPU with the reference engines installed.

- strict_cu_seqlens=True checks the table on its device before anything runs and names
  the first bad entry (engines_common's cu_seqlens_check); a good table runs as before;
- a cu_seqlens on another device than q (meta included) is refused by the op's checks,
  and the fake kernel never hands real callers uninitialised results.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

import cudnn
from cudnn.linear_attention import ops
from tests.reference.inputs import InputConfig, make_inputs
from tests.reference.preprocess import Family
from tests.torch_ops.op_calls import call_op
from tests.torch_ops.reference_engine import reference_engines_installed

CONFIG = InputConfig(family=Family.GDN, seq_lens=(5, 7), H=2, K=8, V=4)


@pytest.fixture(scope="module", autouse=True)
def engines():
    with reference_engines_installed():
        yield


def with_table(table, device=None):
    x = make_inputs(CONFIG, 3)
    cu = torch.tensor(table, dtype=torch.int32, device=device)
    return dataclasses.replace(x, cu_seqlens=cu)


def test_strict_mode_passes_a_good_table_and_names_a_bad_entry():
    o, _ = call_op(with_table([0, 5, 12]), strict_cu_seqlens=True)
    assert o.shape == (12, 2, 4)
    for table, needle in (([0, 5, 20], r"cu_seqlens\[2\] = 20: past the token count "
                                       r"total_T = 12"),
                          ([0, 7, 5], r"cu_seqlens\[2\] = 5: below cu_seqlens\[1\] = 7"),
                          ([0, -1, 12], r"cu_seqlens\[1\] = -1: a negative boundary")):
        with pytest.raises(ValueError, match="gated_delta_net: " + needle):
            call_op(with_table(table), strict_cu_seqlens=True)


@pytest.mark.parametrize("family", [Family.KDA, Family.GDN2])
def test_every_family_takes_the_strict_argument(family):
    config = dataclasses.replace(CONFIG, family=family, HV=2 if family is Family.GDN2 else None)
    x = dataclasses.replace(make_inputs(config, 4),
                            cu_seqlens=torch.tensor([0, 13, 12], dtype=torch.int32))
    with pytest.raises(ValueError, match=r"cu_seqlens\[1\] = 13: past the token count"):
        call_op(x, strict_cu_seqlens=True)


def test_cu_seqlens_on_the_meta_device_is_refused():
    ops.clear_graph_caches()
    call_op(with_table([0, 5, 12]))  # the same signature cached with a CPU table first
    with pytest.raises(cudnn.OpValueError, match="argument 'cu_seqlens': expected a tensor on "
                                                 "q's device"):
        call_op(with_table([0, 5, 12], device="meta"))


def test_the_fake_kernel_refuses_real_tensors_next_to_a_meta_one():
    from cudnn.linear_attention.ops._op_factory import _refuse_real_tensors

    q = torch.zeros(4, 2, 8)
    _refuse_real_tensors("op", {"q": q.to("meta"), "cu_seqlens": q.to("meta")})  # tracing
    _refuse_real_tensors("op", {"q": q, "cu_seqlens": q})                          # real call
    with pytest.raises(cudnn.OpValueError, match="op: argument 'cu_seqlens': expected a tensor "
                                                 "on cpu, the device of 'q'"):
        _refuse_real_tensors("op", {"q": q, "cu_seqlens": q.to("meta")})


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
