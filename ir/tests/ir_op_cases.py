"""Valid builder calls for every op, with expected outputs written out by hand.

Each `OpCase` builds its input tensors on a fresh graph and states, independently of the
OpSpec inference code, the dims each declared output must get (None = absent) and the
dtype it must carry right after the builder call. `cases_for(op)` returns at least one
case per op; the per-op test asserts that `all_specs()` and this catalogue cover the
same ops, so a new OpSpec without a case fails the suite.
"""
from __future__ import annotations

import random

import cudnn
import ir_la_cases
import ir_sdpa_cases
import ir_structured_cases
from cudnn.ops import pointwise
from ir_case_types import Built, OpCase

D = cudnn.data_type


# -- pointwise -------------------------------------------------------------------------
_PW_SHAPES = {1: ([(2, 3, 4)], (2, 3, 4)),
              2: ([(2, 1, 4), (3, 1)], (2, 3, 4)),
              3: ([(2, 3, 4), (1, 3, 4), (2, 3, 1)], (2, 3, 4))}
_PW_ATTRS = {"leaky_relu": {"negative_slope": 0.01}, "leaky_relu_backward": {"negative_slope": 0.2},
             "gen_index": {"axis": 1}, "relu": {"lower_clip": 0.0, "upper_clip": 6.0},
             "swish": {"swish_beta": 1.5}}


def _pointwise_case(spec: cudnn.ops.OpSpec) -> OpCase:
    def make(g: cudnn.pygraph, rng: random.Random) -> Built:
        shapes, out = _PW_SHAPES[len(spec.ports)]
        tensors = tuple(g.tensor(list(s), data_type=D.HALF) for s in shapes)
        return Built(tensors, dict(_PW_ATTRS.get(spec.name, {})), {"OUT_0": out},
                     {"OUT_0": None})
    return OpCase(spec.name, "broadcast", make)


# -- matmul ------------------------------------------------------------------------------
def _matmul_batched(g: cudnn.pygraph, rng: random.Random) -> Built:
    m, k, n = rng.randint(1, 9), rng.randint(1, 9), rng.randint(1, 9)
    a = g.tensor([3, 1, m, k], data_type=D.BFLOAT16)
    b = g.tensor([2, k, n], data_type=D.BFLOAT16)
    return Built((a, b), {}, {"C": (3, 2, m, n)}, {"C": None})


def _matmul_plain(g: cudnn.pygraph, rng: random.Random) -> Built:
    a, b = g.tensor([5, 7]), g.tensor([7, 3])
    return Built((a, b), {"padding": 0.5}, {"C": (5, 3)}, {"C": None})


_CASES: dict[str, list[OpCase]] = {}
for _spec in pointwise.SPECS:
    _CASES[_spec.name] = [_pointwise_case(_spec)]
_CASES["matmul"] = [OpCase("matmul", "batched_broadcast", _matmul_batched),
                    OpCase("matmul", "plain_2d", _matmul_plain)]
for _case in ir_la_cases.CASES + ir_structured_cases.CASES + ir_sdpa_cases.CASES:
    _CASES.setdefault(_case.op, []).append(OpCase(_case.op, _case.id, _case.make))


def covered_ops() -> set[str]:
    return set(_CASES)


def cases_for(op: str) -> list[OpCase]:
    return list(_CASES.get(op, []))


def all_cases() -> list[OpCase]:
    return [case for cases in _CASES.values() for case in cases]
