"""Dtype normalisation in the torch ops (torch_ops/.../ops/_dtype_normalise.py), on a CPU
with reference engines that read only kernel dtypes (kernel_dtype_engines.py):

- g and beta in any floating dtype, cu_seqlens int64, a_log/dt_bias in 16-bit and states
  in bfloat16 reach the engine in the dtypes it reads, and the results equal those of a
  caller who converted by hand;
- gradients come back in each argument's own dtype (the converted path's gradient,
  rounded once);
- what already matches is passed as it is (the engine sees the caller's very tensor);
- a bfloat16 state is kept for an engine that reads bfloat16 states (FROST-like) and
  converted to float32, then final_state back to bfloat16, for one that does not
  (cuTile-like);
- the choice is made once per configuration; torch.compile takes the float32 state.
"""
from __future__ import annotations

import pytest
import torch

from cudnn.linear_attention import ops
from tests.torch_ops.kernel_dtype_engines import CUTILE_LIKE, FROST_LIKE
from tests.torch_ops.reference_engine import reference_engine, reference_engines_installed

FUNCTIONS = {"gdn": ops.gated_delta_net, "kda": ops.kimi_delta_attention,
             "gdn2": ops.gated_delta_net_v2}
T, N, H, K, V = 11, 2, 2, 8, 4


def make_args(family: str, seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen)

    q = torch.nn.functional.normalize(randn(T, H, K), dim=-1)
    k = torch.nn.functional.normalize(randn(T, H, K), dim=-1)
    args = dict(q=q, k=k, v=randn(T, H, V))
    gate = (T, H) if family == "gdn" else (T, H, K)
    args["g"] = torch.nn.functional.logsigmoid(randn(*gate))
    args["beta"] = torch.sigmoid(randn(*((T, H, K) if family == "gdn2" else (T, H))))
    if family == "gdn2":
        args["w"] = torch.sigmoid(randn(T, H, V))
    args["cu_seqlens"] = torch.tensor([0, 4, T], dtype=torch.int32)
    args["initial_state"] = randn(N, H, V, K)
    return args


def run(family: str, args: dict[str, torch.Tensor], **kwargs):
    fn = FUNCTIONS[family]
    tensors = dict(args)
    initial = tensors.pop("initial_state")
    return fn(**tensors, initial_state=initial, output_final_state=True, **kwargs)


def leaves(args: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {n: t.detach().clone().requires_grad_(t.is_floating_point())
            for n, t in args.items()}


def seen(family: str) -> dict[str, torch.Tensor]:
    """The input buffers the reference engine received in its last forward execute."""
    return reference_engine(family).seen[-1]


def same_buffer(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The engine read the caller's memory itself (no converted copy)."""
    return a.dtype == b.dtype and a.data_ptr() == b.data_ptr()


@pytest.fixture(params=["frost_like", "cutile_like"])
def engines(request):
    with reference_engines_installed({"frost_like": FROST_LIKE,
                                      "cutile_like": CUTILE_LIKE}[request.param]):
        yield request.param


@pytest.fixture
def frost_like():
    with reference_engines_installed(FROST_LIKE):
        yield


# (family, argument, the caller's dtype, what the engine reads)
GATE_CASES = [
    ("gdn", "g", torch.bfloat16, torch.float32),
    ("gdn", "g", torch.float16, torch.float32),
    ("gdn", "g", torch.float64, torch.float32),
    ("kda", "g", torch.bfloat16, torch.float32),
    ("gdn", "beta", torch.bfloat16, torch.float32),
    ("kda", "beta", torch.float16, torch.float32),
    ("gdn2", "g", torch.bfloat16, torch.float32),
    ("gdn2", "beta", torch.bfloat16, torch.float32),   # GDN-2 reads beta and w in q's dtype
    ("gdn2", "w", torch.float64, torch.float32),
]


@pytest.mark.parametrize("family,name,dtype,reads", GATE_CASES,
                         ids=[f"{f}-{n}-{str(d)[6:]}" for f, n, d, _ in GATE_CASES])
def test_gate_dtypes_are_converted_to_what_the_engine_reads(engines, family, name, dtype,
                                                            reads):
    args = make_args(family)
    args[name] = args[name].to(dtype)
    o, final = run(family, args)
    assert seen(family)[name].dtype == reads
    by_hand = dict(args, **{name: args[name].to(reads)})
    o_ref, final_ref = run(family, by_hand)
    torch.testing.assert_close(o, o_ref, rtol=0, atol=0)
    torch.testing.assert_close(final, final_ref, rtol=0, atol=0)


@pytest.mark.parametrize("family,name,dtype",
                         [("gdn", "g", torch.bfloat16), ("gdn", "beta", torch.float16),
                          ("kda", "g", torch.float16), ("kda", "beta", torch.bfloat16)])
def test_gradients_come_back_in_the_callers_dtype(frost_like, family, name, dtype):
    args = make_args(family, seed=1)
    args[name] = args[name].to(dtype)
    mine = leaves(args)
    o, final = run(family, mine)
    (o.sum() + final.square().sum()).backward()
    by_hand = leaves(dict(args, **{name: args[name].float()}))
    o_ref, final_ref = run(family, by_hand)
    (o_ref.sum() + final_ref.square().sum()).backward()
    grad = mine[name].grad
    assert grad.dtype == dtype
    torch.testing.assert_close(grad, by_hand[name].grad.to(dtype), rtol=0, atol=0)
    for other in ("q", "k", "v", "initial_state"):
        torch.testing.assert_close(mine[other].grad, by_hand[other].grad, rtol=0, atol=0)


def test_int64_cu_seqlens_become_int32(engines):
    args = make_args("kda")
    args["cu_seqlens"] = args["cu_seqlens"].long()
    o, _ = run("kda", args)
    assert seen("kda")["cu_seqlens"].dtype == torch.int32
    o_ref, _ = run("kda", dict(args, cu_seqlens=args["cu_seqlens"].int()))
    torch.testing.assert_close(o, o_ref, rtol=0, atol=0)


def test_safe_gate_parameters_in_16_bit_become_float32(frost_like):
    args = make_args("gdn", seed=2)
    a_log = torch.randn(H).to(torch.bfloat16).requires_grad_(True)
    dt_bias = torch.randn(H).to(torch.float16).requires_grad_(True)
    o, _ = run("gdn", args, safe_gate=True, a_log=a_log, dt_bias=dt_bias)
    assert seen("gdn")["a_log"].dtype == seen("gdn")["dt_bias"].dtype == torch.float32
    o.sum().backward()
    assert a_log.grad.dtype == torch.bfloat16 and dt_bias.grad.dtype == torch.float16


def test_matching_dtypes_pass_without_a_copy(engines):
    args = make_args("gdn")
    run("gdn", args)
    for name in ("g", "beta", "cu_seqlens", "initial_state"):
        assert same_buffer(seen("gdn")[name], args[name]), name


def test_bfloat16_state_kept_where_the_engine_reads_it(frost_like):
    args = make_args("gdn", seed=3)
    args["initial_state"] = args["initial_state"].to(torch.bfloat16)
    mine = leaves(args)
    _, final = run("gdn", mine)
    assert same_buffer(seen("gdn")["initial_state"], mine["initial_state"])
    assert final.dtype == torch.bfloat16
    final.float().sum().backward()
    assert mine["initial_state"].grad.dtype == torch.bfloat16


def test_bfloat16_state_converted_where_the_engine_reads_float32_only():
    args = make_args("kda", seed=4)
    args["initial_state"] = args["initial_state"].to(torch.bfloat16)
    with reference_engines_installed(CUTILE_LIKE):
        mine = leaves(args)
        o, final = run("kda", mine)
        assert seen("kda")["initial_state"].dtype == torch.float32
        assert final.dtype == torch.bfloat16
        (o.sum() + final.float().sum()).backward()
        by_hand = leaves(dict(args, initial_state=args["initial_state"].float()))
        o_ref, final_ref = run("kda", by_hand)
        (o_ref.sum() + final_ref.sum()).backward()
    torch.testing.assert_close(o, o_ref, rtol=0, atol=0)
    torch.testing.assert_close(final, final_ref.to(torch.bfloat16), rtol=0, atol=0)
    assert mine["initial_state"].grad.dtype == torch.bfloat16
    torch.testing.assert_close(mine["initial_state"].grad,
                               by_hand["initial_state"].grad.to(torch.bfloat16), rtol=0, atol=0)


def test_the_choice_is_made_once_per_configuration(frost_like):
    args = make_args("gdn")
    args["beta"] = args["beta"].to(torch.bfloat16)
    run("gdn", args)
    misses = ops.graph_cache_info()["cudnn::gated_delta_net_fwd"].misses
    for _ in range(3):
        run("gdn", args)
    assert ops.graph_cache_info()["cudnn::gated_delta_net_fwd"].misses == misses


def test_no_engine_reads_it_then_the_ops_own_error(frost_like):
    args = make_args("gdn")
    args["q"], args["k"], args["v"] = (args[n].double() for n in ("q", "k", "v"))
    with pytest.raises(Exception) as info:
        run("gdn", args)
    assert "no engine can run this call" in str(info.value)
    assert "q/k/v dtype must be" in str(info.value)


def test_compile_converts_to_float32_states(frost_like):
    args = make_args("gdn", seed=5)
    args["initial_state"] = args["initial_state"].to(torch.bfloat16)
    args["g"] = args["g"].to(torch.bfloat16)

    def fn(q, k, v, g, beta, cu, h0):
        return ops.gated_delta_net(q, k, v, g, beta, cu, initial_state=h0,
                                   output_final_state=True)

    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    o, final = compiled(*args.values())
    assert seen("gdn")["initial_state"].dtype == torch.float32
    assert seen("gdn")["g"].dtype == torch.float32
    assert final.dtype == torch.bfloat16
    o_eager, final_eager = fn(*args.values())
    torch.testing.assert_close(o, o_eager, rtol=0, atol=0)
    torch.testing.assert_close(final, final_eager, rtol=0, atol=0)


if __name__ == "__main__":
    import pytest as _pytest
    raise SystemExit(_pytest.main([__file__, "-q"]))
