"""A repeated serving call (same shapes, new tensors every call, as a server's decode loop
passes them) takes the launch lane: after the first call no graph is built, the launcher's
checks do not run again, and each call is one kernel call. The FROST decode engine runs on
the CPU with a recording kernel (decode_on_cpu.py), so the whole shipped path is counted.
"""
from __future__ import annotations

import pytest
import torch

from cudnn.linear_attention import ops
from tests.torch_ops.decode_on_cpu import decode_engine_on_cpu

FUNCTIONS = {"gdn": ops.gated_delta_net, "kda": ops.kimi_delta_attention,
             "gdn2": ops.gated_delta_net_v2}
N, H, K, V, POOL = 3, 2, 64, 64, 7


def decode_step(family: str, seed: int, tokens: int = 1) -> dict:
    """Fresh tensors for one step of N sequences x `tokens` tokens (new addresses)."""
    gen = torch.Generator().manual_seed(seed)
    T = N * tokens

    def rand(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=gen).to(dtype)
    bf16 = torch.bfloat16
    per_channel = family != "gdn"
    x = dict(q=rand(T, H, K, dtype=bf16), k=rand(T, H, K, dtype=bf16), v=rand(T, H, V, dtype=bf16),
             g=-rand(T, H, K).abs() if per_channel else -rand(T, H).abs(),
             beta=rand(T, H, K, dtype=bf16).sigmoid() if family == "gdn2" else rand(T, H).sigmoid(),
             cu_seqlens=torch.arange(0, T + 1, tokens, dtype=torch.int32))
    if family == "gdn2":
        x["w"] = rand(T, H, V, dtype=bf16)
    return x


def serve(family: str, x: dict, pool: torch.Tensor, slots: torch.Tensor, **kw):
    args = [x["q"], x["k"], x["v"], x["g"], x["beta"]]
    if family == "gdn2":
        args.append(x["w"])
    return FUNCTIONS[family](*args, x["cu_seqlens"], initial_state=pool, output_final_state=True,
                             overwrite_initial_state=True, state_indices=slots,
                             use_qk_l2norm_in_kernel=True, **kw)


@pytest.mark.parametrize("family", sorted(FUNCTIONS))
@pytest.mark.parametrize("tokens", [1, 4], ids=["decode", "speculative"])
def test_repeated_serving_calls_take_the_lane(family, tokens):
    pool = torch.zeros(POOL, H, V, K)
    calls = 12
    with torch.no_grad(), decode_engine_on_cpu() as counts:
        for i in range(calls):
            slots = torch.tensor([(i + j) % POOL for j in range(N)], dtype=torch.int32)
            o, final = serve(family, decode_step(family, i, tokens), pool, slots)
            assert final is pool and o.shape == (N * tokens, H, V)
        assert counts.builds == 1, counts     # one graph, planned once
        assert counts.binds == 1, counts      # the launcher's checks once (the lane's bind)
        assert counts.checked == 1, counts    # the first call's checked execute
        assert counts.launches == calls - 1, counts  # every later call: one kernel call


def test_another_layout_falls_back_to_the_checked_path_and_another_shape_builds():
    pool = torch.zeros(POOL, H, V, K)
    slots = torch.tensor([0, 1, 2], dtype=torch.int32)
    with torch.no_grad(), decode_engine_on_cpu() as counts:
        serve("gdn", decode_step("gdn", 0), pool, slots)
        serve("gdn", decode_step("gdn", 1), pool, slots)
        x = decode_step("gdn", 2)
        shifted = torch.empty(x["q"].numel() + 1, dtype=x["q"].dtype)[1:].view(x["q"].shape)
        x["q"] = shifted.copy_(x["q"])  # 2 bytes off the lane's 16-byte alignment
        serve("gdn", x, pool, slots)
        assert (counts.builds, counts.launches, counts.checked) == (1, 1, 2), counts
        serve("gdn", decode_step("gdn", 3, tokens=2), pool, slots)
        assert counts.builds == 2, counts


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
