"""Host cost of launching one FROST forward kernel, by calling convention (a benchmark
script, not a test): where the engine's ~130 us per call on the H200 host goes.

Times, on the host (perf_counter around the call; the GPU queue drained between batches,
outside the timings), for one small GDN config:
  checked   fwd.frost_fwd: every operand check, config, compile-cache lookup, pointers
  bound     a BoundLaunch (what a caller repeats): pointers from ArgPacker, then the call
  per calling convention (compiled_kernel.py; "tvm" needs the apache-tvm-ffi wheel):
  args + call   the argument list built from the tensors, then the call
  call          the compiled function alone, arguments built beforehand
Run on the GPU machine from the repo root (CuTe DSL importable):
  PYTHONPATH=$(python3 tools/pythonpath.py) python3 bench/frost_call_overhead.py
"""
from __future__ import annotations

import argparse
import math
import statistics
import time

import torch

from tests.reference.inputs import InputConfig, make_inputs
from tests.reference.preprocess import Family


def host_median_us(fn, iters: int, batch: int = 50) -> float:
    times = []
    while len(times) < iters:
        for _ in range(min(batch, iters - len(times))):
            start = time.perf_counter_ns()
            fn()
            times.append(time.perf_counter_ns() - start)
        torch.cuda.synchronize()
    return statistics.median(times) / 1e3


def main() -> None:
    from cudnn.linear_attention.frost.kernels import fwd
    from cudnn.linear_attention.frost.kernels.compile_kernel import preferred_ffi

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=2000)
    args = parser.parse_args()
    cfg_in = InputConfig(family=Family.GDN, seq_lens=(256, 256), H=8, K=128, V=128,
                         dtype=torch.bfloat16, device="cuda")
    x = make_inputs(cfg_in, 0)
    out = torch.empty(cfg_in.T, 8, 128, dtype=torch.bfloat16, device="cuda")
    ht = torch.empty(2, 8, 128, 128, dtype=torch.float32, device="cuda")
    scale = 1.0 / math.sqrt(128)
    kw = dict(q=x.q, k=x.k, v=x.v, g=x.g, beta=x.beta, w=None, cu_seqlens=x.cu_seqlens, out=out,
              initial_state=None, final_state=ht, scale=scale, use_l2norm=False,
              gate_per_channel=False, beta_per_channel=False, stream=None)
    stream = torch.cuda.current_stream()
    bound = fwd.frost_fwd(**{**kw, "stream": stream}, bind=True)
    tensors = dict(q=x.q, k=x.k, v=x.v, g=x.g, beta=x.beta, w=None, cu_seqlens=x.cu_seqlens,
                   out=out, initial_state=None, final_state=ht)
    print(f"GPU: {torch.cuda.get_device_name()}; GDN 2 x 256 tokens, 8 heads, K = V = 128; "
          f"host time per launch, median of {args.iters}; engine convention {preferred_ffi()!r}")
    rows = [("checked (frost_fwd)", lambda: fwd.frost_fwd(**{**kw, "stream": stream})),
            ("bound (BoundLaunch)", lambda: bound.launch(tensors, stream))]
    arch = fwd.device_arch(x.q.device)
    for ffi in ("cute", "tvm"):
        try:
            kernel = fwd._compiled(bound.config, arch, ffi)
        except Exception as e:  # e.g. no apache-tvm-ffi here
            print(f"{ffi}: not timed ({type(e).__name__}: {str(e)[:300]})")
            continue
        prebuilt = kernel.args(tensors, bound.T, bound.N, scale, stream)
        rows.append((f"{ffi}: args + call", lambda k=kernel: k.launch(tensors, bound.T, bound.N, scale, stream)))
        rows.append((f"{ffi}: call (prebuilt args)", lambda k=kernel, a=prebuilt: k(*a)))
    for name, fn in rows:
        print(f"  {name:26s} {host_median_us(fn, args.iters):8.1f} us", flush=True)


if __name__ == "__main__":
    main()
