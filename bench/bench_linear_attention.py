"""Side-by-side timing of the linear-attention kernels against flash-linear-attention.

Shapes: 8 sequences x 4096 tokens (THD, cu_seqlens), 16 heads, head dim 128,
bf16 q/k/v, fp32 gates.  Every candidate runs in this one process on fresh random
inputs; each time is the median of CUDA-event timings after warm-up, two ways:
  per call      events around one call: includes the host's launch latency (what one
                isolated call costs; Python launch paths show here)
  back-to-back  events around BACK_TO_BACK calls, divided: the GPU time when the host
                keeps the queue full (what a model running many calls sees)

After the table, each timed row against its case's byte and FLOP floors (floors.py) at the copy
and bf16 matmul rates measured in the same process: the floor's share of the measured
back-to-back time.

Run on the GPU machine from the repo root (the package installed with `[all]`, FLA
importable; a candidate whose package is missing reports an error row and the rest run):
  PYTHONPATH=$(python3 tools/pythonpath.py) python3 bench/bench_linear_attention.py
  [--reps 30] [--cases "GDN fwd"] [--impl FROST] [--fwd-only] [--frost-fwd-kernel wgmma]

--frost-fwd-kernel (default product) runs every FROST forward of the process, the training
ones (checkpoints, U: the "op FROST checkpoints" and "FROST kernels ckpt+U" rows) included,
on one layer of the test tooling (engines_frost/tests/frost_fwd_experiments.py
use_kernel(..., training=True)): the A/B of a forward layer is two runs, with and without
(e.g. --frost-fwd-kernel pipelined against the product's picks, training forwards included).
The FROST_FWD_* and FROST_BWD_* environment variables (frost_fwd_experiments.py,
frost_bwd_experiments.py: bench / test switches) A/B one forward or backward knob the same
way, e.g. `FROST_BWD_CHAIN=wgmma_scaled python3 bench/bench_linear_attention.py --impl FROST`.
"""
import argparse
import math

import torch
import torch.nn.functional as F


BACK_TO_BACK = 10
_inner = 1  # calls between the two events of one sample (main() sets 1, then BACK_TO_BACK)


def cuda_median_ms(fn, reps: int, warmup: int = 5, inner: int | None = None) -> float:
    """Median over reps of (event-timed ms of `inner` back-to-back calls) / inner: the
    product CLI's timer (`python -m cudnn bench`) with this script's defaults."""
    from cudnn.cli.bench import cuda_median_ms as timer

    return timer(fn, reps, _inner if inner is None else inner, warmup=warmup)


def make_inputs(n_seq, seq_len, heads, dk, dv, kda: bool, dev="cuda", io=torch.bfloat16):
    torch.manual_seed(0)
    T = n_seq * seq_len
    q = torch.randn(T, heads, dk, device=dev, dtype=io)
    k = F.normalize(torch.randn(T, heads, dk, device=dev), dim=-1).to(io)
    v = torch.randn(T, heads, dv, device=dev, dtype=io)
    gshape = (T, heads, dk) if kda else (T, heads)
    g = F.logsigmoid(torch.randn(gshape, device=dev)) * 0.5
    beta = torch.sigmoid(torch.randn(T, heads, device=dev))
    cu = torch.arange(0, T + 1, seq_len, device=dev, dtype=torch.int32)
    return q, k, v, g, beta, cu


def cutile_fwd_runner(inp, kda: bool, bv: int = 64):
    from cudnn.linear_attention.cutile.kernels.fwd import chunked_fwd, fwd_layout
    q, k, v, g, beta, cu = inp
    T, H, K = q.shape
    V = v.shape[2]
    lay = fwd_layout(T, cu.numel() - 1, H, K, V, kda=kda, io_dtype=q.dtype, io_itemsize=2,
                     int32_dtype=torch.int32, float32_dtype=torch.float32)
    scratch = lay.carve(torch.empty(lay.size, dtype=torch.uint8, device=q.device))
    o = torch.empty(T, H, V, dtype=q.dtype, device=q.device)
    scale = 1 / math.sqrt(K)
    return lambda: chunked_fwd(q, k, v, g, beta, cu, o, scratch, kda=kda, scale=scale, bv=bv)


def cutile_fwd_bwd_runner(inp, kda: bool):
    from cudnn.linear_attention.cutile.kernels.bwd import bwd_layout, chunked_bwd
    fwd = cutile_fwd_runner(inp, kda)
    q, k, v, g, beta, cu = inp
    T, H, K = q.shape
    V = v.shape[2]
    lay = bwd_layout(T, cu.numel() - 1, H, H, K, V, kda=kda, io_dtype=q.dtype, io_itemsize=2,
                     int32_dtype=torch.int32, float32_dtype=torch.float32)
    scratch = lay.carve(torch.empty(lay.size, dtype=torch.uint8, device=q.device))
    d_out = torch.randn(T, H, V, dtype=q.dtype, device=q.device)
    grads = [torch.empty_like(x) for x in (q, k, v, g, beta)]
    scale = 1 / math.sqrt(K)

    def step():
        fwd()
        chunked_bwd(q, k, v, g, beta, cu, d_out, *grads, scratch, kda=kda, scale=scale)
    return step


def frost_fwd_runner(inp, kda: bool):
    """The FROST (CuTe DSL) forward kernel, checked once (frost_fwd bind=True) and then
    launched as a cached op call launches it (the BoundLaunch, no per-call checks)."""
    from cudnn.linear_attention.frost.kernels.fwd import frost_fwd
    q, k, v, g, beta, cu = inp
    o = torch.empty(q.shape[0], q.shape[1], v.shape[2], dtype=q.dtype, device=q.device)
    stream = torch.cuda.current_stream()
    tensors = dict(q=q, k=k, v=v, g=g, beta=beta, w=None, cu_seqlens=cu, out=o,
                   initial_state=None, final_state=None)
    bound = frost_fwd(**tensors, scale=1 / math.sqrt(q.shape[2]), use_l2norm=False,
                      gate_per_channel=kda, beta_per_channel=False, stream=stream, bind=True)
    return lambda: bound.launch(tensors, stream)


def frost_fwd(kda: bool):
    return lambda inp, reps: cuda_median_ms(frost_fwd_runner(inp, kda), reps)


def cutile_fwd(kda: bool, bv: int = 64):
    return lambda inp, reps: cuda_median_ms(cutile_fwd_runner(inp, kda, bv), reps)


def _fla_call(inp, family: str):
    """FLA 0.6's chunked function for `family` and its leaf inputs on the bench inputs,
    batch dimension added (GDN-2: a per-channel erase gate b in the io dtype and a write
    gate w, as _op_operands gives the op)."""
    q, k, v, g, beta, cu = inp
    if family == "gdn":
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fn
    elif family == "kda":
        from fla.ops.kda import chunk_kda as fn
    else:
        from fla.ops.gdn2 import chunk_gdn2 as fn
    leaves = [x.unsqueeze(0).detach().clone() for x in (q, k, v, g, beta)]
    if family == "gdn2":
        T, H, K = q.shape
        leaves[4] = torch.sigmoid(torch.randn(1, T, H, K, device=q.device)).to(q.dtype)
        leaves.append(torch.sigmoid(torch.randn(1, T, H, v.shape[2], device=q.device)).to(q.dtype))
    return fn, leaves


def bench_fla_fwd(family: str):
    """FLA's forward alone (no autograd graph recorded), as the op's forward rows run."""
    def run(inp, reps):
        fn, leaves = _fla_call(inp, family)
        cu64 = inp[5].long()

        def step():
            with torch.no_grad():
                fn(*leaves, cu_seqlens=cu64)
        return cuda_median_ms(step, reps)
    return run


def _op_operands(inp, family: str):
    """The op, its leaf inputs (GDN-2: a per-channel erase gate b in the io dtype and a
    write gate w added) and cu_seqlens for `family` on the bench inputs."""
    from cudnn.linear_attention import ops

    q, k, v, g, beta, cu = inp
    leaves = [x.detach().clone() for x in (q, k, v, g, beta)]
    if family == "gdn2":
        T, H, K = q.shape
        leaves[4] = torch.sigmoid(torch.randn(T, H, K, device=q.device)).to(q.dtype)
        leaves.append(torch.sigmoid(torch.randn(T, H, v.shape[2], device=q.device)).to(q.dtype))
    fn = {"gdn": ops.gated_delta_net, "kda": ops.kimi_delta_attention, "gdn2": ops.gated_delta_net_v2}[family]
    return fn, leaves, cu


def op_fwd_runner(inp, family: str):
    """The public torch op's forward as a user serves with it (no autograd), planner's choice."""
    fn, leaves, cu = _op_operands(inp, family)

    def step():
        with torch.no_grad():
            fn(*leaves, cu)
    return step


def op_fwd(family: str):
    return lambda inp, reps: cuda_median_ms(op_fwd_runner(inp, family), reps)


def op_fwd_bwd_runner(inp, family: str, plan_name: str | None = None, checkpoints: bool = False):
    """The public torch op as a user trains with it: forward, then autograd's backward
    (torch.autograd.grad w.r.t. every input); the planner's choice of engines unless
    plan_name pins one (forward and backward). checkpoints=True: with the opt-in training
    checkpoints (the backward reads the forward's states; torch_ops/README.md)."""
    from cudnn.linear_attention import ops

    fn, leaves, cu = _op_operands(inp, family)
    leaves = [x.requires_grad_(True) for x in leaves]
    q, v = leaves[0], leaves[2]
    d_out = torch.randn(q.shape[0], q.shape[1], v.shape[2], dtype=q.dtype, device=q.device)
    pinned = {} if plan_name is None else {"plan_name": plan_name}

    def step():
        previous = ops.set_training_checkpoints(checkpoints)
        try:
            o = fn(*leaves, cu, **pinned)[0]
            torch.autograd.grad(o, leaves, d_out)
        finally:
            ops.set_training_checkpoints(previous)
    return step


def frost_kernels_fwd_bwd_runner(inp, kda: bool, values: bool = False):
    """The FROST kernels without the op around them: the forward (bound launch) then
    frost_bwd into preallocated gradients and workspace. values=False: the recompute path
    (states, chain, grads); True: the training path of NOTES_bwd.md v1.3, the forward
    writing state checkpoints and U, the backward running only chain and grads."""
    from cudnn.linear_attention.frost.kernels.bwd import frost_bwd, frost_bwd_workspace_size
    from cudnn.linear_attention.frost.kernels.checkpoints import checkpoint_rows
    from cudnn.linear_attention.frost.kernels.fwd import frost_fwd

    q, k, v, g, beta, cu = inp
    T, H, K = q.shape
    N, V = cu.numel() - 1, v.shape[2]
    o = torch.empty(T, H, V, dtype=q.dtype, device=q.device)
    ckpt = torch.empty(checkpoint_rows(T, N), H, V, K, dtype=torch.bfloat16, device=q.device) if values else None
    u = torch.empty(T, H, V, dtype=torch.bfloat16, device=q.device) if values else None
    stream = torch.cuda.current_stream()
    tensors = dict(q=q, k=k, v=v, g=g, beta=beta, w=None, cu_seqlens=cu, out=o, initial_state=None,
                   final_state=None, state_checkpoints=ckpt, values=u)
    flags = dict(scale=1 / math.sqrt(K), use_l2norm=False, gate_per_channel=kda, beta_per_channel=False)
    bound = frost_fwd(**tensors, **flags, stream=stream, bind=True)
    grads = dict(dq=torch.empty_like(q), dk=torch.empty_like(k), dv=torch.empty_like(v), dg=torch.empty_like(g),
                 dbeta=torch.empty_like(beta), dw=None, d_initial_state=None)
    size = frost_bwd_workspace_size(total_tokens=T, num_seqs=N, heads_q=H, heads_k=k.shape[1], heads_v=v.shape[1],
                                    head_dim_k=K, head_dim_v=V, checkpoints=values, values=values)
    ws = torch.empty(size, dtype=torch.uint8, device=q.device)
    d_out = torch.randn(T, H, V, dtype=q.dtype, device=q.device)

    def step():
        bound.launch(tensors, stream)
        frost_bwd(q=q, k=k, v=v, g=g, beta=beta, w=None, cu_seqlens=cu, dO=d_out, initial_state=None,
                  d_final_state=None, workspace=ws, stream=stream, state_checkpoints=ckpt, values=u,
                  **flags, **grads)
    return step


def bench_fla_fwd_bwd(family: str):
    def run(inp, reps):
        fn, leaves = _fla_call(inp, family)
        leaves = [x.requires_grad_(True) for x in leaves]
        q, v = inp[0], inp[2]
        d_out = torch.randn(1, q.shape[0], q.shape[1], v.shape[2], dtype=q.dtype, device=q.device)
        cu64 = inp[5].long()

        def step():
            o = fn(*leaves, cu_seqlens=cu64)[0]
            torch.autograd.grad(o, leaves, d_out)
        return cuda_median_ms(step, reps)
    return run


CASES_BWD = [
    ("GDN fwd+bwd", False, [
        ("op FROST", lambda inp, reps: cuda_median_ms(op_fwd_bwd_runner(inp, "gdn"), reps)),
        ("op FROST checkpoints", lambda inp, reps: cuda_median_ms(
            op_fwd_bwd_runner(inp, "gdn", checkpoints=True), reps)),
        ("FROST kernels", lambda inp, reps: cuda_median_ms(frost_kernels_fwd_bwd_runner(inp, False), reps)),
        ("FROST kernels ckpt+U", lambda inp, reps: cuda_median_ms(
            frost_kernels_fwd_bwd_runner(inp, False, values=True), reps)),
        ("op cuTile", lambda inp, reps: cuda_median_ms(op_fwd_bwd_runner(inp, "gdn", "gdn_cutile"), reps)),
        ("cuTile", lambda inp, reps: cuda_median_ms(cutile_fwd_bwd_runner(inp, False), reps)),
        ("FLA 0.6", bench_fla_fwd_bwd("gdn"))]),
    ("KDA fwd+bwd", True, [
        ("op FROST", lambda inp, reps: cuda_median_ms(op_fwd_bwd_runner(inp, "kda"), reps)),
        ("op FROST checkpoints", lambda inp, reps: cuda_median_ms(
            op_fwd_bwd_runner(inp, "kda", checkpoints=True), reps)),
        ("FROST kernels", lambda inp, reps: cuda_median_ms(frost_kernels_fwd_bwd_runner(inp, True), reps)),
        ("FROST kernels ckpt+U", lambda inp, reps: cuda_median_ms(
            frost_kernels_fwd_bwd_runner(inp, True, values=True), reps)),
        ("op cuTile", lambda inp, reps: cuda_median_ms(op_fwd_bwd_runner(inp, "kda", "kda_cutile"), reps)),
        ("cuTile", lambda inp, reps: cuda_median_ms(cutile_fwd_bwd_runner(inp, True), reps)),
        ("FLA 0.6", bench_fla_fwd_bwd("kda"))]),
    ("GDN-2 fwd+bwd", True, [
        ("op FROST", lambda inp, reps: cuda_median_ms(op_fwd_bwd_runner(inp, "gdn2"), reps)),
        ("op FROST checkpoints", lambda inp, reps: cuda_median_ms(
            op_fwd_bwd_runner(inp, "gdn2", checkpoints=True), reps)),
        ("FLA 0.6", bench_fla_fwd_bwd("gdn2"))]),
]

CASES = [
    ("GDN fwd", False, [("op FROST", op_fwd("gdn")), ("FROST", frost_fwd(False)), ("cuTile", cutile_fwd(False)),
                        ("FLA 0.6", bench_fla_fwd("gdn"))]),
    ("KDA fwd", True, [("op FROST", op_fwd("kda")), ("FROST", frost_fwd(True)), ("cuTile", cutile_fwd(True)),
                       ("FLA 0.6", bench_fla_fwd("kda"))]),
    ("GDN-2 fwd", True, [("op FROST", op_fwd("gdn2")), ("FLA 0.6", bench_fla_fwd("gdn2"))]),
]


def peer_versions() -> str:
    """The versions the peer columns ran with (FLA's gated backward needs Triton >= 3.7.1
    on Hopper; tools/gpu/triton_kit.sh)."""
    from importlib import metadata
    found = []
    for dist in ("fla-core", "triton"):
        try:
            found.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            found.append(f"{dist} not installed")
    return ", ".join(found)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--seqs", type=int, default=8)
    p.add_argument("--len", type=int, default=4096)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--cases", default="", help="only cases whose name contains this text")
    p.add_argument("--impl", default="", help="only implementations whose name contains this text "
                   "(e.g. FROST: the A/B runs of a kernel switch, without the peers' compile time)")
    p.add_argument("--fwd-only", action="store_true", help="only the forward cases")
    p.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16",
                   help="q, k, v (and O) dtype; the peers that refuse it report the error in their row")
    p.add_argument("--frost-fwd-kernel", default="product",
                   help="FROST forward layer of every forward call, training ones included (module docstring)")
    a = p.parse_args()
    print(f"GPU: {torch.cuda.get_device_name()}; {a.seqs} x {a.len} tokens, {a.heads} heads, "
          f"K = V = {a.dim}, {a.dtype}; median of {a.reps}")
    print("peers:", peer_versions())
    import sys
    from pathlib import Path

    # the test tooling's knobs (plain Python), each from its environment variable
    # (frost_fwd_experiments: FROST_FWD_GRAM, _DECAY, _WS_REGS, _ROWS, _STORES;
    # frost_bwd_experiments: FROST_BWD_*, every FROST backward of the run; a bad value is a
    # ValueError naming it); unset, the product's picks
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engines_frost" / "tests"))
    import frost_bwd_experiments as fbx
    import frost_fwd_experiments as fx

    bwd_variants = fbx.requested()
    if bwd_variants != fbx.BwdVariants():
        print(f"FROST backward: {bwd_variants.label}, forced by the test tooling on every backward (the A/B "
              f"against a run without FROST_BWD_*, the product's picks)")
    with fbx.use_bwd_variants(bwd_variants):
        run_forward_knobs(a, fx)


def run_forward_knobs(a, fx):
    """run(a), its FROST forwards on the tooling's forward layer and knobs where any is set."""
    gram, decay = fx.gram_requested(), fx.decay_requested()
    ws_regs, rows, stores = fx.ws_regs_requested(decay), fx.rows_requested(), fx.stores_requested()
    if (a.frost_fwd_kernel == fx.PRODUCT and gram == fx.GRAMS[0] and decay is None and not ws_regs
            and rows == fx.ROWS[0] and stores == fx.STORES[0]):
        run(a)
        return
    print(f"FROST forward: {a.frost_fwd_kernel}, Gram {gram}, decays {decay}, registers {ws_regs or 'default'}, "
          f"rows {rows}, stores {stores}, forced by the test tooling on every forward, training ones included "
          f"(the A/B against a run without --frost-fwd-kernel / FROST_FWD_GRAM / FROST_FWD_DECAY / "
          f"FROST_FWD_WS_REGS / FROST_FWD_ROWS / FROST_FWD_STORES, the product's picks)")
    with fx.use_kernel(a.frost_fwd_kernel, training=True, gram=gram, decay=decay):
        run(a)


def run(a):
    global _inner
    rows = []
    for case, kda, candidates in CASES + ([] if a.fwd_only else CASES_BWD):
        if a.cases not in case:
            continue
        inp = make_inputs(a.seqs, a.len, a.heads, a.dim, a.dim, kda, io=getattr(torch, a.dtype))
        for name, fn in candidates:
            if a.impl not in name:
                continue
            cells = []
            for inner in (1, BACK_TO_BACK):
                _inner = inner
                try:
                    cells.append(f"{fn(inp, a.reps):.3f} ms")
                except Exception as e:  # report and continue: one broken peer must not hide the rest
                    cells.append(f"error: {type(e).__name__}: {str(e)[:120]}")
            rows.append((case, name, *cells))
            print(f"{case:11s} {name:10s} per call {cells[0]:>10s}  back-to-back {cells[1]:>10s}", flush=True)
    print(f"\n| case | implementation | median per call | median back-to-back (x{BACK_TO_BACK}) |\n|---|---|---|---|")
    for r in rows:
        print(f"| {' | '.join(r)} |")
    if rows:
        print_floors(rows, a)


def case_family(case: str) -> tuple[str, bool]:
    """(floors.py family, backward) of a case name such as "GDN-2 fwd+bwd"."""
    name = case.split()[0]
    return {"GDN": "gdn", "KDA": "kda", "GDN-2": "gdn2"}[name], "fwd+bwd" in case


def print_floors(rows, a):
    """Each timed row's back-to-back time against the case's byte and FLOP floors
    (floors.py) at the copy and bf16 matmul rates measured here, in this process; a row
    that failed (its error is in the table above) is left out."""
    import floors

    rates = floors.measured_rates()
    print(f"\nFloors on this GPU (copy {rates[0] / 1e12:.2f} TB/s, bf16 matmul {rates[1] / 1e12:.0f} TFLOP/s, "
          f"measured here): the floor's share of the measured time")
    print("| case | implementation | back-to-back | byte floor | share | FLOP floor | share |\n|---|---|---|---|---|---|---|")
    for case, name, _, b2b in rows:
        try:
            t = float(b2b.split()[0])
        except ValueError:
            continue
        family, backward = case_family(case)
        byte_ms, flop_ms = floors.floor_ms(family, [a.len] * a.seqs, a.heads, a.dim, a.dim, backward, rates)
        print(f"| {case} | {name} | {b2b} | {byte_ms:.3f} ms | {byte_ms / t:.0%} | {flop_ms:.3f} ms | "
              f"{flop_ms / t:.0%} |")


if __name__ == "__main__":
    main()
