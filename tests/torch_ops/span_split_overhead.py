"""Host work of the span-split op path on a CPU (a benchmark script, not a test).

The span split (torch_ops/.../ops/_span_split.py) is host-bound on the H200 at 1 x 32768
tokens (bench/span_split_profile.py): its summaries, compositions and span-table glue cost
more host time than the GPU spends. This script times that host path here, with the
test-only float64 reference engines at a tiny shape whose engine work is then skipped
(the cached plans and launch lanes replaced by no-ops after one real warm-up call, as
op_overhead.py --skip-engine does), so what is timed is the op layer and the split's own
torch glue:

- `unsplit forward`: the public function, no autograd, not split (the op layer alone);
- `split forward`: the public function, no autograd, forced into spans;
- `split fwd+bwd`: the public function on leaves, then torch.autograd.grad (the backward
  splits too);
- `summary`, `summary_bwd`: one summary op call as the split makes it;
- `entering`, `leaving`: one composition (_span_maps.walk) as the split makes it.

Per row: the median host us per call over --iters calls, and the aten ops one call runs
(torch.profiler, top-level ops only: what a GPU would see as launches, give or take the
ops that launch nothing; the profiler would send the public call through torch's
dispatcher, so it is counted with the eager routing kept).

    PYTHONPATH=$(python3 tools/pythonpath.py) python3 tests/torch_ops/span_split_overhead.py
        [--family gdn] [--len 256] [--heads 2] [--dim 16] [--span 64] [--iters 300]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from cudnn.engines import manifest
from cudnn.linear_attention.ops import _direct_call
from cudnn.linear_attention.ops import _span_split as ss
from tests.reference.inputs import InputConfig, make_grad_outputs, make_inputs
from tests.reference.preprocess import Family
from tests.torch_ops.op_calls import call_op, leaves
from tests.torch_ops.op_overhead import _time_engines
from tests.torch_ops.reference_engine import _ReferenceEngine
from tests.torch_ops.reference_summary_engine import cp_reference_engines_installed


def _forward_engines_offer_lanes() -> None:
    """The reference forward engines offer a DirectLaunch, as FROST's forward plans do."""
    for family in manifest.MANIFEST:
        for slot in family.engine_slots:
            engine = manifest.load_engine(family, slot)
            if isinstance(engine, _ReferenceEngine):
                engine.offers_direct_launch = True


def median_us(fn: Callable[[], Any], iters: int) -> float:
    times = []
    for _ in range(iters):
        start = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - start)
    return statistics.median(times) / 1e3


@contextlib.contextmanager
def _eager_routing_under_profiler() -> Iterator[None]:
    """route() sends calls to the dispatcher while the autograd profiler runs (so the op
    shows in traces); counting the eager path's ops needs it to stay eager."""
    saved = _direct_call._profiling
    _direct_call._profiling = lambda: False
    try:
        yield
    finally:
        _direct_call._profiling = saved


#: aten ops that launch no device work: views, metadata, allocation without a fill
_NO_LAUNCH = frozenset(f"aten::{name}" for name in (
    "view", "reshape", "_reshape_alias", "select", "slice", "expand", "transpose", "t",
    "as_strided", "alias", "unsqueeze", "squeeze", "flatten", "permute", "detach",
    "empty", "empty_strided", "new_empty", "new_empty_strided", "to", "lift_fresh",
    "_unsafe_view", "view_as", "diagonal", "numel", "size", "stride", "is_nonzero",
    "result_type", "empty_like", "resize_", "set_", "unflatten", "split", "unbind"))


def aten_ops(fn: Callable[[], Any], listing: bool = False) -> tuple[int, int]:
    """(top-level aten ops, those of them that launch device work) of one call of fn."""
    from torch.profiler import ProfilerActivity, profile

    with _eager_routing_under_profiler(), profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    names = [e.name for e in prof.events() if e.name.startswith("aten::") and
             (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::"))]
    launching = [n for n in names if n not in _NO_LAUNCH]
    if listing:
        print("   ", " ".join(n.removeprefix("aten::") for n in names))
    return len(names), len(launching)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", choices=[f.value for f in Family], default="gdn")
    p.add_argument("--len", type=int, default=256)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--span", type=int, default=64)
    p.add_argument("--iters", type=int, default=300)
    p.add_argument("--list-ops", action="store_true", help="print each row's aten ops")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="cProfile the split fwd+bwd and print the N entries with most own time")
    a = p.parse_args()
    torch.set_num_threads(1)
    os.environ[ss.ENV] = str(a.span)
    os.environ[ss.BACKWARD_ENV] = "1"
    config = InputConfig(family=Family(a.family), seq_lens=(a.len,), H=a.heads, K=a.dim,
                         V=a.dim, dtype=torch.float64, gate_dtype=torch.float64,
                         state_dtype=torch.float64, param_dtype=torch.float64,
                         with_initial_state=True)
    with cp_reference_engines_installed():
        _forward_engines_offer_lanes()
        x = make_inputs(config, seed=1)
        dO, _ = make_grad_outputs(config, seed=2)
        xl = leaves(make_inputs(config, seed=1))
        primals = [t for t in (xl.q, xl.k, xl.v, xl.g, xl.beta, xl.w, xl.initial_state)
                   if t is not None]
        from cudnn.linear_attention.ops import _span_maps as sm

        captured: dict[str, Any] = {}
        real_run, real_bwd = ss.SpanSplit.run, ss.SpanSplit.backward

        def spy_run(self, args, span, keep=False):
            captured["split"], captured["args"] = self, args
            return real_run(self, args, span, keep)

        def spy_bwd(self, call, named, run_backward):
            captured["call"], captured["named"] = call, named
            return real_bwd(self, call, named, run_backward)

        def forward() -> Any:
            with torch.no_grad():
                return call_op(x)

        def fwd_bwd() -> Any:
            o, _ = call_op(xl, output_final_state=False)
            return torch.autograd.grad(o, primals, dO)

        ss.SpanSplit.run, ss.SpanSplit.backward = spy_run, spy_bwd
        try:
            for _ in range(2):  # real engines: build, bind the lanes
                forward()
                fwd_bwd()
        finally:
            ss.SpanSplit.run, ss.SpanSplit.backward = real_run, real_bwd
        record: list[int] = []
        _time_engines(record, skip=True)

        split, call, named = captured["split"], captured["call"], captured["named"]
        args = captured["args"]
        at = {n: i for i, n in enumerate(ops_names(split))}
        summary_args = {n: args[at[n]] for n in split._summary_args}
        table = call.table

        spanned_args = list(args)
        spanned_args[at["cu_seqlens"]] = table.span_cu
        spanned = {**named, "cu_seqlens": table.span_cu}

        def summary() -> Any:  # as the split calls it (positional values where it has them)
            if hasattr(split, "_summary_values"):
                return split._summary.run(split._summary_values(split._summary_take(spanned_args)))
            return split._summary._kernel(cu_seqlens=table.span_cu, initial_state=None,
                                          output_transition=True, **summary_args)

        def summary_bwd() -> Any:
            if hasattr(split, "_summary_bwd_values"):
                return split._summary_bwd.run(split._summary_bwd_values(
                    split._summary_bwd_take(spanned)))
            return split._summary_bwd._kernel(cu_seqlens=table.span_cu, d_final_state=None,
                                              output_transition=False,
                                              **{n: named[n] for n in split._summary_bwd_args})
        final0, transition = summary()
        d_entering, _ = summary_bwd()
        initial = args[at["initial_state"]].detach()
        def unsplit() -> Any:
            os.environ[ss.ENV] = "0"
            try:
                return forward()
            finally:
                os.environ[ss.ENV] = str(a.span)
        unsplit()  # builds the unsplit forward's graph (its engine then skipped too)
        _time_engines(record, skip=True)
        rows = [
            ("unsplit forward", unsplit),
            ("split forward", forward),
            ("split fwd+bwd", fwd_bwd),
            ("summary", summary),
            ("summary_bwd", summary_bwd),
            ("entering", lambda: sm.entering_states(initial, final0, transition, table,
                                                    initial.dtype)),
            ("leaving", lambda: sm.leaving_gradients(None, d_entering, transition, table,
                                                     initial.dtype)),
        ]
        print(f"{a.family}, 1 x {a.len} tokens, {a.heads} heads, K = V = {a.dim}, float64, "
              f"span {a.span} ({table.steps} steps); engines skipped; median of {a.iters}")
        for name, fn in rows:
            fn()
            us = median_us(fn, a.iters)
            total, launching = aten_ops(fn)
            print(f"{name:<16} host {us:8.1f} us   aten ops {total:4d}, launching {launching:4d}",
                  flush=True)
            if a.list_ops:
                aten_ops(fn, listing=True)
        if a.profile:
            import cProfile
            import io
            import pstats

            prof = cProfile.Profile()
            prof.enable()
            for _ in range(200):
                fwd_bwd()
            prof.disable()
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(a.profile)
            print("--- cProfile of 200 split fwd+bwd (tottime, s)\n" + text.getvalue())


def ops_names(split: ss.SpanSplit) -> list[str]:
    return sorted(split._at, key=split._at.get)


if __name__ == "__main__":
    main()
