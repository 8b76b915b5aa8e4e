"""`python -m cudnn bench OP... [shape flags]`: time the public ops, and FLA's beside them.

Times `gated_delta_net` (gdn), `kimi_delta_attention` (kda) and `gated_delta_net_v2`
(gdn2) as a user calls them, forward only or (`--backward`) forward plus autograd's
backward, on one CUDA device: the median over `--reps` samples of CUDA-event time for
`--inner` back-to-back calls, divided by --inner. Where flash-linear-attention is
installed, its chunked function for the same family runs on the same inputs (its
[1, T, heads, dim] layout); a family or direction FLA lacks, or refuses on this GPU, is
reported with the reason. The first call of each op compiles or loads its kernels
(logged) and is not timed.

    python -m cudnn bench gdn kda --seqs 8 --seq_len 4096 --heads 16 --head_dim 128
    python -m cudnn bench gdn --backward
"""
from __future__ import annotations

import importlib
import logging
import statistics
from collections.abc import Callable, Sequence

from absl import app, flags

from cudnn.cli import shapes

REPS = flags.DEFINE_integer("reps", 30, "timed samples per op")
INNER = flags.DEFINE_integer("inner", 10, "back-to-back calls per sample")
DEVICE = flags.DEFINE_integer("device", 0, "CUDA device index")

FUNCTIONS = {"gdn": "gated_delta_net", "kda": "kimi_delta_attention",
             "gdn2": "gated_delta_net_v2"}
#: flash-linear-attention's chunked function per family (module, name)
FLA_FUNCTIONS = {"gdn": ("fla.ops.gated_delta_rule", "chunk_gated_delta_rule"),
                 "kda": ("fla.ops.kda", "chunk_kda"), "gdn2": ("fla.ops.gdn2", "chunk_gdn2")}


def cuda_median_ms(step: Callable[[], object], reps: int, inner: int, warmup: int = 1) -> float:
    """Median over reps of (CUDA-event ms of `inner` back-to-back steps) / inner, after
    `warmup` untimed steps (the first compiles or loads kernels)."""
    import torch

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            step()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / inner)
    return statistics.median(samples)


def _step(fn: Callable, args: dict, leaves: list, backward: bool) -> Callable[[], object]:
    import torch

    if not backward:
        return lambda: fn(**args)

    def step():
        o = fn(**args)[0]
        torch.autograd.grad(o, leaves, torch.ones_like(o))
    return step


def our_step(op: str, shape: shapes.Shape, device, backward: bool) -> Callable[[], object]:
    from cudnn.linear_attention import ops

    args = shapes.torch_inputs(op, shape, device)
    leaves = [args[n].requires_grad_(True) for n in ("q", "k", "v")] if backward else []
    call = dict(args, output_final_state=shape.final_state, use_qk_l2norm_in_kernel=shape.l2norm)
    return _step(getattr(ops, FUNCTIONS[op]), call, leaves, backward)


def fla_step(op: str, shape: shapes.Shape, device, backward: bool) -> Callable[[], object]:
    """FLA's function on the same inputs, or raises ImportError / AttributeError."""
    module, name = FLA_FUNCTIONS[op]
    fn = getattr(importlib.import_module(module), name)
    args = {k: v.unsqueeze(0) if k != "cu_seqlens" else v.long()
            for k, v in shapes.torch_inputs(op, shape, device).items()}
    leaves = [args[n].requires_grad_(True) for n in ("q", "k", "v")] if backward else []
    call = dict(args, output_final_state=shape.final_state, use_qk_l2norm_in_kernel=shape.l2norm)
    return _step(fn, call, leaves, backward)


def main(argv: Sequence[str]) -> None:
    ops = list(argv[1:])
    unknown = [op for op in ops if op not in shapes.LINEAR_ATTENTION]
    if not ops or unknown:
        raise app.UsageError(f"name the ops to time from {shapes.LINEAR_ATTENTION}"
                             + (f" (unknown: {unknown})" if unknown else ""))
    import torch

    if not torch.cuda.is_available():
        raise app.UsageError("no CUDA device is visible: bench times GPU kernels")
    logging.getLogger("cudnn").setLevel(logging.INFO)
    device = torch.device("cuda", DEVICE.value)
    shape = shapes.shape_from_flags()
    backward = shapes.BACKWARD.value
    what = "forward + backward" if backward else "forward"
    print(f"{torch.cuda.get_device_name(device)}: {what}, {shape.describe()}; median of "
          f"{REPS.value} x {INNER.value} calls", flush=True)
    for op in ops:
        ms = cuda_median_ms(our_step(op, shape, device, backward), REPS.value, INNER.value)
        line = f"  {op:<5} {FUNCTIONS[op]:<22} {ms:8.3f} ms"
        try:
            fla = cuda_median_ms(fla_step(op, shape, device, backward), REPS.value, INNER.value)
            line += f"   FLA {fla:8.3f} ms ({fla / ms:.2f}x)"
        except (ImportError, AttributeError) as e:
            line += f"   FLA: not available ({type(e).__name__}: {e})"
        except Exception as e:  # FLA refuses some GPU / Triton pairs: report, keep timing ours
            line += f"   FLA: failed ({type(e).__name__}: {str(e)[:120]})"
        print(line, flush=True)
