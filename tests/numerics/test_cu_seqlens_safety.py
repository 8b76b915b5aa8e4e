"""GPU: malformed cu_seqlens tables are memory-safe on every GPU engine; strict mode raises.

For each engine (FROST forward and backward for GDN, KDA and GDN-2; the FROST recurrent
(decode) forward; cuTile forward and backward for GDN and KDA; the FROST span summaries, forward and backward, whose results
are per sequence and need only be finite) and each
malformed table (last entry past T, a negative entry, a non-monotone table, last entry
short of T, a first entry past 0, a descending table), a forward and a backward run
through the torch ops with the engine pinned (plan_name). Each must return without error,
with every result finite and every row that no sequence covers exactly zero: the torch
ops allocate their results with torch.empty, so an unwritten row would show garbage.
Which rows a sequence covers: FROST clamps each [cu[n], cu[n+1]) into [0, T] (an
inverted range is empty); cuTile runs the running maximum of the clamped table, so its
rows are [S[0], S[N]). Strict mode (strict_cu_seqlens=True, or CUDNN_STRICT_CU_SEQLENS=1
for the engines' own launches) raises ValueError naming the first bad entry.

Run under compute-sanitizer to prove that no kernel reads or writes out of bounds, with
torch's caching allocator off (each tensor its own allocation, so that an access past
one is outside every allocation; tools/gpu/gpu_suite.sh stages cuseqlens and memcheck):

  CUDNN_CUTILE_SLICE_TMA=0 PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck \\
      --report-api-errors no --error-exitcode 1 \\
      python -m pytest -q -rs -p no:cacheprovider tests/numerics/test_cu_seqlens_safety.py

(--report-api-errors no: cuda-python's driver bindings probe for entry points this driver
lacks, which memcheck would count as errors; CUDNN_CUTILE_SLICE_TMA=0: docs/DEVELOPMENT.md.)
The default (TMA) cuTile build cannot run under memcheck; without a sanitizer,
test_kernels_read_no_row_outside_their_inputs puts NaN rows around every input instead.

Skips without a GPU, and per engine with the reason its runtime probe gives.
"""
from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

from cudnn.linear_attention import ops  # noqa: E402
from cudnn.linear_attention.common.cu_seqlens_check import STRICT_ENV  # noqa: E402

pytestmark = pytest.mark.gpu  # skipped without a GPU: tests/conftest.py

T, H, K, V = 200, 2, 64, 64
GOOD = [0, 50, 120, 200]
MALFORMED = {
    "last_past_T": [0, 50, 120, 300],
    "negative": [-40, 50, 120, 200],
    "non_monotone": [0, 150, 60, 200],
    "last_short_of_T": [0, 50, 120, 170],
    "first_past_zero": [30, 50, 120, 200],
    "descending": [200, 120, 50, 0],
    "far_outside": [-(2**31) + 1, 2**31 - 1, 5, 2**31 - 1],
}
# (plan name, op, per-channel gate)
ENGINES = [("gdn_frost", "gdn", False), ("kda_frost", "kda", True), ("gdn2_frost", "gdn2", True),
           ("gdn_cutile", "gdn", False), ("kda_cutile", "kda", True)]
FUNCTIONS = {"gdn": ops.gated_delta_net, "kda": ops.kimi_delta_attention,
             "gdn2": ops.gated_delta_net_v2}


def covered(engine: str, table: list[int]) -> torch.Tensor:
    rows = torch.zeros(T, dtype=torch.bool)
    clamp = [min(max(x, 0), T) for x in table]
    if engine.endswith("cutile"):
        safe, top = [], 0
        for i, x in enumerate(clamp):
            top = x if i == 0 else max(top, x)
            safe.append(top)
        rows[safe[0]:safe[-1]] = True
    else:
        for bos, eos in zip(clamp, clamp[1:]):
            rows[bos:max(bos, eos)] = True
    return rows


def inputs(op: str, per_channel: bool, seed: int = 0):
    """q, k, v, g, beta (and GDN-2's w): beta per channel [T, H, K] for GDN-2 only, where
    beta and w come in q's dtype as GDN-2's ops require."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    rnd = lambda *s: torch.randn(*s, device="cuda", generator=gen)  # noqa: E731
    q = torch.nn.functional.normalize(rnd(T, H, K), dim=-1).bfloat16()
    k = torch.nn.functional.normalize(rnd(T, H, K), dim=-1).bfloat16()
    v = rnd(T, H, V).bfloat16()
    g = torch.nn.functional.logsigmoid(rnd(*((T, H, K) if per_channel else (T, H))))
    if op == "gdn2":
        return (q, k, v, g, torch.sigmoid(rnd(T, H, K)).bfloat16(),
                torch.sigmoid(rnd(T, H, V)).bfloat16())
    return q, k, v, g, torch.sigmoid(rnd(T, H))


GUARD = 64


def guarded(t: torch.Tensor) -> torch.Tensor:
    """t's values as a view into a buffer holding GUARD rows of NaN before and after them
    (token dimension): a kernel that read a row before 0 or from T on would carry NaN into
    its results, which the tests find as non-finite values (the offset keeps t's alignment:
    GUARD rows of H x 64 elements are whole 16-byte multiples)."""
    big = torch.full((t.shape[0] + 2 * GUARD, *t.shape[1:]), float("nan"), dtype=t.dtype,
                     device=t.device)
    big[GUARD:GUARD + t.shape[0]] = t
    return big[GUARD:GUARD + t.shape[0]]


def run(engine, op, per_channel, table, backward, guard=False, **kw):
    wrap = guarded if guard else (lambda t: t)
    leaves = [wrap(t).requires_grad_(backward) for t in inputs(op, per_channel)]
    cu = torch.tensor(table, dtype=torch.int32, device="cuda")
    o, _ = FUNCTIONS[op](*leaves, cu, plan_name=engine, **kw)
    grads = []
    if backward:
        o.backward(wrap(torch.randn_like(o)))
        grads = [t.grad for t in leaves]
    torch.cuda.synchronize()
    return o, grads


def engine_available(engine, op, per_channel):
    try:
        run(engine, op, per_channel, GOOD, backward=False)
    except Exception as exc:  # noqa: BLE001 - the reason is the skip message
        pytest.skip(f"{engine} does not run here: {type(exc).__name__}: {str(exc)[:300]}")


@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "bwd"])
@pytest.mark.parametrize("name", sorted(MALFORMED))
@pytest.mark.parametrize("engine, op, per_channel", ENGINES, ids=[e[0] for e in ENGINES])
def test_malformed_tables_are_memory_safe(engine, op, per_channel, name, backward):
    engine_available(engine, op, per_channel)
    table = MALFORMED[name]
    o, grads = run(engine, op, per_channel, table, backward)
    rows = covered(engine, table).cuda()
    for label, t in [("o", o.detach())] + list(zip(("dq", "dk", "dv", "dg", "dbeta", "dw"),
                                                   grads)):
        assert torch.isfinite(t).all(), f"{label}: non-finite values"
        outside = t[~rows]
        assert (outside == 0).all(), f"{label}: rows no sequence covers are not zero"


@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "bwd"])
@pytest.mark.parametrize("name", sorted(MALFORMED) + ["well_formed"])
@pytest.mark.parametrize("engine, op, per_channel", ENGINES, ids=[e[0] for e in ENGINES])
def test_kernels_read_no_row_outside_their_inputs(engine, op, per_channel, name, backward):
    """Without a sanitizer: every input (and dO) lies between rows of NaN. This is the check
    that covers the cuTile engines' default build, whose sequence slices go through TMA:
    compute-sanitizer's memcheck stops those kernels at the tensor-map writes tileiras
    emits (the launch then fails and the memcheck cases skip), so only the
    CUDNN_CUTILE_SLICE_TMA=0 build runs under it. A TMA load is bounded by its tensor map;
    this test shows the maps end where the inputs end (a tile of the last chunk reaching
    past T reads zeros, not the NaN behind the buffer) on every table, malformed or not."""
    engine_available(engine, op, per_channel)
    table = MALFORMED.get(name, GOOD)
    o, grads = run(engine, op, per_channel, table, backward, guard=True)
    rows = covered(engine, table).cuda()
    for label, t in [("o", o.detach())] + list(zip(("dq", "dk", "dv", "dg", "dbeta", "dw"),
                                                   grads)):
        assert torch.isfinite(t).all(), f"{label}: non-finite values (a read outside the inputs)"
        assert (t[~rows] == 0).all(), f"{label}: rows no sequence covers are not zero"


@pytest.mark.parametrize("name", sorted(MALFORMED))
@pytest.mark.parametrize("engine, op, per_channel", ENGINES[:3], ids=[e[0] for e in ENGINES[:3]])
def test_training_path_on_malformed_tables(engine, op, per_channel, name):
    """The FROST training path (ops.set_training_checkpoints: the forward writes state
    checkpoints and values, the backward runs only its chain and grads kernels, and the
    chain kernel zeroes the rows no sequence covers in the states kernel's place): the same
    guarantees as the recompute path."""
    engine_available(engine, op, per_channel)
    table = MALFORMED[name]
    previous = ops.set_training_checkpoints(True)
    try:
        o, grads = run(engine, op, per_channel, table, backward=True)
    finally:
        ops.set_training_checkpoints(previous)
    rows = covered(engine, table).cuda()
    for label, t in [("o", o.detach())] + list(zip(("dq", "dk", "dv", "dg", "dbeta", "dw"), grads)):
        assert torch.isfinite(t).all(), f"{label}: non-finite values"
        assert (t[~rows] == 0).all(), f"{label}: rows no sequence covers are not zero"


# The recurrent (decode) engines serve any THD forward (no backward): pinned here on the
# same long-sequence table, so they walk the malformed bounds token by token.
DECODE_ENGINES = [("gdn_frost_decode", "gdn", False), ("kda_frost_decode", "kda", True),
                  ("gdn2_frost_decode", "gdn2", True)]


@pytest.mark.parametrize("name", sorted(MALFORMED))
@pytest.mark.parametrize("engine, op, per_channel", DECODE_ENGINES,
                         ids=[e[0] for e in DECODE_ENGINES])
def test_decode_engines_on_malformed_tables(engine, op, per_channel, name):
    engine_available(engine, op, per_channel)
    table = MALFORMED[name]
    o, _ = run(engine, op, per_channel, table, False)
    rows = covered(engine, table).cuda()
    assert torch.isfinite(o).all(), "o: non-finite values"
    assert (o.detach()[~rows] == 0).all(), "o: rows no sequence covers are not zero"


SUMMARIES = {"gdn": (ops.gated_delta_net_summary, ops.gated_delta_net_summary_bwd),
             "kda": (ops.kimi_delta_attention_summary, ops.kimi_delta_attention_summary_bwd),
             "gdn2": (ops.gated_delta_net_v2_summary, ops.gated_delta_net_v2_summary_bwd)}


def run_summary(op, table):
    """The FROST span summary, forward and backward, of every sequence of `table`."""
    q, k, v, g, beta, *w = inputs(op, op != "gdn")
    cu = torch.tensor(table, dtype=torch.int32, device="cuda")
    forward, backward = SUMMARIES[op]
    engine = f"{op}_summary_frost"
    final, transition = forward(k, v, g, beta, *w, cu, plan_name=engine)
    d_initial, transition_t = backward(q, k, g, beta, torch.randn_like(v), cu,
                                       d_final_state=torch.randn_like(final),
                                       output_transition=True, plan_name=engine)
    torch.cuda.synchronize()
    return final, transition, d_initial, transition_t


@pytest.mark.parametrize("name", sorted(MALFORMED))
@pytest.mark.parametrize("op", sorted(SUMMARIES))
def test_summaries_of_malformed_tables_are_memory_safe(op, name):
    """Summaries write per sequence, not per row: a malformed table must only run to the
    end, in bounds (compute-sanitizer), with finite results."""
    try:
        run_summary(op, GOOD)
    except Exception as exc:  # noqa: BLE001 - the reason is the skip message
        pytest.skip(f"{op}_summary_frost does not run here: {type(exc).__name__}: "
                    f"{str(exc)[:300]}")
    for label, t in zip(("final_state", "transition", "d_initial_state", "transition^T"),
                        run_summary(op, MALFORMED[name])):
        assert torch.isfinite(t).all(), f"{label}: non-finite values"


@pytest.mark.parametrize("engine, op, per_channel", ENGINES, ids=[e[0] for e in ENGINES])
def test_strict_mode_raises_naming_the_first_bad_entry(engine, op, per_channel, monkeypatch):
    engine_available(engine, op, per_channel)
    with pytest.raises(ValueError, match=r"cu_seqlens\[3\] = 300: past the token count"):
        run(engine, op, per_channel, MALFORMED["last_past_T"], False, strict_cu_seqlens=True)
    monkeypatch.setenv(STRICT_ENV, "1")
    ops.clear_graph_caches()  # a cached direct launch would not ask the engine again
    with pytest.raises(ValueError, match=r"cu_seqlens\[0\] = -40: a negative boundary"):
        run(engine, op, per_channel, MALFORMED["negative"], False)
    with pytest.raises(ValueError, match=r"cu_seqlens\[0\] = -40: a negative boundary"):
        run(engine, op, per_channel, MALFORMED["negative"], True)
    run(engine, op, per_channel, GOOD, True)  # a good table runs in strict mode
    monkeypatch.delenv(STRICT_ENV)
    ops.clear_graph_caches()
    assert os.environ.get(STRICT_ENV) is None


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
