"""GPU: autotuning over the FROST and cuTile plans of gdn / kda picks the faster one, and
a fresh process reuses the recorded choice without timing.

Per case (the bench shape: 8 x 4096 tokens, 16 heads, K = V = 128, bf16; forward and
backward graphs):
1. every plan of the list is timed as bench/bench_linear_attention.py times a call:
   `execute_plan_at_index`, CUDA events, warm-up, median of REPS;
2. `graph.autotune(data, workspace)` on a fresh graph of the same call (own cache folder)
   must select the plan step 1 measured faster (when the two differ by more than TIE, a
   closer race is reported, not asserted);
3. a new Python process builds the same graph, plans it, and must find the recorded
   winner at rank 0 ("autotune cache") without executing anything.
Both engines must be installed (the `frost` and `cutile` extras); a case whose list lacks
one of them skips. Run (prints the timings for the notes):

    python3 -m pytest -s -m gpu tests/numerics/test_la_autotune_gpu.py
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import cudnn  # noqa: E402

pytestmark = pytest.mark.gpu  # skipped without a GPU: tests/conftest.py
DT = cudnn.data_type
SEQS, SEQ_LEN, HEADS, K, V = 8, 4096, 16, 128, 128
REPS, WARMUP = 20, 3
TIE = 0.05   # a relative difference below this is a tie: reported, not asserted

CASES = [("gdn", False), ("kda", False), ("gdn", True), ("kda", True)]


def make_inputs(fam: str, backward: bool, seed: int = 0) -> dict:
    gen = torch.Generator(device="cuda").manual_seed(seed)
    T = SEQS * SEQ_LEN
    rnd = lambda *s: torch.randn(*s, device="cuda", generator=gen)  # noqa: E731
    x = dict(q=rnd(T, HEADS, K).bfloat16(), k=F.normalize(rnd(T, HEADS, K), dim=-1).bfloat16(),
             v=rnd(T, HEADS, V).bfloat16(),
             g=F.logsigmoid(rnd(*((T, HEADS, K) if fam == "kda" else (T, HEADS)))) * 0.5,
             beta=torch.sigmoid(rnd(T, HEADS)),
             cu_seqlens=torch.arange(0, T + 1, SEQ_LEN, dtype=torch.int32, device="cuda"))
    if backward:
        x["dO"] = rnd(T, HEADS, V).bfloat16()
    return x


def build_graph(fam: str, backward: bool, inputs: dict) -> tuple[cudnn.pygraph, dict]:
    """The graph of one call and its variant pack (outputs allocated)."""
    graph = cudnn.pygraph(io_data_type=DT.BFLOAT16, intermediate_data_type=DT.FLOAT,
                          compute_data_type=DT.FLOAT)
    ir = {n: graph.tensor_like(t, name=n) for n, t in inputs.items()}
    op = f"{fam}_bwd" if backward else fam
    outs = getattr(graph, op)(**ir)
    pack = {t: inputs[n] for n, t in ir.items()}
    for o in outs:
        if o is None:
            continue
        port = o.name.split("::")[-1]
        like = {"O": "v", "dQ": "q", "dK": "k", "dV": "v", "dG": "g", "dBeta": "beta"}.get(port)
        if like is None:
            continue
        buf = torch.empty_like(inputs[like])
        o.set_output(True).set_data_type(DT.BFLOAT16 if buf.dtype == torch.bfloat16
                                         else DT.FLOAT)
        pack[o] = buf
    return graph, pack


def bench_times(graph: cudnn.pygraph, pack: dict) -> dict[str, float]:
    """{plan name: median seconds} of every plan that builds, the bench's way."""
    graph.create_execution_plans()
    out = {}
    for i in range(graph.get_execution_plan_count()):
        name = graph.get_plan_name_at_index(i)
        try:
            size = graph.get_workspace_size_plan_at_index(i)
        except (NotImplementedError, cudnn.cudnnGraphNotSupportedError):
            continue
        ws = torch.empty(max(size, 1), dtype=torch.uint8, device="cuda")
        for _ in range(WARMUP):
            graph.execute_plan_at_index(pack, ws, index=i)
        samples = []
        for _ in range(REPS):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.execute_plan_at_index(pack, ws, index=i)
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e-3)
        out[name] = statistics.median(samples)
    return out


FRESH = textwrap.dedent("""
    import json, sys, warnings
    sys.path[:0] = {paths!r}
    from cudnn.engines.autotune import AutotuneCacheWarning
    warnings.simplefilter("error", AutotuneCacheWarning)
    from tests.numerics.test_la_autotune_gpu import build_graph, make_inputs
    fam, backward = {fam!r}, {backward!r}
    graph, _ = build_graph(fam, backward, make_inputs(fam, backward))
    graph.create_execution_plans()
    ex = graph.explain_plans()
    print(json.dumps(dict(first=graph.get_plan_name_at_index(0),
                          kind=None if ex.autotune is None else ex.autotune.kind,
                          source=ex.plans[0].estimate.source, text=ex.render())))
""")


@pytest.mark.parametrize("fam,backward", CASES,
                         ids=[f"{f}_{'bwd' if b else 'fwd'}" for f, b in CASES])
def test_autotune_picks_the_faster_engine_and_a_fresh_process_reuses_it(
        fam, backward, tmp_path, monkeypatch):
    folder = tmp_path / "autotune"
    monkeypatch.setenv("CUDNN_AUTOTUNE_CACHE", str(folder))
    inputs = make_inputs(fam, backward)
    graph, pack = build_graph(fam, backward, inputs)
    measured = bench_times(graph, pack)
    engines = {name.split("[")[0] for name in measured}
    if not {f"{fam}_frost", f"{fam}_cutile"} <= engines:
        pytest.skip(f"needs both {fam}_frost and {fam}_cutile plans; built: {sorted(measured)}")
    # the bench run above planned this graph: no record existed, the cost model ranked it
    tuned, tuned_pack = build_graph(fam, backward, inputs)
    report = tuned.autotune(tuned_pack, warmup=WARMUP, reps=REPS)
    winner = tuned.get_plan_name_at_index(report.winner)
    fastest = min(measured, key=measured.get)
    times = sorted(measured.values())
    close = len(times) > 1 and (times[1] - times[0]) / times[0] < TIE
    print(f"\n{fam} {'bwd' if backward else 'fwd'}: bench " +
          ", ".join(f"{n} {s * 1e3:.3f} ms" for n, s in measured.items()) +
          f"; autotune " + ", ".join(f"[{t.index}] {t.name} {t.status} "
                                     f"{'' if t.seconds is None else f'{t.seconds * 1e3:.3f} ms'}"
                                     for t in report.trials) + f" -> {winner}")
    if not close:
        assert winner == fastest, (winner, measured)
    assert report.cache_path and os.path.exists(report.cache_path)

    script = FRESH.format(paths=list(sys.path), fam=fam, backward=backward)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env={**os.environ, "CUDNN_AUTOTUNE_CACHE": str(folder)}, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    fresh = json.loads(out.stdout.strip().splitlines()[-1])
    print(fresh["text"])
    assert fresh["first"] == winner and fresh["kind"] == "recorded"
    assert fresh["source"] == "autotune cache"


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-s", "-q"]))
