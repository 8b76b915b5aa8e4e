"""A repeated serving call (same shapes, new tensors every call, as a server's decode loop
passes them) takes the launch lane: after the first call no graph is built, the launcher's
checks do not run again, and each call is one kernel call. The FROST decode engine runs on
the CPU with a recording kernel (decode_on_cpu.py), so the whole shipped path is counted.
"""
from __future__ import annotations

import pytest
import torch

from tests.torch_ops.decode_on_cpu import FUNCTIONS, decode_engine_on_cpu, serve, serving_step

N, H, D, POOL = 3, 2, 64, 7


def decode_step(family: str, seed: int, tokens: int = 1) -> dict:
    return serving_step(family, seed, n=N, heads=H, dim=D, tokens=tokens)


@pytest.mark.parametrize("family", sorted(FUNCTIONS))
@pytest.mark.parametrize("tokens", [1, 4], ids=["decode", "speculative"])
def test_repeated_serving_calls_take_the_lane(family, tokens):
    pool = torch.zeros(POOL, H, D, D)
    calls = 12
    with torch.no_grad(), decode_engine_on_cpu() as counts:
        for i in range(calls):
            slots = torch.tensor([(i + j) % POOL for j in range(N)], dtype=torch.int32)
            o, final = serve(family, decode_step(family, i, tokens), pool, slots)
            assert final is pool and o.shape == (N * tokens, H, D)
        assert counts.builds == 1, counts     # one graph, planned once
        assert counts.binds == 1, counts      # the launcher's checks once (the lane's bind)
        assert counts.checked == 1, counts    # the first call's checked execute
        assert counts.launches == calls - 1, counts  # every later call: one kernel call


def test_another_layout_falls_back_to_the_checked_path_and_another_shape_builds():
    pool = torch.zeros(POOL, H, D, D)
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
