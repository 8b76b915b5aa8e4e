"""Fuzz of the whole graph path with the CPU oracle: build, edit, validate, plan, execute.

Each example builds one matmul graph (the oracle, TorchMatmulEngine, serves single-node
matmul graphs; a second node or a pointwise graph leaves no engine), with random dims
and dtypes, then takes random steps: valid and invalid edits (uids, in-place layout
edits with junk, set_dim, output dims the op cannot produce, dtypes), builder calls
with junk, validate, planning, and executes with matching or mismatched buffers
(another shape, another dtype, a buffer of another tensor, junk). Asserted:
- only documented exceptions escape: OpArgumentError (OpTypeError / OpValueError), a
  uid collision's ValueError, ValueError / TypeError / KeyError for bad execute
  arguments, cudnnGraphNotSupportedError, GraphFrozenError, and RuntimeError for a
  second planning; anything else (IndexError, AttributeError, AssertionError, a bare
  pybind cast error...) fails the test;
- a call that raises leaves the graph as it was (nodes, tensors, uids, auto-bindings,
  every tensor's dims, strides, dtype and flags);
- an execute on a buffer that contradicts the graph is refused before the product and
  leaves the output buffer untouched; an execute on matching buffers gives A @ B.
At least 10,000 graphs per CI run (FUZZ_GRAPHS raises it), budgeted under 60 s.
"""
from __future__ import annotations

import os
import random
import time

import pytest

torch = pytest.importorskip("torch")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

import cudnn  # noqa: E402
from cudnn.engines.manifest import register_backend  # noqa: E402
from tests.oracle.fake_backend import install_no_backend  # noqa: E402
from tests.oracle.torch_matmul_engine import TorchMatmulEngine  # noqa: E402

D = cudnn.data_type
GRAPHS = max(10_000, int(os.environ.get("FUZZ_GRAPHS", "10000")))
BUDGET_S = 60.0
TORCH = {D.FLOAT: torch.float32, D.HALF: torch.float16, D.BFLOAT16: torch.bfloat16,
         D.DOUBLE: torch.float64}
DTYPES = [D.FLOAT, D.HALF, D.BFLOAT16, D.INT32]
JUNK = ["x", -1, 2**63, 2.5, True, None, [1], object()]
DOCUMENTED = (cudnn.OpArgumentError, cudnn.cudnnGraphNotSupportedError, cudnn.GraphFrozenError,
              ValueError, TypeError, KeyError, RuntimeError)
_started: list[float] = []
stats = {"graphs": 0, "executed": 0, "refused_buffers": 0, "raised": 0}


def _state(g):
    """Everything a refused call must leave unchanged (building a plan is no change to
    the graph: planned and built count as one state here)."""
    s = g.state
    return ((s.mutable, s.validated, s.planned), [n.name for n in g.nodes],
            sorted(g.auto_bindings()),
            [(t.uid, t.name, tuple(t.dim), tuple(t.stride), t.data_type, t.is_virtual,
              t.uid_assigned, t.dim_assigned, t.stride_assigned) for t in g.all_tensors()])


def _call(g, fn, allowed=DOCUMENTED, planning=False):
    """Run a step that may be refused; a refusal must be documented and change nothing
    (planning that finds no plan freezes the graph all the same: documented)."""
    before = _state(g)
    try:
        fn()
        return True
    except allowed as exc:
        if isinstance(exc, RuntimeError) and not isinstance(exc, cudnn.GraphFrozenError):
            assert "one-shot" in str(exc) or "already called" in str(exc), exc
        if isinstance(exc, TypeError) and not isinstance(exc, cudnn.OpArgumentError):
            assert any(word in str(exc) for word in ("execute", "variant pack", "buffer",
                                                     "positional", "keyword")), exc
        stats["raised"] += 1
        after = _state(g)
        if planning and isinstance(exc, cudnn.cudnnGraphNotSupportedError):
            before, after = before[1:], after[1:]
        assert after == before, (exc, before, after)
        return False


def _dims(rng):
    return [rng.randint(1, 3) for _ in range(rng.choice((2, 3)))]


def _edit(g, rng):
    tensors = g.all_tensors()
    t = rng.choice(tensors)
    field = rng.choice(("dim", "stride"))
    action = rng.randrange(9)
    if action == 0:
        # list semantics: an index past the end is an IndexError, as for any list
        _call(g, lambda: getattr(t, field).__setitem__(rng.randrange(-3, 3), rng.choice(JUNK)),
              DOCUMENTED + (IndexError,))
    elif action == 1:
        _call(g, lambda: getattr(t, field).append(rng.choice(JUNK + [2])))
    elif action == 2:
        _call(g, lambda: t.set_dim([rng.randint(0, 3) for _ in range(rng.randint(1, 3))]))
    elif action == 3:
        _call(g, lambda: t.set_uid(rng.choice([rng.randint(-2, len(tensors) + 3), 2**63, "7"])))
    elif action == 4:
        _call(g, lambda: t.set_data_type(rng.choice(DTYPES + ["half"])))
    elif action == 5:
        _call(g, lambda: t.set_output(rng.random() < 0.7))
    elif action == 6:
        _call(g, lambda: g.tensor(_dims(rng) + [rng.choice([1, 2**64])], uid=rng.choice(
            [None, 1, 2, 2**63]), data_type=rng.choice(DTYPES)))
    elif action == 7:  # another node: no engine serves two-node graphs
        _call(g, lambda: g.relu(rng.choice([*tensors, "x", None])))
    else:
        _call(g, lambda: g.matmul(rng.choice(tensors), rng.choice([*tensors, 3.0])))


def _buffers(g, rng, mm, mismatch):
    a, b, c = mm.inputs["A"], mm.inputs["B"], mm.outputs["C"]
    pack = {}
    for t in (a, b, c):
        if t.data_type not in TORCH or not t.dim:
            return None
        pack[t] = torch.randn(*t.dim).to(TORCH[t.data_type])
    pack[c].fill_(float("nan"))
    if mismatch:
        victim = rng.choice((a, b, c))
        kind = rng.randrange(4)
        if kind == 0:
            pack[victim] = torch.zeros(*[n + 1 for n in victim.dim], dtype=pack[victim].dtype)
        elif kind == 1:
            other = torch.float16 if pack[victim].dtype != torch.float16 else torch.float32
            pack[victim] = pack[victim].to(other)
        elif kind == 2:
            pack[victim] = torch.zeros(3, dtype=pack[victim].dtype)
        else:
            pack[victim] = rng.choice(["junk", 0xDEAD, None, [1.0]])
    return pack


def _execute(g, rng):
    mm = g.nodes[0]
    mismatch = rng.random() < 0.5
    pack = _buffers(g, rng, mm, mismatch)
    if pack is None:
        return
    outs = {t: buf for t, buf in pack.items() if isinstance(buf, torch.Tensor)
            and t is mm.outputs["C"]}
    before = [buf.clone() for buf in outs.values()]
    workspace = torch.empty(1 << 12, dtype=torch.uint8)
    ran = _call(g, lambda: g.execute(pack, workspace))
    if not ran:  # refused before the product: the output keeps its NaNs
        for old, new in zip(before, outs.values()):
            assert torch.equal(old.isnan(), new.isnan()), "a refused execute wrote an output"
        stats["refused_buffers"] += 1
        return
    assert not mismatch or pack[mm.outputs["C"]] is None or _matches(pack, mm), \
        "an execute ran on a buffer that contradicts the graph"
    stats["executed"] += 1
    a, b, c = (pack[mm.inputs["A"]], pack[mm.inputs["B"]], pack[mm.outputs["C"]])
    want = torch.matmul(a.double(), b.double())
    assert torch.allclose(c.double(), want.to(c.dtype).double(), rtol=2e-2, atol=2e-2)


def _matches(pack, mm):
    """Whether every buffer still agrees with its tensor (the pack was meant to mismatch)."""
    for t in (mm.inputs["A"], mm.inputs["B"], mm.outputs["C"]):
        buf = pack[t]
        if not isinstance(buf, torch.Tensor) or tuple(buf.shape) != tuple(t.dim) \
                or buf.dtype != TORCH.get(t.data_type):
            return False
    return True


@pytest.fixture(scope="module", autouse=True)
def no_backend():
    from _pytest.monkeypatch import MonkeyPatch

    patch = MonkeyPatch()
    install_no_backend(patch)
    yield
    patch.undo()


@settings(max_examples=GRAPHS, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_random_graphs_through_plan_and_execute(seed):
    if not _started:
        _started.append(time.process_time())
    rng = random.Random(seed)
    stats["graphs"] += 1
    dt = rng.choice(DTYPES[:3])
    g = cudnn.pygraph(io_data_type=dt, compute_data_type=D.FLOAT)
    m, k, n = (rng.randint(1, 3) for _ in range(3))
    batch = [rng.randint(1, 2)] if rng.random() < 0.5 else []
    a = g.tensor(batch + [m, k], data_type=dt, name="A")
    b = g.tensor(batch + [k + (rng.random() < 0.05), n], data_type=dt, name="B")
    if not _call(g, lambda: g.matmul(a, b, name="mm")):
        return
    c = g.nodes[0].outputs["C"]
    c.set_output(True).set_data_type(dt)
    engine = TorchMatmulEngine(block_ks=(None,))
    register_backend(g, engine)
    for _ in range(rng.randint(0, 3)):
        _edit(g, rng)
    if rng.random() < 0.3:
        _call(g, lambda: c.set_dim([rng.randint(1, 3) for _ in c.dim]))
    if not _call(g, g.validate):
        return
    if not _call(g, g.create_execution_plans, planning=True):
        return
    assert g.is_frozen
    _call(g, g.create_execution_plans)  # planning is one-shot
    _call(g, lambda: a.set_dim([1, 1]))  # frozen
    for _ in range(rng.randint(1, 2)):
        _execute(g, rng)


def test_the_fuzz_ran_its_graphs_within_budget():
    """Runs after the fuzz (file order): every graph was drawn, the paths were all taken,
    and the whole run stayed under BUDGET_S of CPU time."""
    if not _started:
        pytest.skip("the fuzz did not run in this process (selected alone)")
    elapsed = time.process_time() - _started[0]  # CPU time: other processes do not count
    print(f"\nexecute fuzz: {stats} in {elapsed:.1f} s")
    assert stats["graphs"] >= GRAPHS
    assert stats["executed"] > GRAPHS // 10 and stats["refused_buffers"] > GRAPHS // 10
    assert elapsed < BUDGET_S * max(1, GRAPHS / 10_000), f"{elapsed:.1f} s"


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q", "-s"]))
