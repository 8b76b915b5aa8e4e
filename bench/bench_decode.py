"""Decode-step timing: the public torch op on a state pool (FROST recurrent engine) against
flash-linear-attention's fused_recurrent kernels in the same process, and against the
state-traffic floor.

Shape per step: N sequences x `tokens` tokens (1: a decode step, more: a speculative step;
N = 1, 64, 256, 1024), 16 heads, K = V = 128, bf16 q/k/v, fp32 gates, fp32 state. The op
reads each sequence's state from a pool of N + 8 rows through state_indices (a
permutation) and writes it back in place (overwrite_initial_state=True), as a server does.
FLA 0.6's public `fused_recurrent_gated_delta_rule` / `fused_recurrent_kda` take the same
q/k/v/g/beta as [1, T, H, D] views (varlen cu_seqlens, int64), the default scale and no
in-kernel normalisation or gates (k is normalised beforehand for both), and read
initial_state [N, H, K, V] (their own layout), returning a new final state. They take no
slot indices, so two FLA rows are timed:
  FLA        the kernel on a contiguous [N, H, K, V] state (no pool): the same state bytes
             as the op's (one read, one write); a lower bound for a server on FLA
  FLA+pool   what a server on those functions does per step: the N rows gathered from a
             pool kept in FLA's layout [N + 8, H, K, V] (index_select), the kernel, the
             final states scattered back (index_copy_): the op's work, done with torch
Floor: 2 x N x 16 x 128 x 128 x 4 bytes / 4.3 TB/s (state bytes; q/k/v add < 1 %).

Columns (medians of CUDA-event samples after warm-up):
  graph      the call captured 20 times in a CUDA graph, replayed; per call: the GPU time
             with no host in the loop ("error: ..." when a peer's call does not capture)
  b2b        20 eager calls back to back between two events, divided: what a host that keeps
             the queue full sees
  host       wall time of 200 eager calls without synchronising, divided, at batch 1 (the
             GPU finishes each step before the next is issued): the host overhead of one
             cached call, reported once per family with how many of the op's calls took the
             checked path instead of the launch lane (0 when the cached path holds)
A peer that is not installed (FLA) reports "absent" and the rest run. Each column times its
own copy of the inputs (same values: the seed is the batch), so no tensor - the op's pool
written in place, FLA's state copy, cu_seqlens - is shared between columns, and the device
is idle between columns; `--columns` picks some of op, fla, flapool (the rest print "-").
The peer columns (fla, flapool) run in a worker process each (PeerWorker): an illegal
memory access in a peer's kernel loses only that worker's CUDA context, its cell reads
"fault: ..." and a fresh worker takes the next cell, so the op's rows and the other cells
still come out. (FLA 0.6 with Triton 3.6 has faulted this way in fused_recurrent on the
H200, intermittently: bench/NOTES.md.) Run the bench under compute-sanitizer
(gpu_suite.sh decodesan, which keeps the peers in-process with --no-isolate) to attribute
a fault.

  PYTHONPATH=$(python3 tools/pythonpath.py) python3 bench/bench_decode.py [--batches 1,64]
      [--tokens 1,4]   (tokens per sequence: speculative steps; the floor is the state's)
      [--columns op,fla,flapool]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from bench_linear_attention import cuda_median_ms

HEADS, DIM = 16, 128
HBM_BYTES_PER_S = 4.3e12
INNER = 20


def floor_us(n: int) -> float:
    return 2 * n * HEADS * DIM * DIM * 4 / HBM_BYTES_PER_S * 1e6


def inputs(n: int, kda: bool, dev: str = "cuda", tokens: int = 1) -> dict:
    """n sequences of `tokens` tokens (1: a decode step; more: a speculative step)."""
    torch.manual_seed(n)
    T = n * tokens
    q = torch.randn(T, HEADS, DIM, device=dev, dtype=torch.bfloat16)
    k = F.normalize(torch.randn(T, HEADS, DIM, device=dev), dim=-1).to(torch.bfloat16)
    v = torch.randn(T, HEADS, DIM, device=dev, dtype=torch.bfloat16)
    g = F.logsigmoid(torch.randn((T, HEADS, DIM) if kda else (T, HEADS), device=dev)) * 0.1
    beta = torch.sigmoid(torch.randn(T, HEADS, device=dev))
    cu = torch.arange(0, T + 1, tokens, device=dev, dtype=torch.int32)
    pool = torch.randn(n + 8, HEADS, DIM, DIM, device=dev) * 0.1
    slots = torch.randperm(n + 8, device=dev)[:n].to(torch.int32)
    return dict(q=q, k=k, v=v, g=g, beta=beta, cu=cu, pool=pool, slots=slots)


def op_call(x: dict, kda: bool):
    from cudnn.linear_attention import ops

    fn = ops.kimi_delta_attention if kda else ops.gated_delta_net

    def call():
        return fn(x["q"], x["k"], x["v"], x["g"], x["beta"], x["cu"], initial_state=x["pool"],
                  output_final_state=True, overwrite_initial_state=True,
                  state_indices=x["slots"])
    return call


def fla_function(kda: bool):
    """FLA's public fused_recurrent function of the family, or None when FLA is absent."""
    try:
        if kda:
            from fla.ops.kda import fused_recurrent_kda as fn
        else:
            from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule as fn
    except ImportError:
        return None
    return fn


def fla_call(x: dict, kda: bool, pooled: bool = False, fn=None):
    """FLA's call on the op's inputs (module docstring): on a contiguous state, or
    (pooled) with the state rows gathered from and scattered back into a pool."""
    fn = fn or fla_function(kda)
    if fn is None:
        return None
    n = x["cu"].numel() - 1
    args = [t.unsqueeze(0) for t in (x["q"], x["k"], x["v"], x["g"], x["beta"])]
    cu64 = x["cu"].long()
    if not pooled:
        h0 = x["pool"][:n].transpose(-1, -2).contiguous()  # FLA's [N, H, K, V]

        def call():
            return fn(*args, initial_state=h0, output_final_state=True, cu_seqlens=cu64)
        return call
    pool = x["pool"].transpose(-1, -2).contiguous()  # a server's pool in FLA's layout
    slots = x["slots"].long()

    def pooled_call():
        o, final = fn(*args, initial_state=pool.index_select(0, slots), output_final_state=True,
                      cu_seqlens=cu64)
        pool.index_copy_(0, slots, final.to(pool.dtype))
        return o, pool
    return pooled_call


def checked_calls() -> int:
    """Calls of the op's serving graphs that ran the checked path (not the launch lane)."""
    from cudnn.linear_attention import ops

    return sum(entry.checked_calls for cache in ops.graph_caches()
               if cache.name.endswith("_serve") for entry in cache.values())


def median_us(fn, reps: int, inner: int) -> float:
    """Median us per call of `inner` back-to-back calls between two CUDA events (the
    linear-attention bench's timer, without its warm-up: the callers warm up)."""
    return cuda_median_ms(fn, reps, warmup=0, inner=inner) * 1e3


def graph_us(call, reps: int) -> float:
    """GPU time per call of INNER calls captured in one CUDA graph. The warm-up runs on a
    side stream (torch's capture recipe) and the device is idle before the capture and
    after the last replay; the graph goes before anything it reads, and the outputs of
    the captured calls (in the graph's private pool) stay referenced until then."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            call()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = [call() for _ in range(INNER)]
    try:
        return median_us(graph.replay, reps, 1) / INNER
    finally:
        torch.cuda.synchronize()
        del graph
        del outputs


def eager_us(call, reps: int) -> float:
    for _ in range(5):
        call()
    torch.cuda.synchronize()
    return median_us(call, reps, INNER)


def host_us(call, calls: int = 200) -> float:
    for _ in range(20):
        call()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        call()
    wall = time.perf_counter() - t0
    torch.cuda.synchronize()
    return wall / calls * 1e6


def cell(fn) -> str:
    try:
        value = fn()
    except Exception as e:  # one broken peer must not hide the rest
        return f"error: {type(e).__name__}: {str(e)[:80]}"
    return "absent" if value is None else f"{value:.1f}"


COLUMNS = ("op", "fla", "flapool")


def column_cells(column: str, n: int, kda: bool, tokens: int, reps: int) -> list[str]:
    """[graph, b2b] of one column on inputs of its own: no tensor (the op's pool, FLA's
    state copy, cu_seqlens) is shared with another column, and the device is idle and the
    column's tensors released before the next column starts."""
    x = inputs(n, kda, tokens=tokens)
    call = (op_call(x, kda) if column == "op" else
            fla_call(x, kda, pooled=column == "flapool"))
    if call is None:
        return ["absent", "absent"]
    cells = [cell(lambda: graph_us(call, reps)), cell(lambda: eager_us(call, reps))]
    torch.cuda.synchronize()
    del call, x
    return cells


_REPLY = "cells: "  # marks the worker's reply among whatever else a peer prints


class PeerWorker:
    """One peer column timed in a child process (this script with --worker COLUMN): cells
    are asked for one at a time over stdin/stdout, so the device is idle between columns as
    in-process, and a fault kills the child, not the bench."""

    def __init__(self, column: str, reps: int, argv: list[str] | None = None):
        self.proc = None
        self.argv = argv or [sys.executable, __file__, "--worker", column, "--reps", str(reps)]

    def _start(self):
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)

    def cells(self, n: int, kda: bool, tokens: int) -> list[str]:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        try:
            self.proc.stdin.write(json.dumps([n, kda, tokens]) + "\n")
            self.proc.stdin.flush()
            while True:  # a peer may print to stdout too: its lines go to stderr
                line = self.proc.stdout.readline()
                if not line or line.startswith(_REPLY):
                    break
                sys.stderr.write(line)
        except BrokenPipeError:
            line = ""
        if line:
            return json.loads(line[len(_REPLY):])
        self.proc.wait()
        err = [ln for ln in self.proc.stderr.read().splitlines() if ln.strip()]
        self.proc = None
        return [f"fault: {err[-1][:80] if err else 'worker exited'}", "-"]

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait()


def worker(column: str, reps: int) -> None:
    """The child's loop: one JSON request [n, kda, tokens] per line, one JSON reply."""
    with torch.no_grad():
        for line in sys.stdin:
            n, kda, tokens = json.loads(line)
            print(_REPLY + json.dumps(column_cells(column, n, kda, tokens, reps)), flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batches", default="1,64,256,1024")
    p.add_argument("--families", default="gdn,kda")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--tokens", default="1",
                   help="tokens per sequence, comma-separated (e.g. 1,4: decode and speculative)")
    p.add_argument("--columns", default=",".join(COLUMNS),
                   help="which of op, fla, flapool to time (the others print '-')")
    p.add_argument("--no-isolate", action="store_true",
                   help="time the peer columns in this process (a peer's fault ends the bench)")
    p.add_argument("--worker", choices=COLUMNS[1:], help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        return worker(a.worker, a.reps)
    columns = a.columns.split(",")
    unknown = sorted(set(columns) - set(COLUMNS))
    if unknown:
        p.error(f"--columns: expected some of {', '.join(COLUMNS)}, given {', '.join(unknown)}")
    print(f"GPU: {torch.cuda.get_device_name()}; decode steps, {HEADS} heads, K = V = {DIM}, "
          f"bf16 io, fp32 state; times in us per step (median of {a.reps})")
    # the op's kernel variants (kernels/decode.py: read when a call binds its kernel)
    print("decode kernel: " + ", ".join(f"{k}={os.environ.get(k, '0')}"
                                        for k in ("FROST_DECODE_VEC", "FROST_DECODE_BV64")))
    rows = []
    peers = {} if a.no_isolate else {c: PeerWorker(c, a.reps) for c in COLUMNS[1:] if c in columns}
    with torch.no_grad():
        for family in a.families.split(","):
            kda = family == "kda"
            for tokens, n in [(t, n) for t in map(int, a.tokens.split(","))
                              for n in map(int, a.batches.split(","))]:
                row = [family.upper(), str(n), str(tokens), f"{floor_us(n):.1f}"]
                for column in COLUMNS:
                    if column not in columns:
                        row += ["-", "-"]
                    elif column in peers:
                        row += peers[column].cells(n, kda, tokens)
                    else:
                        row += column_cells(column, n, kda, tokens, a.reps)
                rows.append(row)
                print("  ".join(row), flush=True)
            x = inputs(1, kda)
            before = checked_calls()
            ours = cell(lambda: host_us(op_call(x, kda)))
            peer = fla_call(x, kda)
            print(f"{family.upper()} host overhead of one cached op call (batch 1): {ours} us "
                  f"({checked_calls() - before} of 220 calls on the checked path); FLA: "
                  f"{'absent' if peer is None else cell(lambda: host_us(peer))} us", flush=True)
    for w in peers.values():
        w.close()
    print("\n| family | N | tokens | floor | op graph | op b2b | FLA graph | FLA b2b "
          "| FLA+pool graph | FLA+pool b2b |\n|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {' | '.join(r)} |")

if __name__ == "__main__":
    main()
