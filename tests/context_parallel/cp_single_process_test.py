"""Context parallelism in one process (no torch.distributed: world size 1, no cut) equals
the plain ops, and its argument errors name the argument, the expectation and the value."""
from __future__ import annotations

import pytest
import torch

from cudnn.linear_attention import context_parallel as cp
from cudnn.linear_attention import ops
from tests.reference.compare import rel_err
from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs
from tests.reference.preprocess import Family
from tests.torch_ops.reference_summary_engine import cp_reference_engines_installed

F64 = torch.float64


@pytest.fixture(scope="module", autouse=True)
def engines():
    with cp_reference_engines_installed():
        yield


def _inputs(family=Family.GDN2):
    config = InputConfig(family=family, seq_lens=(6, 0, 9), H=2, K=4, V=3, dtype=F64,
                         gate_dtype=F64, state_dtype=F64, with_initial_state=True)
    return config, make_inputs(config, seed=3)


def test_one_process_equals_the_op():
    config, x = _inputs()
    dO, d_final = make_grad_outputs(config, seed=4)
    results = []
    for fn in (ops.gated_delta_net_v2, cp.gated_delta_net_v2):
        leaves = [t.detach().clone().requires_grad_(True)
                  for t in (x.q, x.k, x.v, x.g, x.beta, x.w, x.initial_state)]
        *args, h0 = leaves
        o, final = fn(*args, x.cu_seqlens, initial_state=h0, output_final_state=True)
        torch.autograd.backward((o, final), (dO, d_final))
        results.append([o, final, *[t.grad for t in leaves]])
    for i, (a, b) in enumerate(zip(*results)):
        assert rel_err(b, a) <= 1e-13, f"result {i}"


def test_errors_name_the_argument():
    config, x = _inputs(Family.GDN)
    with pytest.raises(ValueError, match="'q'.*THD shard"):
        cp.gated_delta_net(x.q[0], x.k, x.v, x.g, x.beta, x.cu_seqlens)
    with pytest.raises(ValueError, match="'initial_state'.*one row per global sequence"):
        cp.gated_delta_net(x.q, x.k, x.v, x.g, x.beta, x.cu_seqlens,
                           initial_state=x.initial_state[:2])
    with pytest.raises(ValueError, match="'shard_offsets'.*2 token offsets"):
        cp.gated_delta_net(x.q, x.k, x.v, x.g, x.beta, x.cu_seqlens, shard_offsets=[0, 5, 15])
    with pytest.raises(ValueError, match="'q'.*expected 15 tokens on rank 0"):
        cp.gated_delta_net(x.q[:10], x.k[:10], x.v[:10], x.g[:10], x.beta[:10], x.cu_seqlens,
                           shard_offsets=[0, 15])
    with pytest.raises(ValueError, match="'cu_seqlens'.*integer"):
        cp.gated_delta_net(x.q, x.k, x.v, x.g, x.beta, x.cu_seqlens.double())


def test_plan_of_this_process():
    _, x = _inputs()
    plan = cp.shard_plan(x.cu_seqlens, 15)
    assert (plan.rank, plan.world, plan.head, plan.tail) == (0, 1, None, None)
    assert [p.sequence for p in plan.pieces] == [0, 2] and plan.empty_sequences == (1,)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
