"""Host-side overhead of a cached linear-attention op call (a benchmark script, not a test).

For every timed call it measures the call's host time and the time spent inside the
engine's `CompiledPlan.execute` (a timing wrapper around the cached graphs' compiled
plans), and reports medians of the call, of the engine and of their difference: the
overhead of the op layer (public function, dispatcher, cache lookup, allocation, graph
API). On CUDA nothing waits for the GPU inside a timed call; the queue is drained
between batches, outside the timings.

Run from the repository root, with the checkout's source roots on the path
(PYTHONPATH=$(python3 tools/pythonpath.py)):
  CPU, with the test-only reference engines (measures the Python overhead here):
    python tests/torch_ops/op_overhead.py --device cpu
  GPU, with the installed engines (the H200 host):
    python tests/torch_ops/op_overhead.py --device cuda --family gdn --family kda
Target: op overhead <= 20 us median for a cached call on the H200 host.

With --serve it times the serving call instead (`cudnn::<family>_serve` through the
public function, as a server's decode loop makes it): one token for each of --batch
sequences (16 heads, K = V = 128 on the GPU; 2 heads, 64 on the CPU), a float32 state pool
read through state_indices and written in place, new q/k/v/gate tensors on every call
(eight sets in turn, so the addresses change). On the CPU the real FROST decode engine
plans and launches with a recording kernel (decode_on_cpu.py). Besides the medians it
prints how many timed calls took the checked path instead of the launch lane (0 when the
cached path holds) and, on the GPU, the compiled kernel's calling convention and type.
Target: <= 25 us per serving call on the H200 host.
    python tests/torch_ops/op_overhead.py --serve --device cpu --family gdn --family kda
    python tests/torch_ops/op_overhead.py --serve --device cuda --family gdn --family kda

With --backward it times a cached backward op call (`cudnn::<family>_bwd` as the op's
eager autograd calls it: no dispatcher) on the FROST backward plan, with its launch lane
off and on (CUDNN_FROST_BWD_LANE=0 / 1, read when a configuration's first call binds its
cached graph), on the recompute path (states, chain, grads) and on the training path
(the forward's state checkpoints and values as inputs: chain, grads). On the CPU the real
FROST backward engine plans, checks and carves with recording stage kernels that only
count (frost_bwd_on_cpu.py; 3 sequences of 40, 0 and 88 tokens, 2 heads, K = V = 64); on
the GPU it launches the real kernels (2 x 256 tokens, 8 heads, K = V = 128; the host time
of a call includes its three or two kernel launches, not their GPU time). Besides the
medians it prints how many timed calls took the checked path (the whole count with the
lane off, 0 with it on when the lane holds).
    python tests/torch_ops/op_overhead.py --backward --device cpu --family gdn --family kda
    python tests/torch_ops/op_overhead.py --backward --device cuda --family gdn --family kda
"""
from __future__ import annotations

import argparse
import dataclasses
import contextlib
import statistics
import time
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from cudnn.engines.base import CompiledPlan, DirectLaunch, ExecutionContext
from cudnn.linear_attention import ops
from tests.reference.inputs import InputConfig, make_inputs
from tests.reference.preprocess import Family
from tests.torch_ops.op_calls import call_op, leaves

BATCH = 50  # calls between two drains of the CUDA queue


class _TimedPlan(CompiledPlan):
    """Wraps a compiled plan; records how long each execute takes on the host. With
    `skip`, execute runs nothing (results stay unwritten): the op layer alone, its
    caches warm instead of flushed by the engine's work."""

    def __init__(self, inner: CompiledPlan, record: list[int], skip: bool) -> None:
        self.inner = inner
        self.record = record
        self.skip = skip

    def get_workspace_size(self) -> int:
        return self.inner.get_workspace_size()

    def execute(self, graph: Any, data: Mapping[int, Any], ctx: ExecutionContext) -> None:
        start = time.perf_counter_ns()
        if not self.skip:
            self.inner.execute(graph, data, ctx)
        self.record.append(time.perf_counter_ns() - start)

    def direct_launch(self, graph: Any, data: Mapping[int, Any]) -> DirectLaunch | None:
        """The inner plan's DirectLaunch (the op's launch lane), its launch timed too."""
        direct = self.inner.direct_launch(graph, data)
        if direct is None:
            return None
        return dataclasses.replace(direct, launch=_timed_launch(direct.launch, self.record,
                                                                 self.skip))


def _timed_launch(inner: Any, record: list[int], skip: bool) -> Any:
    def launch(buffers: Any, workspace: Any, stream: int) -> None:
        start = time.perf_counter_ns()
        if not skip:
            inner(buffers, workspace, stream)
        record.append(time.perf_counter_ns() - start)
    launch.timed = True
    return launch


def _time_engines(record: list[int], skip: bool) -> None:
    for cache in ops.graph_caches():
        for entry in cache.values():
            plans = entry.graph.lifecycle.planning.compiled_plans
            for index, plan in list(plans.items()):
                if not isinstance(plan, _TimedPlan):
                    plans[index] = _TimedPlan(plan, record, skip)
            executor = entry.executor  # the plan the cached call path runs
            if executor is not None and not isinstance(executor.plan, _TimedPlan):
                executor.plan = _TimedPlan(executor.plan, record, skip)
            lane = entry.lane  # made at the entry's first call, from the plan then
            if lane is not None and not getattr(lane.launch, "timed", False):
                lane.launch = _timed_launch(lane.launch, record, skip)


@contextlib.contextmanager
def _engines(device: str) -> Iterator[None]:
    if device != "cpu":
        yield
        return
    from tests.torch_ops.reference_engine import reference_engine, reference_engines_installed
    with reference_engines_installed():
        for family in ("gdn", "kda"):  # as FROST's plans do: cached calls take the lane
            reference_engine(family).offers_direct_launch = True
        yield


@contextlib.contextmanager
def _routing(dispatcher: bool) -> Iterator[None]:
    """With `dispatcher`, every call takes torch's dispatcher, as under torch.compile."""
    if not dispatcher:
        yield
        return
    from cudnn.linear_attention.ops import _direct_call, _op_factory
    saved = _op_factory.route
    _op_factory.route = lambda values, positions: _direct_call.DISPATCHER
    try:
        yield
    finally:
        _op_factory.route = saved


def _config(family: Family, device: str) -> InputConfig:
    if device == "cpu":  # the reference engines are float64 python loops: keep them short
        return InputConfig(family=family, seq_lens=(4, 4), H=2, K=16, V=16, device="cpu")
    return InputConfig(family=family, seq_lens=(256, 256), H=8, K=128, V=128,
                       dtype=torch.bfloat16, device=device)


def measure(family: Family, device: str, iters: int, grad: bool,
            skip_engine: bool) -> dict[str, float]:
    inputs = make_inputs(_config(family, device), seed=0)
    if grad:
        inputs = leaves(inputs)
    record: list[int] = []
    call_op(inputs)  # build the graph
    _time_engines(record, skip_engine)
    totals = _timed_calls(lambda _: call_op(inputs), iters, device)
    if len(record) != len(totals):
        raise RuntimeError(f"{len(record)} engine executes for {len(totals)} calls: a call "
                           "missed the cache")
    overheads = [t - e for t, e in zip(totals, record)]
    return {name: statistics.median(values) / 1e3 for name, values in
            (("call", totals), ("engine", record), ("overhead", overheads))}


def _timed_calls(call, iters: int, device: str) -> list[int]:
    """Host ns of `iters` calls call(i), synchronising every BATCH calls so the GPU queue
    never fills (a full queue would make the host wait inside a launch)."""
    totals: list[int] = []
    while len(totals) < iters:
        for _ in range(min(BATCH, iters - len(totals))):
            start = time.perf_counter_ns()
            call(len(totals))
            totals.append(time.perf_counter_ns() - start)
        if device != "cpu":
            torch.cuda.synchronize()
    return totals


#: --backward's paths: backward_call's keywords
BACKWARD_PATHS = {"recompute": {}, "checkpoints+values": dict(checkpoints=True, values=True)}


def measure_backward(family: str, device: str, iters: int, lane: bool, path: str
                     ) -> dict[str, float]:
    """Median host us of a cached backward op call on the FROST plan (--backward)."""
    import os

    from cudnn.linear_attention.frost import bwd_plan
    from tests.torch_ops.frost_bwd_on_cpu import backward_args, backward_call, backward_entry

    shape = dict(seqs=(256, 256), heads=8, dim=128) if device != "cpu" else {}
    named = backward_call(family, device=device, **shape, **BACKWARD_PATHS[path])
    kernel, args = backward_args(family, named)
    previous = os.environ.get(bwd_plan.LANE_ENV)
    os.environ[bwd_plan.LANE_ENV] = "1" if lane else "0"
    try:
        ops.clear_graph_caches()
        kernel(*args)  # builds the graph, binds the lane (or not)
    finally:
        if previous is None:
            del os.environ[bwd_plan.LANE_ENV]
        else:
            os.environ[bwd_plan.LANE_ENV] = previous
    entry = backward_entry(family)
    checked = entry.checked_calls
    totals = _timed_calls(lambda _: kernel(*args), iters, device)
    return {"call": statistics.median(totals) / 1e3, "checked": entry.checked_calls - checked,
            "lane": entry.lane is not None}


def backward_main(args: argparse.Namespace, families: list[Family]) -> None:
    from tests.torch_ops.frost_bwd_on_cpu import BwdRecorder, frost_bwd_on_cpu

    rec = BwdRecorder(detailed=False)
    on_cpu = frost_bwd_on_cpu(rec) if args.device == "cpu" else contextlib.nullcontext()
    with on_cpu:
        for family in families:
            for path in BACKWARD_PATHS:
                for lane in (False, True):
                    m = measure_backward(family.value, args.device, args.iters, lane, path)
                    mode = f"backward {path}, lane {'on' if lane else 'off'}"
                    print(f"{family.value:4s} {args.device:4s} {mode:38s} median over "
                          f"{args.iters}: call {m['call']:8.1f} us; lane bound {m['lane']}, "
                          f"checked calls {m['checked']} of {args.iters}", flush=True)


def _serve_setup(family: str, device: str, batch: int):
    """(call(i), the pool): the i-th serving step of eight prepared input sets."""
    from tests.torch_ops.decode_on_cpu import serve, serving_step

    heads, dim = (2, 64) if device == "cpu" else (16, 128)
    steps = [serving_step(family, seed, n=batch, heads=heads, dim=dim, device=device)
             for seed in range(8)]
    pool = torch.zeros(batch + 8, heads, dim, dim, device=device)
    slots = torch.randperm(batch + 8)[:batch].to(device=device, dtype=torch.int32)
    return (lambda i: serve(family, steps[i % 8], pool, slots)), pool


def measure_serve(family: str, device: str, iters: int, skip_engine: bool,
                  batch: int) -> dict[str, Any]:
    call, _ = _serve_setup(family, device, batch)
    record: list[int] = []
    with torch.no_grad():
        call(0)  # builds the graph, compiles or loads the kernel, binds the lane
        call(1)
        _time_engines(record, skip_engine)
        caches = [c for c in ops.graph_caches() if c.name.endswith("_serve")]
        before = sum(entry.checked_calls for cache in caches for entry in cache.values())
        totals = _timed_calls(call, iters, device)
    after = sum(entry.checked_calls for cache in caches for entry in cache.values())
    lanes = sum(entry.lane is not None for cache in caches for entry in cache.values())
    overheads = [t - e for t, e in zip(totals, record)]
    out: dict[str, Any] = {name: statistics.median(values) / 1e3 for name, values in
                           (("call", totals), ("engine", record), ("overhead", overheads))}
    out.update(checked=after - before, lanes=lanes)
    if device != "cpu":
        from cudnn.linear_attention.frost.kernels import decode as kernels_decode
        out["kernels"] = sorted({f"{key[2]}:{type(k.fn).__name__}"
                                 for key, k in kernels_decode._cache.items()})
    return out


def profile(family: Family, device: str, grad: bool, top: int, calls: int = 500) -> None:
    """cProfile over `calls` cached calls (graph already built), sorted by own time."""
    import cProfile
    import io
    import pstats

    inputs = make_inputs(_config(family, device), seed=0)
    if grad:
        inputs = leaves(inputs)
    call_op(inputs)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        call_op(inputs)
    profiler.disable()
    if device != "cpu":
        torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
    print(f"--- profile, {calls} calls ({'grad' if grad else 'no grad'}); per-call us = "
          f"tottime / {calls} * 1e6\n" + text.getvalue().split("\n\n", 1)[-1])


def host_speed() -> str:
    """A yardstick for comparing hosts: medians of a pure-Python loop and of torch.empty
    (CPU), so an overhead measured on one machine can be read against another's."""
    def median_us(fn, n: int = 2000) -> float:
        times = []
        for _ in range(n):
            start = time.perf_counter_ns()
            fn()
            times.append(time.perf_counter_ns() - start)
        return statistics.median(times) / 1e3

    table = {i: i for i in range(64)}
    loop = median_us(lambda: sum(table[i] for i in range(64)))
    empty = median_us(lambda: torch.empty(64))
    return f"host yardstick: 64 dict reads + sum {loop:.2f} us, torch.empty(64) {empty:.2f} us"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--family", action="append", choices=["gdn", "kda", "gdn2"])
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--skip-engine", action="store_true",
                        help="time the op layer with the engine's execute skipped")
    parser.add_argument("--dispatcher", action="store_true",
                        help="send every call through torch's dispatcher (the path of "
                             "torch.compile and modes) instead of the eager direct call")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="after timing, profile the cached calls (cProfile) and print the "
                             "N entries with the most own time: where a host's time goes")
    parser.add_argument("--serve", action="store_true",
                        help="time the serving call (state pool, decode step) instead")
    parser.add_argument("--batch", type=int, default=1, help="--serve: sequences per step")
    parser.add_argument("--backward", action="store_true",
                        help="time the FROST backward call, its launch lane off and on")
    args = parser.parse_args()
    families = [Family(f) for f in (args.family or ["gdn"])]
    if Family.GDN2 in families and not args.backward:
        parser.error("--family gdn2 is timed with --backward only")
    print(host_speed())
    if args.serve:
        serve_main(args, families)
        return
    if args.backward:
        backward_main(args, families)
        return
    with _engines(args.device), _routing(args.dispatcher):
        for family in families:
            for grad in (False, True):
                ops.clear_graph_caches()
                m = measure(family, args.device, args.iters, grad, args.skip_engine)
                mode = "requires_grad (autograd)" if grad else "no grad"
                if args.skip_engine:
                    mode += ", engine skipped"
                if args.dispatcher:
                    mode += ", dispatcher"
                print(f"{family.value:4s} {args.device:4s} {mode:53s} median over "
                      f"{args.iters}: call {m['call']:8.1f} us, engine {m['engine']:8.1f} us, "
                      f"op overhead {m['overhead']:6.1f} us")
                if args.profile:
                    profile(family, args.device, grad, args.profile)


def serve_main(args: argparse.Namespace, families: list[Family]) -> None:
    from tests.torch_ops.decode_on_cpu import decode_engine_on_cpu

    on_cpu = decode_engine_on_cpu() if args.device == "cpu" else contextlib.nullcontext()
    with on_cpu:
        for family in families:
            ops.clear_graph_caches()
            m = measure_serve(family.value, args.device, args.iters, args.skip_engine, args.batch)
            mode = "serve, engine skipped" if args.skip_engine else "serve"
            print(f"{family.value:4s} {args.device:4s} {mode:22s} batch {args.batch:<5d} median over "
                  f"{args.iters}: call {m['call']:8.1f} us, launch {m['engine']:8.1f} us, "
                  f"op overhead {m['overhead']:6.1f} us; lanes {m['lanes']}, checked calls "
                  f"{m['checked']} of {args.iters}"
                  + (f"; kernels {m['kernels']}" if "kernels" in m else ""), flush=True)
            if args.profile:
                import cProfile
                import io
                import pstats

                call, _ = _serve_setup(family.value, args.device, args.batch)
                with torch.no_grad():
                    call(0)
                    profiler = cProfile.Profile()
                    profiler.enable()
                    for i in range(500):
                        call(i)
                    profiler.disable()
                text = io.StringIO()
                pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(args.profile)
                print("--- profile, 500 serving calls\n" + text.getvalue().split("\n\n", 1)[-1])


if __name__ == "__main__":
    main()
