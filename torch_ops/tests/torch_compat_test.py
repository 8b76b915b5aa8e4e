"""_torch_compat.fill_defaults gives exactly what torch's own helper gives, on the
schemas of every registered linear-attention op, and is what torch now calls."""
from __future__ import annotations

import random

import pytest
import torch
from torch._library import utils

from cudnn.linear_attention import ops
from cudnn.linear_attention.ops import _torch_compat


def _schemas():
    for family in ops.FAMILY_OPS:
        for op in (family.forward_op, family.backward_op):
            yield op._schema
    # a schema with keyword-only arguments (none of ours has them)
    yield torch._C.parse_schema("f(Tensor a, int b=2, *, float c=1.5, str d='x') -> Tensor")


def test_installed_into_torch():
    assert utils.fill_defaults is _torch_compat.fill_defaults
    assert _torch_compat.original_fill_defaults() is not None


@pytest.mark.parametrize("seed", range(5))
def test_same_results_as_torch(seed):
    original = _torch_compat.original_fill_defaults()
    rng = random.Random(seed)
    for schema in _schemas():
        arguments = schema.arguments
        positional = [a for a in arguments if not a.kwarg_only]
        keyword = [a for a in arguments if a.kwarg_only]
        for _ in range(10):
            n = rng.randint(0, len(positional))
            args = tuple(object() for _ in range(n))  # values are passed through untouched
            kwargs = {a.name: object() for a in keyword if rng.random() < 0.5}
            assert _torch_compat.fill_defaults(schema, args, kwargs) == \
                original(schema, args, kwargs), (str(schema), n, sorted(kwargs))


def test_opt_out_leaves_torch_alone(monkeypatch):
    monkeypatch.setenv("CUDNN_LA_KEEP_TORCH_FILL_DEFAULTS", "1")
    assert _torch_compat.install() is False


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
