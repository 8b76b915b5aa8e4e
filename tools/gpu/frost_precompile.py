#!/usr/bin/env python3
"""Cross-compile every FROST forward kernel the GPU suites launch, into a kernel store.

Run here (no GPU needed; nvidia-cutlass-dsl and CPU torch installed), from the repo root:
    python3 tools/gpu/frost_precompile.py        # -> .frostcache/ and .kit/frostcache.tar.xz
then carry .kit/frostcache.tar.xz to the GPU machine and run `tools/gpu/gpu_suite.sh frostcache
...`, which unpacks it and points FROST_KERNEL_CACHE at it (kernels/kernel_store.py): the
suites then load each kernel instead of compiling it.

Which configs: each suite's own case table, turned into tensors on the CPU with the
suite's input builder and passed, wired as the suite wires its frost_fwd call, through
fwd.check_operands, which derives the FrostFwdConfig (gate_align16 included, from the
real pointer) exactly as a launch does; for kernel layers other than the product's
(--smoke-algorithms, --engine-algorithms: the test tooling's, e.g. a forced pipelined layer) the config the
tooling launches for it (engines_frost/tests/frost_fwd_experiments.py):
  frostmatrix  tests/numerics/test_la_frost_engines.py  SHAPES x FAMILY_L2 x h0, bf16 states
  frostsmoke   tests/numerics/la_frost_smoke.py          CASES x families x --smoke-algorithms,
                                                          and its 8x4096 timing shapes
  torchops     tests/torch_ops/ops_gpu_test.py CASES (bf16 ones also as training calls: with
               write_checkpoints), its GDN-2 cases, op_overhead's GPU shape
  bench        bench/bench_linear_attention.py           its default shape, GDN and KDA
  stagetimes   bench/frost_stage_times.py                its variants (also bench/cu_seqlens_cost.py's)
  cuseqlens    tests/numerics/test_cu_seqlens_safety.py  its one shape, GDN, KDA and GDN-2
  decode       tests/numerics/test_la_decode_gpu.py and bench/bench_decode.py: the
               recurrent (decode) kernel's configs, from the same tables, through
               decode.check_decode_operands with the flags the decode engine passes
Vector-gate configs are also built with gate_align16=False (a g that is a view at an odd
offset) unless --aligned-gates-only. Entries already in the store are kept; entries no
config needs are removed (unless --keep). The store's manifest.json lists every entry
with the suite cases that need it.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import dataclasses
import json
import multiprocessing
import os
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SUITES = ("frostmatrix", "frostsmoke", "torchops", "bench", "stagetimes", "cuseqlens", "decode")


def _use_repo_roots() -> None:
    """The checkout's source roots (tools/pythonpath.py), bench/, whose case tables the
    suites share, and engines_frost/tests (the tooling's kernel layers) first on sys.path."""
    sys.path.insert(0, str(REPO / "tools"))
    from pythonpath import paths
    for path in reversed([*paths(REPO), str(REPO / "bench"), str(REPO / "engines_frost" / "tests")]):
        if path not in sys.path:
            sys.path.insert(0, path)


# ---- which configs each suite launches ---------------------------------------------------

def _config_of(x, *, l2: bool, final_state_dtype, algorithm: str):
    """The config frost_fwd launches for a suite's inputs `x` (tests.reference.inputs
    Inputs or a namespace with the same tensors), with out and final_state allocated the
    way the suites allocate them: the product's FrostFwdConfig, or what the test tooling's
    use_kernel(algorithm) launches instead (frost_fwd_experiments.engine_config). The
    smoke's Gram / decay names (wgmmagram*, wgmmascaled*, wgmmawy*: la_frost_smoke.COMPARED) say their
    own knobs; every other name takes FROST_FWD_GRAM / FROST_FWD_DECAY's (and
    FROST_FWD_WS_REGS'), as use_kernel does."""
    import torch
    from cudnn.linear_attention.frost.kernels.fwd import check_operands
    from frost_fwd_experiments import decay_requested, engine_config, gram_requested, ws_regs_requested
    from tests.numerics.la_frost_smoke import COMPARED, kernel_knobs

    gram, decay = gram_requested(), decay_requested()
    if algorithm in COMPARED:
        algorithm, gram, decay = kernel_knobs(algorithm)

    T, HO, V, K = x.q.shape[0], max(x.q.shape[1], x.v.shape[1]), x.v.shape[2], x.q.shape[2]
    N = x.cu_seqlens.numel() - 1
    out = torch.empty(T, HO, V, dtype=x.q.dtype)
    ht = None if final_state_dtype is None else torch.empty(N, HO, V, K, dtype=final_state_dtype)
    h0 = getattr(x, "initial_state", None)
    product = check_operands(
        q=x.q, k=x.k, v=x.v, g=x.g, beta=x.beta, w=getattr(x, "w", None), cu_seqlens=x.cu_seqlens, out=out,
        initial_state=h0, final_state=ht, use_l2norm=l2, gate_per_channel=x.g.dim() == 3,
        beta_per_channel=x.beta.dim() == 3).config
    return engine_config(product, algorithm, gram=gram, decay=decay, ws_regs=ws_regs_requested())


def _frostmatrix(engine_algorithm):
    """test_la_frost_engines: test_forward (SHAPES x FAMILY_L2 x with/without h0, fp32
    states) and test_forward_with_bf16_states; every case writes final_state."""
    import torch

    from tests.numerics import test_la_frost_engines as m
    from tests.reference.inputs import InputConfig, make_inputs
    from tests.reference.preprocess import Family

    def case(name, family, lens, H, HK, HV, K, V, l2, h0_dtype):
        cfg = InputConfig(family=Family(family), seq_lens=tuple(lens), H=H, HK=HK, HV=HV, K=K, V=V,
                          dtype=torch.bfloat16, state_dtype=h0_dtype or torch.float32,
                          with_initial_state=h0_dtype is not None, use_qk_l2norm=l2)
        x = make_inputs(cfg, seed=0)
        return name, _config_of(x, l2=l2, final_state_dtype=h0_dtype or torch.float32,
                                algorithm=engine_algorithm)

    for sid, lens, H, HK, HV, K, V in m.SHAPES:
        for family, l2 in m.FAMILY_L2:
            for h0 in (None, torch.float32):
                yield case(f"{sid}-{family}-l2{int(l2)}-h0{int(h0 is not None)}", family, lens, H, HK, HV, K, V,
                           l2, h0)
    sid, lens, H, HK, HV, K, V = m.SHAPES[3]
    for family in ("gdn", "kda", "gdn2"):
        yield case(f"bf16_states-{family}", family, lens, H, HK, HV, K, V, True, torch.bfloat16)
    # _built_gdn (the execute-checks and bound-launch tests): no states, O only
    cfg = InputConfig(family=Family.GDN, seq_lens=(70, 5), H=16, HK=16, HV=16, K=64, V=64, dtype=torch.bfloat16)
    yield "built_gdn", _config_of(make_inputs(cfg, seed=0), l2=False, final_state_dtype=None,
                                  algorithm=engine_algorithm)


def _frostsmoke(algorithms):
    """la_frost_smoke: run_case over CASES x families x algorithms, and time_family's
    8 x 4096, 16 heads, K = V = 128 shape (no initial state, fp32 final state)."""
    import torch

    from tests.numerics import la_frost_smoke as m
    from tests.reference.inputs import InputConfig, make_inputs

    for family in m.FAMILIES.values():
        for case in m.CASES:
            cfg = InputConfig(family=family, seq_lens=case.seq_lens, H=case.H, HV=case.HV, K=case.K, V=case.V,
                              dtype=torch.bfloat16, state_dtype=case.state_dtype,
                              use_qk_l2norm=case.l2norm, with_initial_state=case.initial_state)
            x = make_inputs(cfg, seed=0)
            for algorithm in algorithms:
                yield f"{case.name}-{family.value}-{algorithm}", _config_of(
                    x, l2=case.l2norm, final_state_dtype=case.state_dtype if case.final_state else None,
                    algorithm=algorithm)
        for l2 in (False, True):
            x = make_inputs(InputConfig(family=family, seq_lens=(64,), H=16, K=128, V=128, dtype=torch.bfloat16,
                                        use_qk_l2norm=l2), seed=0)
            for algorithm in algorithms:
                yield f"time-{family.value}-l2{int(l2)}-{algorithm}", _config_of(
                    x, l2=l2, final_state_dtype=torch.float32, algorithm=algorithm)


def _torchops(engine_algorithm):
    """ops_gpu_test (CASES; the GDN-2 forward and backward tests' inputs) and op_overhead's
    GPU shape: the ops always write an fp32 final_state."""
    import torch

    from frost_fwd_experiments import PRODUCT
    from tests.reference.inputs import make_inputs
    from tests.reference.preprocess import Family
    from tests.torch_ops import op_overhead
    from tests.torch_ops import ops_gpu_test as m

    configs = dict(m.CASES)
    configs["gdn2_gva_h0_l2norm"] = m._gpu(Family.GDN2, (33, 31, 64, 1), H=2, HV=4, with_initial_state=True,
                                          use_qk_l2norm=True)
    configs["gdn2_T33_T31"] = m._gpu(Family.GDN2, (33, 31))
    for family in (Family.GDN, Family.KDA):
        configs[f"op_overhead-{family.value}"] = op_overhead._config(family, "cuda")
    for name, cfg in configs.items():
        x = make_inputs(dataclasses.replace(cfg, device="cpu"), seed=0)
        yield name, _config_of(x, l2=cfg.use_qk_l2norm, final_state_dtype=torch.float32,
                               algorithm=engine_algorithm)
        if cfg.dtype == torch.bfloat16:
            # a training call's forward also writes state checkpoints (torch_ops/README.md),
            # on the product's kernel whatever the run's version (engine_config)
            fwd = _config_of(x, l2=cfg.use_qk_l2norm, final_state_dtype=torch.float32, algorithm=PRODUCT)
            yield f"{name}-training", dataclasses.replace(fwd, write_checkpoints=True)
    # test_two_layer_gdn_model_trains: 2 heads of 128, l2norm in the kernel, o only
    model = dataclasses.replace(m._gpu(Family.GDN, (64,), H=2, use_qk_l2norm=True), device="cpu")
    yield "two_layer_gdn_model", _config_of(make_inputs(model, seed=0), l2=True, final_state_dtype=None,
                                            algorithm=engine_algorithm)
    # test_compile_fullgraph_matches_eager calls its cases without use_qk_l2norm_in_kernel
    for name in m.COMPILE_CASES:
        cfg = dataclasses.replace(m.CASES[name], device="cpu", use_qk_l2norm=False)
        yield f"compile-{name}", _config_of(make_inputs(cfg, seed=0), l2=False, final_state_dtype=torch.float32,
                                            algorithm=engine_algorithm)


def _bench(engine_algorithm):
    """bench_linear_attention's FROST rows at its default shape (16 heads, K = V = 128):
    no states, no l2norm (frost_fwd_runner)."""
    import bench_linear_attention as m

    for kda in (False, True):
        q, k, v, g, beta, cu = m.make_inputs(1, 64, 16, 128, 128, kda, dev="cpu")
        x = argparse.Namespace(q=q, k=k, v=v, g=g, beta=beta, cu_seqlens=cu)
        yield ("kda" if kda else "gdn"), _config_of(x, l2=False, final_state_dtype=None,
                                                    algorithm=engine_algorithm)


def _stagetimes(engine_algorithm):
    """bench/frost_stage_times.py: the bench shape with each stage compiled out in turn."""
    import frost_stage_times as m
    from tests.reference.preprocess import Family

    for family in (Family.GDN, Family.KDA):
        for skip, cfg in zip(m.VARIANTS, m.stage_configs(family, engine_algorithm, device="cpu")):
            yield f"{family.value}-skip-{'+'.join(skip) or 'none'}", cfg
    # --l2norm (gpu_suite's frostwgmmastages runs it for GDN: the rows stage with the q/k norms)
    for skip, cfg in zip(m.VARIANTS, m.stage_configs(Family.GDN, engine_algorithm, device="cpu", l2norm=True)):
        yield f"gdn-l2norm-skip-{'+'.join(skip) or 'none'}", cfg


def _cuseqlens(engine_algorithm):
    """test_cu_seqlens_safety: its one shape through the torch ops (no l2norm, fp32 final
    state), GDN, KDA and GDN-2 (whose op hands the kernel beta and w in q's dtype); a
    malformed table launches the same kernel as a good one."""
    import torch

    from tests.numerics import test_cu_seqlens_safety as m

    T, H, K, V = m.T, m.H, m.K, m.V
    for family in ("gdn", "kda", "gdn2"):
        x = argparse.Namespace(
            q=torch.randn(T, H, K).bfloat16(), k=torch.randn(T, H, K).bfloat16(),
            v=torch.randn(T, H, V).bfloat16(),
            g=torch.randn(T, H) if family == "gdn" else torch.randn(T, H, K),
            beta=torch.rand(T, H, K).bfloat16() if family == "gdn2" else torch.rand(T, H),
            w=torch.rand(T, H, V).bfloat16() if family == "gdn2" else None,
            cu_seqlens=torch.tensor(m.GOOD, dtype=torch.int32))
        yield family, _config_of(x, l2=False, final_state_dtype=torch.float32,
                                 algorithm=engine_algorithm)


def _decode_config(family, x, *, pool=None, slots=None, every=0, ck_dtype=None):
    """The FrostDecodeConfig the decode engine derives for inputs `x` (tests.reference
    Inputs on the CPU) with a state pool (rows, in its dtype) and flags from x's config."""
    import torch

    from cudnn.linear_attention.frost.kernels.decode import check_decode_operands

    c = x.config
    T, HO, V = x.q.shape[0], max(x.q.shape[1], x.v.shape[1]), x.v.shape[2]
    N = x.cu_seqlens.numel() - 1
    ck = None
    if every:
        rows = max(T // every + N, 1)
        ck = torch.empty(rows, HO, V, x.q.shape[2], dtype=ck_dtype or x.q.dtype)
    return check_decode_operands(
        q=x.q, k=x.k, v=x.v, g=x.g.float(), beta=x.beta, w=x.w, cu_seqlens=x.cu_seqlens,
        out=torch.empty(T, HO, V, dtype=x.q.dtype), initial_state=pool, final_state=pool,
        state_indices=slots, a_log=x.a_log, dt_bias=x.dt_bias, checkpoints=ck, family=family,
        use_l2norm=c.use_qk_l2norm, checkpoint_every=every, beta_sigmoid=c.use_beta_sigmoid,
        neg_eigval=c.allow_neg_eigval, safe_gate=c.safe_gate,
        gate_lower_bound=-5.0 if c.gate_lower_bound is None else c.gate_lower_bound,
        linear_gate=c.gate_domain == "linear").config


def _decode(engine_algorithm):
    """test_la_decode_gpu.py's calls (pools over DECODE / SPECULATIVE / MIXED steps in fp32
    and bf16, grouped heads, checkpoints, the plain forward, bad slots, the 100-step CUDA
    graph) and bench_decode.py's (GDN, KDA at its batches): recurrent-kernel configs, plus
    the chunked kernel's (engine_algorithm) for the one prefill-shaped call."""
    import torch

    import bench_decode
    from tests.numerics import test_la_decode_gpu as m
    from tests.reference.inputs import InputConfig, make_inputs
    from tests.reference.preprocess import Family
    from tests.torch_ops.serving_steps import Step, step_inputs

    def pooled(name, cfg, step, state=torch.float32, rows=m.POOL, **kw):
        x = step_inputs(cfg, step, 0)
        pool = torch.empty(rows, cfg.HO, cfg.V, cfg.K, dtype=state)
        slots = torch.zeros(len(step.seq_lens), dtype=torch.int32)
        return name, _decode_config(cfg.family.value, x, pool=pool, slots=slots, **kw)

    for family in Family:
        cfg = m.config(family)
        for steps in (m.DECODE, m.SPECULATIVE, m.MIXED):
            for state in (torch.float32, torch.bfloat16):
                for i, step in enumerate(steps):
                    yield pooled(f"pool-{family.value}-{state}-{i}", cfg, step, state)
        grouped = m.config(family, H=4, HV=8, K=64, V=64)
        for i, step in enumerate(m.DECODE + m.SPECULATIVE):
            yield pooled(f"grouped-{family.value}-{i}", grouped, step)
        for ck in (torch.float32, None):
            for i, step in enumerate(m.SPECULATIVE):
                yield pooled(f"ck-{family.value}-{ck}-{i}", cfg, step, every=1, ck_dtype=ck)
        yield pooled(f"graph-{family.value}", cfg, Step((1,) * 8, (0,) * 8))
        # the prefill-shaped mixed call runs the chunked kernel (its serving adapter gathers
        # the pool rows into a per-sequence state)
        for state in (torch.float32, torch.bfloat16):
            x = step_inputs(cfg, m.MIXED[0], 0)
            x = dataclasses.replace(x, initial_state=torch.zeros(
                len(m.MIXED[0].seq_lens), cfg.HO, cfg.V, cfg.K, dtype=state))
            yield f"mixed-chunked-{family.value}-{state}", _config_of(
                x, l2=cfg.use_qk_l2norm, final_state_dtype=state, algorithm=engine_algorithm)
    kda = m.config(Family.KDA)
    x = step_inputs(kda, Step((2, 1, 3, 1), (0, 1, 2, 3)), 0)
    pool = torch.empty(4, kda.HO, kda.V, kda.K)
    yield "plain-kda", _decode_config("kda", x, pool=pool, every=1, ck_dtype=torch.float32)
    for family in (Family.GDN, Family.KDA):
        yield pooled(f"bad-slots-{family.value}", m.config(family), Step((1, 2, 1, 1, 3), (0,) * 5))
    for kda_bench in (False, True):
        for n in (1, 64, 256, 1024):
            b = bench_decode.inputs(n, kda_bench, dev="cpu")
            cfg = InputConfig(family=Family.KDA if kda_bench else Family.GDN, seq_lens=(1,) * n,
                              H=bench_decode.HEADS, K=bench_decode.DIM, V=bench_decode.DIM,
                              dtype=torch.bfloat16)
            x = dataclasses.replace(make_inputs(cfg, 0), q=b["q"], k=b["k"], v=b["v"], g=b["g"],
                                    beta=b["beta"], cu_seqlens=b["cu"])
            yield f"bench-{cfg.family.value}-{n}", _decode_config(
                cfg.family.value, x, pool=b["pool"], slots=b["slots"])


def suite_configs(suites, smoke_algorithms, engine_algorithms, unaligned_gates=True):
    """{FrostFwdConfig: [suite/case names that launch it]}, in first-seen order."""
    engine_suites = {"frostmatrix": _frostmatrix, "torchops": _torchops, "bench": _bench,
                     "stagetimes": _stagetimes, "cuseqlens": _cuseqlens, "decode": _decode}

    def cases(suite):
        if suite == "frostsmoke":
            yield from _frostsmoke(smoke_algorithms)
        else:
            for algorithm in engine_algorithms:
                yield from engine_suites[suite](algorithm)
    found = collections.OrderedDict()
    for suite in suites:
        for case, cfg in cases(suite):
            found.setdefault(cfg, []).append(f"{suite}/{case}")
            if unaligned_gates and getattr(cfg, "gate_align16", False):
                found.setdefault(dataclasses.replace(cfg, gate_align16=False), []).append(f"{suite}/{case}/g-unaligned")
    return found


def _names(text: str) -> list[str]:
    return [a for a in text.split(",") if a]


# ---- compiling, storing, packing ---------------------------------------------------------

def _build(cfg, arch: str, root: str, native: bool) -> tuple[str, float]:
    """Worker: compile one config (a forward config, the product's or the test tooling's,
    or a decode config; sent pickled: the spawned worker has this process's sys.path) for
    arch and store it: with a generic x86-64 host shim in the DSL's own calling convention,
    or (native) for this host in the preferred one."""
    _use_repo_roots()
    from cudnn.linear_attention.frost.kernels import kernel_store
    from cudnn.linear_attention.frost.kernels.decode_compile import compile_decode
    from cudnn.linear_attention.frost.kernels.fwd import compile_fwd

    decode = hasattr(cfg, "block_v")  # a FrostDecodeConfig (suite decode)
    t0 = time.perf_counter()
    host = None if native else kernel_store.GENERIC_X86_64
    kernel = compile_decode(cfg, arch, host_target=host) if decode else compile_fwd(cfg, arch, host_target=host)
    kernel_store.KernelStore(Path(root)).save(cfg, arch, kernel)
    host = kernel_store.host_id(kernel.host_target)
    return kernel_store.entry_key(cfg, arch, kernel.ffi, host=host), time.perf_counter() - t0


def _prune(store, keep_keys: set[str]) -> int:
    removed = 0
    for entry in store.entries():
        if entry.get("key") not in keep_keys:
            for name in (f"{entry['key']}.json", entry.get("object", "")):
                if name and (store.root / name).exists():
                    (store.root / name).unlink()
            removed += 1
    return removed


def _pack(root: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    with tarfile.open(tmp, "w:xz", preset=9) as tar:
        for path in sorted(root.iterdir()):
            if path.is_file() and not path.name.startswith("."):
                tar.add(path, arcname=f".frostcache/{path.name}")
    os.replace(tmp, target)


def main(argv=None) -> int:
    _use_repo_roots()
    from cudnn.linear_attention.frost.kernels import kernel_store
    from cudnn.linear_attention.frost.kernels.compile_kernel import preferred_ffi
    from frost_fwd_experiments import ALGORITHMS, PRODUCT

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / ".frostcache", help="the store directory")
    ap.add_argument("--pack", default=str(REPO / ".kit" / "frostcache.tar.xz"),
                    help="tar.xz of the store to carry to the GPU machine ('' to skip)")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--suites", default=",".join(SUITES), help=f"comma-separated subset of {SUITES}")
    ap.add_argument("--smoke-algorithms", default=",".join(ALGORITHMS),
                    help="la_frost_smoke kernel layers to cover (its --algorithm all runs every one)")
    ap.add_argument("--engine-algorithms", default=PRODUCT,
                    help=f"kernel layer(s) the engine-level suites launch ({PRODUCT}: the product's; others as "
                         "pytest --frost-fwd-kernel launches them on the GPU run)")
    ap.add_argument("--aligned-gates-only", action="store_true",
                    help="skip the gate_align16=False twins of vector-gate configs")
    ap.add_argument("--keep", action="store_true", help="keep entries no listed config needs")
    ap.add_argument("--native", action="store_true",
                    help="build for this host (on the GPU machine itself: the fast TVM-FFI calling "
                         "convention where apache-tvm-ffi is installed) instead of a generic x86-64 "
                         "host shim in the DSL's own convention (what a build machine can make)")
    ap.add_argument("--families", default="",
                    help="comma-separated families (gdn, kda, gdn2) to keep; all when empty")
    ap.add_argument("--list", action="store_true", help="print the configs and exit")
    args = ap.parse_args(argv)
    suites = [s for s in args.suites.split(",") if s]
    unknown = sorted(set(suites) - set(SUITES))
    if unknown:
        ap.error(f"--suites: unknown {unknown}; choose from {SUITES}")

    t_enum = time.perf_counter()
    wanted = suite_configs(suites, _names(args.smoke_algorithms), _names(args.engine_algorithms),
                           unaligned_gates=not args.aligned_gates_only)
    if args.families:
        keep = set(_names(args.families))
        wanted = collections.OrderedDict((c, n) for c, n in wanted.items() if getattr(c.family, "value", c.family) in keep)
    print(f"{len(wanted)} configs from {', '.join(suites)} ({time.perf_counter() - t_enum:.1f} s)", flush=True)
    if args.list:
        for cfg, cases in wanted.items():
            print(f"{kernel_store.describe(cfg):70s} {cases[0]}{f' (+{len(cases) - 1})' if len(cases) > 1 else ''}")
        return 0

    store = kernel_store.KernelStore(args.out)
    ffi = preferred_ffi(None if args.native else kernel_store.GENERIC_X86_64)
    host_target = None if args.native else kernel_store.GENERIC_X86_64
    host = kernel_store.host_id(host_target)
    keys = {cfg: kernel_store.entry_key(cfg, args.arch, ffi, host=host) for cfg in wanted}
    todo = [cfg for cfg in wanted if store.load(cfg, args.arch, ffi, host_target) is None]
    print(f"calling convention {ffi!r} ({'this host' if args.native else 'generic x86-64 host shim'})",
          flush=True)
    print(f"{len(wanted) - len(todo)} already stored in {args.out}; compiling {len(todo)} with {args.jobs} "
          f"process(es)", flush=True)
    seconds: dict[str, float] = {}
    failures = 0
    t0 = time.perf_counter()
    ctx = multiprocessing.get_context("spawn")  # fresh interpreters: no MLIR state crosses a fork
    pool = concurrent.futures.ProcessPoolExecutor(max_workers=max(1, args.jobs), mp_context=ctx)
    try:
        futures = {pool.submit(_build, cfg, args.arch, str(args.out), args.native): cfg
                   for cfg in todo}
        for i, fut in enumerate(concurrent.futures.as_completed(futures), 1):
            cfg = futures[fut]
            try:
                key, s = fut.result()
                seconds[key] = s
                print(f"[{i}/{len(todo)}] {kernel_store.describe(cfg)}  {s:.1f} s", flush=True)
            except Exception as e:
                failures += 1
                print(f"[{i}/{len(todo)}] {kernel_store.describe(cfg)}  FAILED: {type(e).__name__}: {e}",
                      flush=True)
    finally:  # on Ctrl-C: drop the queued compiles instead of waiting for all of them
        pool.shutdown(wait=True, cancel_futures=True)
    wall = time.perf_counter() - t0
    pruned = 0 if args.keep else _prune(store, set(keys.values()))
    entries = {e["key"]: e for e in store.entries()}
    manifest_path = args.out / "manifest.json"
    if manifest_path.exists():  # keep the compile times of entries reused from an earlier run
        earlier = json.loads(manifest_path.read_text()).get("entries", [])
        seconds = {e["key"]: e["compile_s"] for e in earlier if e.get("compile_s") is not None} | seconds
    manifest = {
        "format": kernel_store.FORMAT, "arch": args.arch, "ffi": ffi, **kernel_store.toolchain(),
        "entries": [{"key": keys[cfg], "describe": kernel_store.describe(cfg), "cases": cases,
                     "object": entries.get(keys[cfg], {}).get("object"),
                     "bytes": entries.get(keys[cfg], {}).get("bytes"),
                     "compile_s": round(seconds[keys[cfg]], 2) if keys[cfg] in seconds else None}
                    for cfg, cases in wanted.items()],
    }
    manifest_path.write_text(json.dumps(manifest, indent=1))
    total = sum(e.get("bytes") or 0 for e in manifest["entries"])
    spent = sum(seconds[keys[cfg]] for cfg in todo if keys[cfg] in seconds)
    print(f"compiled {len(todo) - failures} in {wall:.0f} s wall ({spent:.0f} s of compiles); "
          f"{failures} failed; {pruned} stale removed; store {total / 2**20:.1f} MiB in {len(entries)} entries",
          flush=True)
    if args.pack:
        _pack(args.out, Path(args.pack))
        print(f"packed {args.pack}: {Path(args.pack).stat().st_size / 2**20:.1f} MiB", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
