"""Strided and transposed inputs in the torch ops (torch_ops/.../ops/_packed_rows.py), on
a CPU with the FROST-like reference engines (kernel_dtype_engines.py):

- views of a fused projection (outer strides wider than a row) and transposed buffers
  (innermost stride != 1), as transformers' layers pass them, reach the engine packed,
  and give the results (and, GDN and KDA, the gradients) of the same values passed
  contiguous;
- contiguous inputs reach the engine as the caller's own tensors (no copy).
"""
from __future__ import annotations

import pytest
import torch

from tests.torch_ops.dtype_normalise_test import (FUNCTIONS, leaves, make_args, run,
                                                  same_buffer, seen)
from tests.torch_ops.kernel_dtype_engines import FROST_LIKE
from tests.torch_ops.reference_engine import reference_engines_installed


# the FROST-like test engines have a backward for GDN and KDA only (the test-only gdn2_bwd
# reference is not among them)
WITH_BACKWARD = ("gdn", "kda")


@pytest.fixture(autouse=True)
def frost_like():
    with reference_engines_installed(FROST_LIKE):
        yield


def strided_copy(t: torch.Tensor, how: str) -> torch.Tensor:
    """The values of t in a non-contiguous layout."""
    if how == "projection":  # a slice of a wider last dim, as q/k/v of a fused projection
        wide = torch.zeros(*t.shape[:-1], 3 * t.shape[-1], dtype=t.dtype)
        wide[..., t.shape[-1]:2 * t.shape[-1]] = t
        return wide[..., t.shape[-1]:2 * t.shape[-1]]
    # transposed storage: the first dim innermost (a conv output transposed back)
    return t.movedim(0, -1).contiguous().movedim(-1, 0)


@pytest.mark.parametrize("family", sorted(FUNCTIONS))
@pytest.mark.parametrize("how", ["projection", "transposed"])
def test_strided_inputs_match_contiguous_ones(family, how):
    args = make_args(family, seed=3)
    names = [n for n in args if n != "cu_seqlens"]
    plain = leaves(args)
    views = {n: (strided_copy(t, how) if n in names else t) for n, t in args.items()}
    assert all(not views[n].is_contiguous() for n in names if views[n].dim() > 1)
    strided = {n: t.detach().requires_grad_(t.is_floating_point()) for n, t in views.items()}
    o, final = run(family, plain)
    o2, final2 = run(family, strided)
    assert all(t.is_contiguous() for t in seen(family).values() if t is not None)
    assert torch.equal(o, o2) and torch.equal(final, final2)
    if family not in WITH_BACKWARD:
        return
    w = torch.randn_like(o)
    ((o * w).sum() + final.sum()).backward()
    ((o2 * w).sum() + final2.sum()).backward()
    for n in names:
        assert strided[n].grad is not None, n
        assert torch.allclose(strided[n].grad, plain[n].grad, rtol=1e-6, atol=1e-7), n


def test_contiguous_inputs_are_not_copied():
    args = make_args("gdn", seed=4)
    run("gdn", args)
    got = seen("gdn")
    assert same_buffer(got["q"], args["q"]) and same_buffer(got["v"], args["v"])


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
