"""Context parallelism over NCCL against one GPU: one long sequence split over the GPUs.

    python3 bench/context_parallel_bench.py [--world 2] [--tokens-per-rank 32768]
                                            [--family gdn] [--heads 16] [--reps 10]

(repository root, one process per GPU spawned here; needs `world` GPUs.) Shape: ONE
sequence of world x tokens-per-rank tokens (default 2 x 32768), `heads` heads, K = V =
128, bf16 q/k/v, float32 gates, q/k l2-normalised in the kernel; rank r holds the r-th
equal slice. Every time is the median over --reps of wall-clock steps that start after
a barrier with the GPUs idle and end when the GPUs are done (CP: the slowest rank):

  one GPU    ops.<family> on the whole sequence on GPU 0 (forward; forward + backward)
  CP         context_parallel.<family> on every rank's shard (same two steps)
  compute    each rank's own ops call on its shard alone, from a given initial state:
             the work a rank does in a CP step, without the exchange
  message    one state message ([heads, V, K] float32) between two ranks, timed alone
             (ping-pong / 2); a CP step has (world - 1) per direction on its critical path

Printed: tokens/s of the one-GPU and CP steps, the speedup, and the CP step split into
compute (the slowest rank's), communication (messages on the critical path x one
message; the "communication share" of the step) and waiting (the rest: the recurrence is
a chain, so a rank right of a cut runs its part only once the state has arrived, and in
the backward the other way round).

Kernels: tests/numerics/frost_summary_prebuild.py precompiles this script's FROST
kernels (BENCH_SHAPE, families in PREBUILT_FAMILIES); others compile on first use.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _source_roots() -> list[str]:
    """This checkout's source roots (tools/pythonpath.py, loaded by path; none where it is
    absent, as under Bazel, whose test puts them on sys.path). The ranks are spawned with
    this process's sys.path."""
    path = REPO / "tools" / "pythonpath.py"
    if not path.is_file():
        return []
    spec = importlib.util.spec_from_file_location("cudnn_pythonpath", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.paths(REPO)


for _root in reversed(_source_roots()):
    if _root not in sys.path:
        sys.path.insert(0, _root)

#: (heads, K, V, use_qk_l2norm) of the default run; the prebuild reads it
BENCH_SHAPE = (16, 128, 128, True)
PREBUILT_FAMILIES = ("gdn",)
FUNCTIONS = {"gdn": "gated_delta_net", "kda": "kimi_delta_attention",
             "gdn2": "gated_delta_net_v2"}


def _inputs(family: str, T: int, H: int, K: int, V: int, device, io_dtype, gate_dtype):
    """The whole sequence's inputs, the same on every rank (seeded generator per device)."""
    import torch
    import torch.nn.functional as F

    gen = torch.Generator(device=device).manual_seed(0)

    def randn(*shape, dtype=gate_dtype):
        return torch.randn(*shape, generator=gen, device=device, dtype=gate_dtype).to(dtype)

    bf = io_dtype
    vector = family != "gdn"
    x = dict(q=randn(T, H, K, dtype=bf), k=randn(T, H, K, dtype=bf), v=randn(T, H, V, dtype=bf),
             g=F.logsigmoid(randn(*((T, H, K) if vector else (T, H)))) * 0.5)
    if family == "gdn2":
        x["beta"] = torch.sigmoid(randn(T, H, K)).to(bf)
        x["w"] = torch.sigmoid(randn(T, H, V)).to(bf)
    else:
        x["beta"] = torch.sigmoid(randn(T, H))
    x["dO"] = randn(T, H, V, dtype=bf)
    x["d_final"] = randn(1, H, V, K) * 0.1
    return x


def _step(fn, x: dict, lo: int, hi: int, cu, backward: bool, **kw):
    """A closure running fn on tokens [lo, hi) (forward, or forward + backward)."""
    import torch

    names = ("q", "k", "v", "g", "beta", *(("w",) if "w" in x else ()))
    leaves = [x[n][lo:hi].detach().clone().requires_grad_(backward) for n in names]
    dO = x["dO"][lo:hi]

    def run():
        for t in leaves:
            t.grad = None
        o, final = fn(*leaves, cu, output_final_state=True, use_qk_l2norm_in_kernel=True, **kw)
        if backward:
            torch.autograd.backward((o, final), (dO, x["d_final"]))
    return run


def _synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(run, reps: int, warmup: int, device, barrier=None) -> float:
    """Median seconds of run() between synchronized (and barrier-aligned) starts."""
    for _ in range(warmup):
        run()
    times = []
    for _ in range(reps):
        _synchronize(device)
        if barrier is not None:
            barrier()
        t0 = time.perf_counter()
        run()
        _synchronize(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _slowest(seconds: float, device) -> float:
    import torch
    import torch.distributed as dist

    t = torch.tensor([seconds], device=device, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def _message_seconds(H: int, K: int, V: int, device, dtype, reps: int) -> float:
    """One state message between ranks 0 and 1, timed alone: ping-pong / 2 (median)."""
    import torch
    import torch.distributed as dist

    rank, buf = dist.get_rank(), torch.zeros(H, V, K, device=device, dtype=dtype)
    times = []
    for i in range(reps + 5):
        _synchronize(device)
        dist.barrier()
        t0 = time.perf_counter()
        if rank == 0:
            dist.isend(buf, dst=1).wait()
            dist.irecv(buf, src=1).wait()
        elif rank == 1:
            dist.irecv(buf, src=0).wait()
            dist.isend(buf, dst=0).wait()
        _synchronize(device)
        if i >= 5:
            times.append((time.perf_counter() - t0) / 2)
    return _slowest(statistics.median(times), device)


def _rank_main(rank: int, args: argparse.Namespace, init_file: str) -> None:
    import contextlib

    import torch
    import torch.distributed as dist

    cpu = args.cpu_reference
    if cpu:  # the CPU check of this script: gloo, float64, the test-only reference engines
        torch.set_num_threads(1)
        device, io_dtype, gate_dtype = torch.device("cpu"), torch.float64, torch.float64
        dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                                world_size=args.world, timeout=datetime.timedelta(seconds=60))
        from tests.torch_ops.reference_summary_engine import cp_reference_engines_installed
        engines = cp_reference_engines_installed()
    else:
        torch.cuda.set_device(rank)
        device, io_dtype, gate_dtype = torch.device("cuda", rank), torch.bfloat16, torch.float32
        dist.init_process_group("nccl", init_method=f"file://{init_file}", rank=rank,
                                world_size=args.world, device_id=device,
                                timeout=datetime.timedelta(seconds=300))
        engines = contextlib.nullcontext()
    try:
        with engines:
            _measure(rank, args, device, io_dtype, gate_dtype)
        dist.barrier()
    except BaseException:
        dist.destroy_process_group()
        raise
    if cpu:  # gloo ranks could abort on the way out (tests/context_parallel/spawned_rank.py)
        from tests.context_parallel.spawned_rank import leave_gloo_world
        leave_gloo_world(init_file, rank, args.world, datetime.timedelta(seconds=60))
    dist.destroy_process_group()


def _measure(rank: int, args: argparse.Namespace, device, io_dtype, gate_dtype) -> None:
    import torch
    import torch.distributed as dist

    from cudnn.linear_attention import context_parallel as cp
    from cudnn.linear_attention import ops

    name = FUNCTIONS[args.family]
    H, K, V = args.heads, args.k, args.v
    per, world = args.tokens_per_rank, args.world
    T = per * world
    x = _inputs(args.family, T, H, K, V, device, io_dtype, gate_dtype)
    whole_cu = torch.tensor([0, T], dtype=torch.int32, device=device)
    own_cu = torch.tensor([0, per], dtype=torch.int32, device=device)
    lo, hi = rank * per, (rank + 1) * per
    zero = torch.zeros(1, H, V, K, device=device, dtype=gate_dtype)
    rows = {}
    for backward in (False, True):
        single = None
        if rank == 0:
            single = _timed(_step(getattr(ops, name), x, 0, T, whole_cu, backward),
                            args.reps, args.warmup, device)
        dist.barrier()
        local = _step(getattr(ops, name), x, lo, hi, own_cu, backward, initial_state=zero)
        compute = _slowest(_timed(local, args.reps, args.warmup, device), device)
        step = _step(getattr(cp, name), x, lo, hi, [0, T], backward)
        cp_time = _slowest(_timed(step, args.reps, args.warmup, device, dist.barrier), device)
        rows["fwd+bwd" if backward else "fwd"] = (single, compute, cp_time)
    message = _message_seconds(H, K, V, device, gate_dtype, args.reps * 5)
    if rank != 0:
        return
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU, gloo"
    print(f"context parallelism: {args.family}, one sequence of {world} x {per} tokens, "
          f"{H} heads, K {K}, V {V}, {str(io_dtype).removeprefix('torch.')}, {world} ranks "
          f"({where}); medians of {args.reps}")
    print(f"one state message: {message * 1e6:.1f} us "
          f"({H * V * K * zero.element_size() / 2**20:.2f} MiB)")
    for what, (single, compute, cp_time) in rows.items():
        hops = (world - 1) * (2 if what == "fwd+bwd" else 1)
        comm = hops * message
        wait = max(cp_time - compute - comm, 0.0)
        print(f"{what:8s} one rank {single * 1e3:8.2f} ms {T / single / 1e6:8.4f} Mtok/s"
              f" | CP {cp_time * 1e3:8.2f} ms {T / cp_time / 1e6:8.4f} Mtok/s"
              f" | speedup {single / cp_time:5.2f}x"
              f" | compute {compute / cp_time:6.1%}, communication {comm / cp_time:6.1%}"
              f" ({hops} messages), waiting {wait / cp_time:6.1%}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, default=2, help="GPUs (one rank each)")
    ap.add_argument("--tokens-per-rank", type=int, default=32768)
    ap.add_argument("--family", choices=sorted(FUNCTIONS), default="gdn")
    ap.add_argument("--heads", type=int, default=BENCH_SHAPE[0])
    ap.add_argument("--k", type=int, default=BENCH_SHAPE[1], help="key head dim")
    ap.add_argument("--v", type=int, default=BENCH_SHAPE[2], help="value head dim")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--cpu-reference", action="store_true",
                    help="check this script on CPUs: gloo, float64, the test-only reference "
                         "engines (tests/torch_ops); times mean nothing")
    args = ap.parse_args(argv)
    if args.world < 2:
        ap.error(f"argument --world: expected at least 2 ranks; got {args.world}")
    import tempfile

    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp

    if args.cpu_reference:
        if not dist.is_available() or not dist.is_gloo_available():
            print("context_parallel_bench: skipped: torch.distributed has no gloo")
            return 0
    elif not torch.cuda.is_available() or torch.cuda.device_count() < args.world:
        found = torch.cuda.device_count() if torch.cuda.is_available() else 0
        print(f"context_parallel_bench: skipped: needs {args.world} CUDA GPUs (found {found})")
        return 0
    elif not dist.is_nccl_available():
        print("context_parallel_bench: skipped: torch.distributed has no NCCL")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_rank_main, args=(args, os.path.join(tmp, "init")), nprocs=args.world,
                 join=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
