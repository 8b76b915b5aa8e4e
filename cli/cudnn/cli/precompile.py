"""`python -m cudnn precompile OP... [shape flags]`: fill the kernel caches ahead of time.

With a GPU (the default, `--devices 0,1` for several): runs each op (gdn, kda, gdn2)
through its public torch function at the given shape on each device, forward and (with
`--backward`) backward, so whatever engine the planner picks compiles its kernels into its
cache (FROST's and cuTile's, docs/CACHING.md); later processes load them in
milliseconds.

Without a GPU (`--arch sm_90a`, e.g. in a container build): cross-compiles the FROST
kernels those calls launch for that arch, in the CuTe DSL's own calling convention with
host code for any x86-64 CPU, using `--jobs` processes. (cuTile kernels compile only where
a GPU is visible.) Each finished kernel prints a progress line.

Both also fill the cache with the FROST recurrent (decode) kernel that serving calls
launch (`--decode`, on by default; `--nodecode` skips it): for each op, state pools read
through state_indices and written in place, K = V in {64, 128} (and the shape's own K, V),
float32 and bfloat16 states, both V tiles (small and large batches), at the shape's heads,
dtype and --l2norm: 8 kernels per op, about a second each.

Long sequences on few heads run as spans side by side (torch_ops/README.md, "Long
sequences on few heads"): with a GPU, a shape that splits (e.g. `--seqs 1 --seq_len
32768 --heads 16`) compiles the span split's kernels too, as the call runs them. `--arch`
compiles them too where the call would split on that arch: the span length is the op's
own choice (CUDNN_LA_SPAN_TOKENS when set, else its automatic rule, the training rule
with `--backward` unless CUDNN_LA_SPAN_BACKWARD=0) on the SM count of the arch's flagship
GPU (sm_90a: 132, the H100 SXM / H200; `--sms` for another part, e.g. 114 for the H100
PCIe), and the kernels are the span summary's two passes (FROST_SUMMARY_NO_OUTPUT read as
the summary plan reads it), the forward over the spans and, with `--backward`, the
backward summary's chain stage and the backward over the spans' stages.

    python -m cudnn precompile gdn kda --seqs 8 --seq_len 4096 --backward
    python -m cudnn precompile gdn --arch sm_90a --jobs 8 --heads 16 --head_dim 128
    python -m cudnn precompile gdn --arch sm_90a --seqs 1 --seq_len 32768 --backward
"""
from __future__ import annotations

import concurrent.futures
import logging
import multiprocessing
import os
import time
from collections.abc import Sequence

from absl import app, flags

from cudnn.cli import shapes

DEVICES = flags.DEFINE_list("devices", None, "CUDA device indices to compile for (default: all)")
ARCH = flags.DEFINE_string("arch", None, "cross-compile FROST kernels for this arch (e.g. "
                           "sm_90a) without running anything: no GPU needed")
JOBS = flags.DEFINE_integer("jobs", os.cpu_count() or 1, "compile processes for --arch")
SMS = flags.DEFINE_integer("sms", None, "--arch: SM count of the GPU the span split's "
                           "automatic rule assumes (default: the arch's flagship, sm_90a: 132, "
                           "the H100 SXM / H200)")
#: the SM count of each --arch's flagship part, for the span split's automatic rule
FLAGSHIP_SMS = {"sm_90a": 132}
DECODE = flags.DEFINE_bool("decode", True, "also the recurrent (decode) kernels of serving "
                           "calls: pools, K = V in {64, 128}, fp32 and bf16 states")
#: K = V of the decode kernels precompiled besides the shape's own (kernels/config.HEAD_DIMS)
DECODE_HEAD_DIMS = (64, 128)

FUNCTIONS = {"gdn": "gated_delta_net", "kda": "kimi_delta_attention",
             "gdn2": "gated_delta_net_v2"}


def run_on_devices(ops: Sequence[str], shape: shapes.Shape, devices: Sequence[int],
                   backward: bool) -> None:
    import torch

    from cudnn.linear_attention import ops as la_ops

    jobs = [(op, d) for d in devices for op in ops]
    for i, (op, index) in enumerate(jobs, 1):
        device = torch.device("cuda", index)
        args = shapes.torch_inputs(op, shape, device)
        if backward:
            for name in ("q", "k", "v"):
                args[name].requires_grad_(True)
        start = time.perf_counter()
        fn = getattr(la_ops, FUNCTIONS[op])
        o, _ = fn(**args, output_final_state=shape.final_state, use_qk_l2norm_in_kernel=shape.l2norm)
        if backward:
            o.float().sum().backward()
        torch.cuda.synchronize(device)
        print(f"[{i}/{len(jobs)}] {op} on cuda:{index} ({torch.cuda.get_device_name(device)})"
              f"{' fwd+bwd' if backward else ' fwd'}: {time.perf_counter() - start:.1f} s",
              flush=True)


def frost_configs(ops: Sequence[str], shape: shapes.Shape, backward: bool) -> list:
    """The FROST kernel configs the public ops launch for `ops` at `shape` (forward, and
    the three backward stages), derived from CPU tensors by the launchers' own checks."""
    from cudnn.linear_attention.frost.kernels import frost_configs as derive

    found = []
    for op in ops:
        args = shapes.torch_inputs(op, shape, "cpu")
        found += derive.call_configs(op, args, final_state=shape.final_state,
                                     l2norm=shape.l2norm, backward=backward)
    return list(dict.fromkeys(found))


def split_span(shape: shapes.Shape, sms: int, backward: bool) -> int | None:
    """The span length the public ops split a call at `shape` into on a GPU of `sms` SMs,
    or None when it runs unsplit: the op's own rule (_span_split.py, _op_factory.py's
    `_eager_forward`): CUDNN_LA_SPAN_TOKENS when set, else `auto_span_tokens` with the
    training rule for an autograd call whose backward splits (`backward`, unless
    CUDNN_LA_SPAN_BACKWARD=0; training checkpoints are off by default), else the forward's."""
    from cudnn.linear_attention.ops import _span_split as ss

    forced = ss.forced_span_tokens()
    if forced is not None:
        return forced if forced > 0 and shape.seqs >= 1 and shape.T >= 1 else None
    training = backward and ss.backward_split_enabled()
    return ss.auto_span_tokens(shape.T, shape.seqs, shape.HO, sms,
                               ss.MIN_GAIN_TRAINING if training else ss.MIN_GAIN)


def split_configs(ops: Sequence[str], shape: shapes.Shape, backward: bool,
                  sms: int) -> tuple[int | None, list]:
    """(span length, the FROST kernel configs of `ops`' calls at `shape` run as spans on
    a GPU of `sms` SMs: frost_configs.split_configs), or (None, []) when they run unsplit.
    With `backward` the backward's split stages only where the backward splits."""
    from cudnn.linear_attention.frost.kernels import frost_configs as derive
    from cudnn.linear_attention.ops import _span_split as ss
    from cudnn.linear_attention.ops._span_maps import span_count_bound

    span = split_span(shape, sms, backward)
    if span is None:
        return None, []
    found = []
    for op in ops:
        args = shapes.torch_inputs(op, shape, "cpu")
        found += derive.split_configs(op, args, spans=span_count_bound(shape.T, shape.seqs, span),
                                      final_state=shape.final_state, l2norm=shape.l2norm,
                                      backward=backward and ss.backward_split_enabled())
    return span, list(dict.fromkeys(found))


def decode_configs(ops: Sequence[str], shape: shapes.Shape) -> list:
    """The recurrent (decode) kernel configs of serving calls of `ops` (module docstring)."""
    import dataclasses

    from cudnn.linear_attention.frost.kernels import frost_configs as derive
    from cudnn.linear_attention.frost.kernels.config import HEAD_DIMS

    dims = [(d, d) for d in DECODE_HEAD_DIMS]
    if shape.K in HEAD_DIMS and shape.V in HEAD_DIMS:
        dims.append((shape.K, shape.V))
    found = []
    for op in ops:
        for K, V in dict.fromkeys(dims):
            one_token = dataclasses.replace(shape, seqs=1, seq_len=1, K=K, V=V)
            found += derive.serving_configs(op, shapes.torch_inputs(op, one_token, "cpu"),
                                            l2norm=shape.l2norm)
    return list(dict.fromkeys(found))


def load_on_devices(configs: list, devices: Sequence[int]) -> None:
    """Load or compile each decode config for each device's arch (the launcher's own path
    into the cache, in this host's calling convention)."""
    import torch

    from cudnn.linear_attention.frost.kernels import kernel_store
    from cudnn.linear_attention.frost.kernels.decode import compiled_decode
    from cudnn.linear_attention.frost.kernels.fwd import device_arch

    arches = list(dict.fromkeys(device_arch(torch.device("cuda", d)) for d in devices))
    jobs = [(cfg, arch) for arch in arches for cfg in configs]
    for i, (cfg, arch) in enumerate(jobs, 1):
        start = time.perf_counter()
        compiled_decode(cfg, arch)
        print(f"[{i}/{len(jobs)}] {kernel_store.describe(cfg)} for {arch}: "
              f"{time.perf_counter() - start:.1f} s", flush=True)


def _compile_one(cfg_blob: bytes, arch: str) -> float:
    """Worker: cross-compile one config and add it to the kernel cache."""
    import pickle

    from cudnn.linear_attention.frost.kernels import frost_configs as derive

    start = time.perf_counter()
    derive.compile_into_cache(pickle.loads(cfg_blob), arch)
    return time.perf_counter() - start


def cross_compile(configs: list, arch: str, jobs: int) -> int:
    """Compile every config missing from the cache; returns the number of failures."""
    import pickle

    from cudnn.linear_attention.frost.kernels import frost_configs as derive
    from cudnn.linear_attention.frost.kernels import kernel_store

    store = kernel_store.active_store()
    if store is None:
        raise app.UsageError(f"the FROST kernel cache is off ({kernel_store.STORE_ENV}); "
                             "set it to a folder to precompile into")
    todo = [c for c in configs if not derive.is_cached(store, c, arch)]
    print(f"FROST: {len(configs)} kernel configs, {len(configs) - len(todo)} already in "
          f"{store.root}; compiling {len(todo)} for {arch} with {jobs} process(es)", flush=True)
    failures = 0
    ctx = multiprocessing.get_context("spawn")  # fresh interpreters: no MLIR state crosses a fork
    with concurrent.futures.ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=ctx) as pool:
        futures = {pool.submit(_compile_one, pickle.dumps(c), arch): c for c in todo}
        for i, fut in enumerate(concurrent.futures.as_completed(futures), 1):
            what = kernel_store.describe(futures[fut])
            try:
                print(f"[{i}/{len(todo)}] {what}: {fut.result():.1f} s", flush=True)
            except Exception as e:  # report every kernel, then fail
                failures += 1
                print(f"[{i}/{len(todo)}] {what}: FAILED: {type(e).__name__}: {e}", flush=True)
    return failures


def frost_arches() -> list[str]:
    """The --arch values FROST has kernels for: the targets its launches compile for."""
    from cudnn.linear_attention.frost.runtime_probe import KERNEL_ARCHS

    return [f"sm_{sm}{'a' if sm >= 90 else ''}" for sm in sorted(KERNEL_ARCHS)]


def main(argv: Sequence[str]) -> None:
    ops = list(argv[1:])
    unknown = [op for op in ops if op not in shapes.LINEAR_ATTENTION]
    if not ops or unknown:
        raise app.UsageError(f"name the ops to precompile from {shapes.LINEAR_ATTENTION}"
                             + (f" (unknown: {unknown})" if unknown else ""))
    logging.getLogger("cudnn").setLevel(logging.INFO)  # the compile lines
    shape = shapes.shape_from_flags()
    print(f"precompile {' '.join(ops)}: {shape.describe()}", flush=True)
    start = time.perf_counter()
    if ARCH.value:
        if ARCH.value not in frost_arches():
            raise app.UsageError(f"--arch: expected one of {frost_arches()} (the GPU targets "
                                 f"FROST has kernels for), got {ARCH.value!r}")
        configs = frost_configs(ops, shape, shapes.BACKWARD.value)
        sms = SMS.value if SMS.value is not None else FLAGSHIP_SMS.get(ARCH.value)
        if sms is None or sms < 1:
            raise app.UsageError(f"--sms: the SM count of the {ARCH.value} GPU to precompile "
                                 f"for (a positive integer), got {SMS.value}")
        span, split = split_configs(ops, shape, shapes.BACKWARD.value, sms)
        if span is not None:
            extra = [c for c in split if c not in configs]
            print(f"span split: on {sms} SMs this shape runs as spans of {span} tokens "
                  f"(torch_ops/README.md); its kernels add {len(extra)} config(s)", flush=True)
            configs += extra
        if DECODE.value:
            configs += decode_configs(ops, shape)
        failures = cross_compile(configs, ARCH.value, JOBS.value)
        if failures:
            raise SystemExit(f"{failures} kernel(s) failed to compile")
    else:
        import torch

        if not torch.cuda.is_available():
            raise app.UsageError("no CUDA device is visible: pass --arch (e.g. sm_90a) to "
                                 "cross-compile the FROST kernels instead")
        devices = [int(d) for d in DEVICES.value] if DEVICES.value else \
            list(range(torch.cuda.device_count()))
        run_on_devices(ops, shape, devices, shapes.BACKWARD.value)
        if DECODE.value:
            load_on_devices(decode_configs(ops, shape), devices)
    print(f"done in {time.perf_counter() - start:.1f} s", flush=True)

