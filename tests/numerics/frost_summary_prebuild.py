"""Precompile the FROST kernels that the summary and context-parallel GPU checks launch.

    python3 tests/numerics/frost_summary_prebuild.py --list       # the configs, then exit
    python3 tests/numerics/frost_summary_prebuild.py --prebuild   # build machine: sm_90a,
                                                                  # generic host (FROST_FFI=cute)
    python3 tests/numerics/frost_summary_prebuild.py [--jobs 16]  # GPU machine: its own arch

into the kernel store FROST_KERNEL_CACHE (default .frostcache), so that
tests/numerics/test_la_frost_summary_engines.py, tests/context_parallel/
cp_nccl_gpu_test.py and bench/context_parallel_bench.py (its default shape) load their
kernels instead of compiling them one by one. A store
built with --prebuild holds kernels in the DSL's own calling convention: run the GPU
checks with FROST_FFI=cute to find them.

Which configs: the summary launchers (kernels/summary.py) and the op-level calls are run
on CPU tensors shaped like each check's cases, with frost_fwd / frost_bwd replaced by
recorders that run the real operand checks (check_operands, check_bwd_operands), which
derive the static config exactly as a launch does (the summaries' backward runs the
chain stage alone; the ops' backward all three).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
for root in ("torch_ops", "engines_frost", "engines_common", "router", "ir", "ops", "."):
    if str(REPO / root) not in sys.path:
        sys.path.insert(0, str(REPO / root))


def _tensors(family, H, HK, HV, K, V, lens=(5, 0, 3)):
    import torch

    T, N, HO = sum(lens), len(lens), max(H, HV)
    bf = torch.bfloat16
    vector = family != "gdn"
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    return dict(q=torch.zeros(T, H, K, dtype=bf), k=torch.zeros(T, HK, K, dtype=bf),
                v=torch.zeros(T, HV, V, dtype=bf),
                g=torch.zeros((T, HO, K) if vector else (T, HO)),
                beta=torch.zeros(T, HO, K, dtype=bf) if family == "gdn2" else torch.zeros(T, HO),
                w=torch.zeros(T, HO, V, dtype=bf) if family == "gdn2" else None, cu=cu,
                dO=torch.zeros(T, HO, V, dtype=bf), state=torch.zeros(N, HO, V, K),
                square=torch.zeros(N, HO, K, K), N=N, HO=HO, T=T)


class _Recorder:
    """frost_fwd / frost_bwd stand-ins that keep the configs their checks derive."""

    def __init__(self):
        self.configs = []

    def frost_fwd(self, *, q, k, v, g, beta, w, cu_seqlens, out, initial_state, final_state,
                  use_l2norm, gate_per_channel, beta_per_channel, **_):
        from cudnn.linear_attention.frost.kernels.fwd import check_operands

        self.configs.append(check_operands(
            q=q, k=k, v=v, g=g, beta=beta, w=w, cu_seqlens=cu_seqlens, out=out,
            initial_state=initial_state, final_state=final_state, use_l2norm=use_l2norm,
            gate_per_channel=gate_per_channel, beta_per_channel=beta_per_channel).config)

    def frost_bwd(self, *, stages=("states", "chain", "grads"), workspace=None, scale=None,
                  stream=None, **operands):
        from cudnn.linear_attention.frost.kernels.bwd import check_bwd_operands

        cfg, _, _ = check_bwd_operands(**operands)
        self.configs += [cfg.with_stage(s) for s in stages]


def _summary_configs(rec, family, H, HK, HV, K, V, l2, dht_options=(False, True),
                     with_h0=(True, False)):
    """What the summary launchers launch for one shape."""
    import torch

    from cudnn.linear_attention.frost.kernels import summary

    x = _tensors(family, H, HK, HV, K, V)
    flags = dict(use_l2norm=l2, gate_per_channel=family != "gdn",
                 beta_per_channel=family == "gdn2", stream=None)
    fwd_shape = summary.SummaryShape(False, x["T"], x["N"], x["HO"], HK, HV, K, V, "bfloat16",
                                     "float32", "float32", flags["gate_per_channel"],
                                     flags["beta_per_channel"], summary.dtype_name(x["beta"]))
    ws = torch.zeros(summary.summary_workspace_layout(fwd_shape)[1], dtype=torch.uint8)
    for h0 in with_h0:
        summary.frost_summary(k=x["k"], v=x["v"], g=x["g"], beta=x["beta"], w=x["w"],
                              cu_seqlens=x["cu"], initial_state=x["state"] if h0 else None,
                              final_state=x["state"].clone(), transition=x["square"].clone(),
                              workspace=ws, **flags)
    bwd_shape = summary.SummaryShape(True, x["T"], x["N"], x["HO"], HK, H, K, V, "bfloat16",
                                     "float32", "float32", flags["gate_per_channel"],
                                     flags["beta_per_channel"], summary.dtype_name(x["beta"]))
    ws = torch.zeros(summary.summary_workspace_layout(bwd_shape)[1], dtype=torch.uint8)
    for dht in dht_options:
        for transition in (x["square"].clone(), None):
            summary.frost_summary_bwd(q=x["q"], k=x["k"], g=x["g"], beta=x["beta"],
                                      cu_seqlens=x["cu"], dO=x["dO"],
                                      d_final_state=x["state"] if dht else None,
                                      d_initial_state=x["state"].clone(), transition=transition,
                                      workspace=ws, scale=1.0, **flags)


def _op_configs(rec, family, H, HK, HV, K, V, l2, h0):
    """What the forward and backward ops launch (engine plans: la_engine, bwd_plan)."""
    x = _tensors(family, H, HK, HV, K, V)
    flags = dict(use_l2norm=l2, gate_per_channel=family != "gdn",
                 beta_per_channel=family == "gdn2")
    init = x["state"] if h0 else None
    rec.frost_fwd(q=x["q"], k=x["k"], v=x["v"], g=x["g"], beta=x["beta"], w=x["w"],
                  cu_seqlens=x["cu"], out=x["dO"].clone(), initial_state=init,
                  final_state=x["state"].clone(), **flags)
    grads = dict(dq=x["q"].clone(), dk=x["k"].clone(), dv=x["v"].clone(), dg=x["g"].clone(),
                 dbeta=x["beta"].clone(), dw=None if x["w"] is None else x["w"].clone(),
                 d_initial_state=None if init is None else init.clone())
    rec.frost_bwd(q=x["q"], k=x["k"], v=x["v"], g=x["g"], beta=x["beta"], w=x["w"],
                  cu_seqlens=x["cu"], dO=x["dO"], initial_state=init,
                  d_final_state=x["state"], **grads, **flags)


def wanted_configs():
    from cudnn.linear_attention.frost.kernels import summary

    from tests.context_parallel.cp_cases import GPU_CASES
    from tests.numerics import test_la_frost_summary_engines as matrix

    rec = _Recorder()
    saved = summary._fwd.frost_fwd, summary._bwd.frost_bwd
    summary._fwd.frost_fwd, summary._bwd.frost_bwd = rec.frost_fwd, rec.frost_bwd
    try:
        for family in matrix.FAMILIES:
            for _, _, H, HK, HV, K, V in matrix.SHAPES:
                for l2 in (False, True):
                    _summary_configs(rec, family, H, HK, HV, K, V, l2)
        for case in GPU_CASES:
            c = case.config
            family, H = c["family"].value, c["H"]
            HK, HV = c.get("HK") or H, c.get("HV") or H
            l2 = c.get("use_qk_l2norm", False)
            # single process: the case's own initial state; context parallel: always one
            for h0 in {bool(c.get("with_initial_state")), True}:
                _op_configs(rec, family, H, HK, HV, c["K"], c["V"], l2, h0)
            # pass-through ranks (world 4): forward summary from zero, backward without dht
            _summary_configs(rec, family, H, HK, HV, c["K"], c["V"], l2, dht_options=(False,),
                             with_h0=(False,))
        # bench/context_parallel_bench.py: one GPU (no initial state), CP and each rank's
        # own shard (an initial state), summaries on pass-through ranks (3+ GPUs)
        bench = _bench_module()
        H, K, V, l2 = bench.BENCH_SHAPE
        for family in bench.PREBUILT_FAMILIES:
            for h0 in (False, True):
                _op_configs(rec, family, H, H, H, K, V, l2, h0)
            _summary_configs(rec, family, H, H, H, K, V, l2, dht_options=(False,),
                             with_h0=(False,))
    finally:
        summary._fwd.frost_fwd, summary._bwd.frost_bwd = saved
    return list(dict.fromkeys(rec.configs))


def _bench_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "context_parallel_bench", REPO / "bench" / "context_parallel_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print the configs and exit")
    ap.add_argument("--prebuild", action="store_true",
                    help="build for sm_90a with a generic x86-64 host shim (no GPU needed)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)
    configs = wanted_configs()
    if args.list:
        from cudnn.linear_attention.frost.kernels import kernel_store
        for cfg in configs:
            print(kernel_store.describe(cfg) if hasattr(kernel_store, "describe") else cfg)
        print(f"{len(configs)} configs")
        return 0
    from tests.numerics.la_frost_bwd_smoke import precompile

    root = os.environ.setdefault("FROST_KERNEL_CACHE", str(REPO / ".frostcache"))
    if args.prebuild:
        from cudnn.linear_attention.frost.kernels.kernel_store import GENERIC_X86_64
        precompile(configs, "sm_90a", root, args.jobs, host_target=GENERIC_X86_64)
        return 0
    import torch

    from cudnn.linear_attention.frost.kernels.fwd import device_arch
    precompile(configs, device_arch(torch.device("cuda")), root, args.jobs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
