"""Fuzz: thousands of random graphs; only documented exceptions may escape.

Each example draws a seed and a handful of steps; each step is one of
- a valid builder call from the op-case catalogue (must succeed, also in a shared graph),
- the same call with one argument replaced by junk (wrong kind, wrong rank, absent,
  another tensor of the graph, an out-of-range number): may only raise OpArgumentError,
  and a rejected call must leave the graph unchanged,
- a tensor edit (dims, dtype, uid): OpArgumentError, or ValueError for a uid collision,
- validate(): ValueError (shapes, layouts) or cudnnGraphNotSupportedError.
Afterwards uids must be unique, dump/DOT/inspect must work, and once frozen every
builder and setter must raise GraphFrozenError. Anything else (KeyError, IndexError,
AttributeError, ZeroDivisionError, AssertionError, ...) is a bug and fails the test.
"""
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import cudnn
import ir_op_cases
from cudnn.ops.registry import all_specs

D = cudnn.data_type
CASES = ir_op_cases.all_cases()
SPECS = all_specs()
DTYPES = [None, D.FLOAT, D.HALF, D.BFLOAT16, D.INT32, D.INT64, D.BOOLEAN, D.FP8_E4M3]
# at least 2,000 per CI run; raise it for a deeper local run: IR_FUZZ_EXAMPLES=50000
EXAMPLES = max(2000, int(os.environ.get("IR_FUZZ_EXAMPLES", "2000")))


def _junk(g: cudnn.pygraph, rng: random.Random):
    tensors = g.all_tensors()
    choices = [
        lambda: None, lambda: "junk", lambda: 3, lambda: -1, lambda: 2.5, lambda: True,
        lambda: [1, 2], lambda: (0.5, None), lambda: object(),
        lambda: g.tensor([rng.randint(0, 4) for _ in range(rng.randint(0, 5))],
                         data_type=rng.choice(DTYPES)),
    ]
    if tensors:
        choices.append(lambda: rng.choice(tensors))
    return rng.choice(choices)()


def _perturbed_call(g: cudnn.pygraph, rng: random.Random, case) -> None:
    built = case.make(g, rng)
    spec = SPECS[case.op]
    args, kwargs = list(built.args), dict(built.kwargs)
    names = list(spec.call.names)
    target = rng.choice(names)
    position = spec.call.positional.index(target) if target in spec.call.positional else None
    if position is not None and position < len(args):
        args[position] = _junk(g, rng)
    else:
        kwargs[target] = _junk(g, rng)
    if rng.random() < 0.1:
        kwargs["not_an_argument"] = 1
    nodes, tensors = len(g.nodes), len(g.all_tensors())
    try:
        getattr(g, case.op)(*args, **kwargs)
    except cudnn.OpArgumentError:
        assert len(g.nodes) == nodes and len(g.all_tensors()) == tensors
    except TypeError as exc:
        # Python's own signature errors (too many positionals, a keyword also given
        # positionally) name the builder; anything else is a bug
        assert case.op in str(exc), exc


def _edit_tensor(g: cudnn.pygraph, rng: random.Random) -> None:
    tensors = g.all_tensors()
    if not tensors:
        return
    t = rng.choice(tensors)
    action = rng.randrange(4)
    try:
        if action == 0:
            t.set_dim([rng.randint(0, 5) for _ in range(rng.randint(0, 4))])
        elif action == 1:
            t.set_data_type(rng.choice(DTYPES))
        elif action == 2:
            t.set_uid(rng.randint(-2, len(tensors) + 2))
        else:
            t.set_output(rng.random() < 0.5)
    except cudnn.OpArgumentError:
        pass
    except ValueError as exc:
        assert "already user-assigned" in str(exc), exc


def _validate(g: cudnn.pygraph) -> bool:
    try:
        g.validate()
        return True
    except cudnn.cudnnGraphNotSupportedError:
        return False
    except ValueError:  # OpValueError from a node check, or a tensor layout check
        return False


def _check_invariants(g: cudnn.pygraph) -> None:
    uids = [t.uid for t in g.all_tensors()]
    assert len(uids) == len(set(uids)) and all(u >= 0 for u in uids)
    for t in g.all_tensors():
        assert g.find_tensor(t.uid) is t
    assert g.dump() and g.to_dot() and g.inspect()["nodes"] is not None


def _check_frozen(g: cudnn.pygraph, rng: random.Random) -> None:
    g.lifecycle.freeze()
    t = rng.choice(g.all_tensors())
    for mutate in (lambda: g.exp(t), lambda: t.set_dim([1]), lambda: t.set_output(True),
                   lambda: g.tensor([1]), lambda: setattr(g.context, "io_data_type", D.HALF)):
        with pytest.raises(cudnn.GraphFrozenError):
            mutate()
    _check_invariants(g)


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 6))
def test_random_graphs_raise_only_documented_errors(seed, steps):
    rng = random.Random(seed)
    g = cudnn.pygraph(io_data_type=rng.choice(DTYPES[:4]),
                      intermediate_data_type=rng.choice(DTYPES[:4]))
    for _ in range(steps):
        roll = rng.random()
        case = rng.choice(CASES)
        if roll < 0.35:
            built = case.make(g, rng)
            getattr(g, case.op)(*built.args, **built.kwargs)  # valid: must not raise
        elif roll < 0.75:
            _perturbed_call(g, rng, case)
        elif roll < 0.9:
            _edit_tensor(g, rng)
        else:
            _validate(g)
        _check_invariants(g)
    if g.all_tensors() and _validate(g):
        _check_frozen(g, rng)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
