"""Bounds of the FROST backward's chain kernel (GDN, the four-role chain on raw rows): its
math warpgroup's M, diagonal inverses and A left out ("inverse": what a chain reading A
saved by the forward would run; P kept) or its whole Gram and solves ("gram"), timed beside
the product's chain at the bench shape, each alone (`frost_bwd(stages=("chain",))`, the
states stage's output left in the workspace). A benchmark, not a test: the left-out
variants' results are wrong by construction. The variants are compiled here and never go
to the kernel store (they would be stored under the product's key).

    PYTHONPATH=$(python3 tools/pythonpath.py):bench python3 bench/frost_bwd_chain_bounds.py \
        [--variants full inverse gram] [--regs 208,72,24] [--reps 30]

--regs: the variants' (chain, math, copies) setmaxnreg split instead of the product's.
Shape: 8 x 4096 tokens, 16 heads, K = V = 128, bf16 (bench_linear_attention.py's).
"""
from __future__ import annotations

import argparse

from bench_linear_attention import cuda_median_ms
from frost_bwd_profile import bench_shape_backward


def variant_kernel(key, skip: tuple[str, ...], regs: tuple[int, ...]):
    """The chain config's kernel class with skip_stages (and a register split) set,
    compiled for the key's arch and calling convention."""
    from cudnn.linear_attention.frost.kernels import bwd_compile

    cfg, arch, ffi = key
    base = bwd_compile.bwd_kernel_for(cfg)
    attrs = {"skip_stages": skip}
    if regs:
        attrs.update(consumer_regs=regs[0], math_regs=regs[1], copy_regs=regs[2])
    cls = type(f"{base.__name__}Skip{''.join(s.title() for s in skip)}", (base,), attrs)
    product = bwd_compile.bwd_kernel_for
    bwd_compile.bwd_kernel_for = lambda c: cls if c == cfg else product(c)
    try:
        return bwd_compile.compile_bwd(cfg, arch, ffi=ffi)
    finally:
        bwd_compile.bwd_kernel_for = product


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", nargs="+", default=["full", "inverse", "gram"])
    ap.add_argument("--regs", default="", help="chain,math,copies for the variants")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    import torch

    from cudnn.linear_attention.frost.kernels import bwd
    from la_frost_bwd_smoke import run_bwd

    regs = tuple(int(r) for r in args.regs.split(",")) if args.regs else ()
    x, dO, out, ws = bench_shape_backward("gdn")
    keys = [k for k in bwd._cache if k[0].stage == "chain"]
    if len(keys) != 1:
        raise SystemExit(f"expected one chain kernel in the process, found {len(keys)}")
    key = keys[0]
    product = bwd._cache[key]
    print(f"GPU: {torch.cuda.get_device_name()}; GDN backward chain, 8 x 4096, 16 heads, K = V = 128, bf16; "
          f"median of {args.reps}")
    for name in args.variants:
        skip = () if name == "full" else tuple(name.split("+"))
        bwd._cache[key] = product if not skip else variant_kernel(key, skip, regs)
        ms = cuda_median_ms(lambda: run_bwd(x, dO, None, False, out, ws, stages=("chain",)), args.reps, warmup=3)
        label = "full" if not skip else "without " + "+".join(skip) + (f" at {args.regs}" if regs else "")
        print(f"chain {label:36s} {ms:7.3f} ms {ms / 64 * 1e3:6.2f} us/chunk", flush=True)
    bwd._cache[key] = product
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
