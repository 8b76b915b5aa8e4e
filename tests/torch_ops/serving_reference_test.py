"""The serving path of the torch ops on a CPU (reference engines installed): state_indices,
overwrite_initial_state, skipped slots, checkpoints, mixed prefill and decode batches,
chained over several calls against the float64 serving reference (serving_steps.py),
and the launch lane's aliasing of the pool (the final state goes into initial_state)."""
from __future__ import annotations

import pytest
import torch

from tests.reference.preprocess import Family
from tests.torch_ops.reference_engine import reference_engine, reference_engines_installed
from tests.torch_ops.serving_steps import Step, pool_config, run_steps

FP32_BOUND = 1e-5
POOL = 6
DECODE = [Step((1, 1, 1), (4, 0, 2)), Step((1, 1, 1), (0, 2, 4)), Step((1, 1, 1), (2, -1, 0)),
          Step((1, 1, 1), (4, 6, 1))]  # -1 and 6 (= the pool size) skip their sequence
SPECULATIVE = [Step((3, 3), (1, 5)), Step((3, 3), (5, 1))]
MIXED = [Step((7, 1, 1, 5), (0, 3, 5, 2)), Step((1, 1, 1, 1), (2, 0, 3, 5))]


@pytest.fixture(autouse=True)
def engines():
    with reference_engines_installed():
        yield


def _pool(cfg):
    return torch.randn(POOL, cfg.HO, cfg.V, cfg.K, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("family", list(Family))
@pytest.mark.parametrize("steps", [DECODE, SPECULATIVE, MIXED], ids=["decode", "spec", "mixed"])
def test_pool_in_place_over_several_calls(family, steps):
    cfg = pool_config(family, safe_gate=True, use_beta_sigmoid=True, use_qk_l2norm=True)
    worst = run_steps(cfg, steps, _pool(cfg))
    assert max(worst.values()) < FP32_BOUND, worst


@pytest.mark.parametrize("family", [Family.GDN, Family.KDA])
def test_per_token_checkpoints_for_rejection(family):
    cfg = pool_config(family)
    worst = run_steps(cfg, SPECULATIVE, _pool(cfg), every=1, checkpoint_dtype=torch.float32)
    assert max(worst.values()) < FP32_BOUND, worst


def test_pool_without_overwrite_fills_final_state_rows():
    cfg = pool_config(Family.KDA, gate_domain="linear")
    pool = _pool(cfg)
    before = pool.clone()
    worst = run_steps(cfg, DECODE[:1], pool, overwrite=False)
    assert max(worst.values()) < FP32_BOUND, worst
    assert torch.equal(pool, before)


def test_the_launch_lane_writes_the_pool():
    engine = reference_engine("gdn")
    engine.offers_direct_launch = True
    cfg = pool_config(Family.GDN)
    worst = run_steps(cfg, DECODE, _pool(cfg))
    assert max(worst.values()) < FP32_BOUND, worst
    assert engine.direct_calls == len(DECODE) - 1  # the first call builds, the rest launch


def test_strided_inputs_are_packed_but_the_pool_is_written_in_place():
    """q/k/v as slices of a fused projection (as serving models pass them): packed once;
    the pool itself is never copied, so its rows are updated where they are."""
    from cudnn.linear_attention import ops
    from tests.torch_ops.serving_steps import step_inputs

    cfg = pool_config(Family.GDN)
    x = step_inputs(cfg, DECODE[0], 0)
    fused = torch.cat([x.q, x.k], dim=-1)  # [T, H, 2K]: q and k are strided views
    q, k = fused[..., :cfg.K], fused[..., cfg.K:]
    assert not q.is_contiguous()
    slots = torch.tensor([4, 0, 2], dtype=torch.int32)
    pool_a, pool_b = _pool(cfg), _pool(cfg)
    with torch.no_grad():
        o_view, final = ops.gated_delta_net(q, k, x.v, x.g, x.beta, x.cu_seqlens,
                                            initial_state=pool_a, output_final_state=True,
                                            overwrite_initial_state=True, state_indices=slots)
        o_dense, _ = ops.gated_delta_net(x.q, x.k, x.v, x.g, x.beta, x.cu_seqlens,
                                         initial_state=pool_b, output_final_state=True,
                                         overwrite_initial_state=True, state_indices=slots)
    assert final is pool_a and torch.equal(o_view, o_dense) and torch.equal(pool_a, pool_b)
    assert not torch.equal(pool_a, _pool(cfg))


def test_compiled_call_writes_the_pool_like_eager():
    """torch.compile(fullgraph=True) traces the serving op (its fake kernel, initial_state
    declared mutated): the compiled call leaves the pool as the eager call does."""
    from cudnn.linear_attention import ops
    from tests.torch_ops.serving_steps import step_inputs

    cfg = pool_config(Family.GDN)
    x = step_inputs(cfg, DECODE[0], 0)
    slots = torch.tensor([4, 0, -1], dtype=torch.int32)

    def step(q, k, v, g, beta, cu, pool, slots):
        return ops.gated_delta_net(q, k, v, g, beta, cu, initial_state=pool,
                                   output_final_state=True, overwrite_initial_state=True,
                                   state_indices=slots)[0]
    eager_pool, compiled_pool = _pool(cfg), _pool(cfg)
    with torch.no_grad():
        o_eager = step(*x.args(), eager_pool, slots)
        o_compiled = torch.compile(step, fullgraph=True, backend="aot_eager")(
            *x.args(), compiled_pool, slots)
    assert torch.equal(o_eager, o_compiled)
    assert torch.equal(eager_pool, compiled_pool) and not torch.equal(eager_pool, _pool(cfg))


@pytest.mark.parametrize("serving", [False, True], ids=["forward", "serve"])
def test_beta_guard_is_refused_by_name(serving):
    """No engine implements GDN-2's beta_guard: the ops refuse it before planning, naming
    the argument and what they take, on real and on meta (traced) tensors alike."""
    from cudnn.linear_attention import ops
    from tests.torch_ops.serving_steps import step_inputs

    cfg = pool_config(Family.GDN2)
    x = step_inputs(cfg, DECODE[0], 0)
    pool = _pool(cfg)
    extra = dict(initial_state=pool, output_final_state=True, overwrite_initial_state=True,
                 state_indices=torch.tensor([0, 1, 2], dtype=torch.int32)) if serving else {}
    for device in ("cpu", "meta"):
        args = [t.to(device) for t in (x.q, x.k, x.v, x.g, x.beta, x.w, x.cu_seqlens)]
        kw = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in extra.items()}
        with torch.no_grad(), pytest.raises(ValueError, match=r"beta_guard.*expected False "
                                            r"\(no engine implements GDN-2's erase-gate"):
            ops.gated_delta_net_v2(*args, beta_guard=True, **kw)
    with torch.no_grad():  # the same call without it runs
        ops.gated_delta_net_v2(x.q, x.k, x.v, x.g, x.beta, x.w, x.cu_seqlens, **extra)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
