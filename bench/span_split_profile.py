"""Where the span-split forward (and backward) spends its time, one component at a time.

    python3 bench/span_split_profile.py [--family gdn] [--seqs 1 --len 32768] [--span 0]
                                        [--reps 20] [--backward] [--sync-check]

(from the repository root on a GPU machine, PYTHONPATH as for bench_linear_attention.py).
For the public op's own split (torch_ops/.../ops/_span_split.py, the automatic span
length unless --span) it prints, per component, the median GPU time of back-to-back calls
(CUDA events around `BACK` calls, host work overlapped) and the median host time of one
call (perf_counter around the call, no synchronisation): the span table, the summary, the
composition of the entering states, the forward over the spans, the whole split op and the
unsplit op (CUDNN_LA_SPAN_TOKENS=0). With --backward: the backward summary, the
leaving-state composition, the backward over the spans, and fwd+bwd of the op with the
backward split on and off. A component whose GPU time is below its host time is
host-bound in the op (the GPU waits on the launches).

With --sync-check it first runs the split op (and, with --backward, its fwd+bwd) once
under torch.cuda.set_sync_debug_mode("warn"), which prints a warning with the stack for
every host-device synchronisation: the split path should have none, and a host time per
call well above the sum of its components' host times would point at one.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from bench_linear_attention import _op_operands, make_inputs

BACK = 10


def gpu_ms(fn, reps: int) -> float:
    """Median over reps of the event-timed ms of BACK back-to-back calls, per call (the
    product CLI's timer)."""
    from cudnn.cli.bench import cuda_median_ms

    return cuda_median_ms(fn, reps, BACK, warmup=3)


def host_ms(fn, reps: int) -> float:
    """Median host time of one call (the GPU drained before each)."""
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    torch.cuda.synchronize()
    return statistics.median(times)


def row(name: str, fn, reps: int) -> None:
    print(f"{name:<34} GPU back-to-back {gpu_ms(fn, reps):7.3f} ms   host per call "
          f"{host_ms(fn, reps):7.3f} ms", flush=True)


def sync_check(fn, name: str) -> None:
    """Run fn once (warm) under the sync debug mode and say how many syncs it warned of."""
    import warnings

    fn()
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    # torch announces the debug mode itself ("Synchronization debug mode is a prototype
    # feature"): that warning is not a synchronisation of the call
    syncs = [w for w in caught if "synchroniz" in str(w.message).lower()
             and "debug mode" not in str(w.message).lower()]
    print(f"sync check, {name}: {len(syncs)} host-device synchronisation(s)", flush=True)
    for w in syncs:
        print(f"  {w.filename}:{w.lineno}: {w.message}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--family", choices=("gdn", "kda", "gdn2"), default="gdn")
    p.add_argument("--seqs", type=int, default=1)
    p.add_argument("--len", type=int, default=32768)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--span", type=int, default=0, help="span tokens (0: the automatic rule)")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--backward", action="store_true")
    p.add_argument("--sync-check", action="store_true",
                   help="report host-device synchronisations of one split call first")
    a = p.parse_args()

    from cudnn.linear_attention.ops import _span_maps as sm
    from cudnn.linear_attention.ops import _span_split as ss
    from cudnn.linear_attention.ops.gdn import OPS as GDN
    from cudnn.linear_attention.ops.gdn2 import OPS as GDN2
    from cudnn.linear_attention.ops.kda import OPS as KDA

    ops = {"gdn": GDN, "kda": KDA, "gdn2": GDN2}[a.family]
    inp = make_inputs(a.seqs, a.len, a.heads, 128, 128, kda=a.family != "gdn")
    fn, leaves, cu = _op_operands(inp, a.family)
    q = leaves[0]
    T, N, HO = q.shape[0], cu.numel() - 1, q.shape[1]
    span = a.span or ss.auto_span_tokens(T, N, HO, ss._sms(q.device)) or 0
    if not span:
        raise SystemExit(f"the automatic rule does not split {N} x {a.len} tokens with {HO} heads; pass --span")
    spans = sm.span_count_bound(T, N, span)
    steps = min(spans, -(-T // span))
    print(f"GPU: {torch.cuda.get_device_name()}; {a.family}, {N} x {a.len} tokens, {HO} heads, "
          f"K = V = 128, bf16; spans of {span} ({spans} table rows, {steps} steps); median of {a.reps}")

    def op(**kw):
        with torch.no_grad():
            return fn(*leaves, cu, **kw)

    # the op's own arguments, as the split sees them (an eager call's, normalised)
    captured = {}
    real_run = ss.SpanSplit.run

    def spy(self, args, span_, keep=False):
        captured["args"], captured["split"] = args, self
        return real_run(self, args, span_, keep)

    os.environ[ss.ENV] = str(span)
    ss.SpanSplit.run = spy
    try:
        op()
    finally:
        ss.SpanSplit.run = real_run
    args, split = captured["args"], captured["split"]
    if a.sync_check:
        sync_check(lambda: op(), "op, split")
        if a.backward:
            d_out = torch.randn(T, HO, leaves[2].shape[2], dtype=q.dtype, device=q.device)
            xs = [x.detach().clone().requires_grad_(True) for x in leaves]
            sync_check(lambda: torch.autograd.grad(fn(*xs, cu)[0], xs, d_out), "op fwd+bwd, split")
    at = {n: i for i, n in enumerate(ops.forward_signature.names)}
    table = sm.span_table(cu, T, span, spans, steps)
    summary_args = {n: args[at[n]] for n in split._summary_args}

    def summary():
        return split._summary._kernel(cu_seqlens=table.span_cu, initial_state=None,
                                      output_transition=True, **summary_args)

    final0, transition = summary()
    entering = sm.entering_states(None, final0, transition, table, torch.float32)
    spanned = list(args)
    spanned[at["cu_seqlens"]], spanned[at["initial_state"]] = table.span_cu, entering
    spanned[at["output_final_state"]] = True
    spanned = tuple(spanned)

    row("span table (cached in the op)", lambda: sm.span_table(cu, T, span, spans, steps), a.reps)
    row("summary (final from zero + M)", summary, a.reps)
    row("composition (entering states)", lambda: sm.entering_states(None, final0, transition, table,
                                                                    torch.float32), a.reps)
    row("forward over the spans", lambda: ops._run(ops.forward_def, spanned), a.reps)
    row("op, split", op, a.reps)
    os.environ[ss.ENV] = "0"
    row("op, unsplit", op, a.reps)
    if not a.backward:
        return

    os.environ[ss.ENV] = str(span)
    d_out = torch.randn(T, HO, leaves[2].shape[2], dtype=q.dtype, device=q.device)
    grads = [x.detach().clone().requires_grad_(True) for x in leaves]
    bwd_names = split._summary_bwd_args
    named = {"dO": d_out, **{n: args[at[n]] for n in at if n in bwd_names}}

    def summary_bwd():
        return split._summary_bwd._kernel(cu_seqlens=table.span_cu, d_final_state=None,
                                          output_transition=False, **{n: named[n] for n in bwd_names})

    d_entering, _ = summary_bwd()
    d_leaving = sm.leaving_gradients(None, d_entering, transition, table, torch.float32)
    spanned_bwd = {n: args[at[n]] for n in ops.backward_signature.names if n in at}
    spanned_bwd.update(dO=d_out, cu_seqlens=table.span_cu, initial_state=entering,
                       d_final_state=d_leaving, state_checkpoints=None, values=None,
                       checkpoint_every_n_tokens=0)
    spanned_bwd = ops.backward_signature.positional(spanned_bwd)
    row("backward summary", summary_bwd, a.reps)
    row("composition (leaving gradients)", lambda: sm.leaving_gradients(None, d_entering, transition, table,
                                                                         torch.float32), a.reps)
    row("backward over the spans", lambda: ops._backward_kernel(*spanned_bwd), a.reps)

    def fwd_bwd():
        o = fn(*grads, cu)[0]
        torch.autograd.grad(o, grads, d_out)

    for value in ("1", "0"):
        os.environ[ss.BACKWARD_ENV] = value
        row(f"op fwd+bwd, split, backward split={value}", fwd_bwd, a.reps)
    os.environ[ss.ENV] = "0"
    row("op fwd+bwd, unsplit", fwd_bwd, a.reps)


if __name__ == "__main__":
    main()
