"""Dump the normalised sm_90a SASS and resource usage of the FROST product kernels (dev tool).

For a change that must leave the default kernels byte-identical: run it on a checkout
before and after the change and compare the folders file by file (`cmp`). Covers the
forward product configs of the bench shape (16 heads, K = V = 128; GDN and KDA with and
without l2norm, GDN-2, the span summary's transition pass with an initial state, the
training launchers, fp16 on pipelined) and, with --calls, every forward and backward config a
GDN / KDA training call launches (frost_configs.call_configs). No GPU needed.

  PYTHONPATH=$(python3 tools/pythonpath.py) python3 engines_frost/tests/frost_sass_dump.py OUT [--calls] [--no-output]

--no-output adds each forward config's write_output=False twin (NAME_noout).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from frost_cubin_report import compile_bwd_cubin, compile_cubin, resource_usage, sass_instructions  # noqa: E402


def _cfg(fam, l2=True, io="bfloat16", h0=False, **kw):
    from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

    gpc, bpc = {"gdn": (False, False), "kda": (True, False), "gdn2": (True, True)}[fam]
    return FrostFwdConfig(io_dtype=io, state_dtype="float32", H=16, HK=16, HV=16, K=128, V=128,
                          gate_per_channel=gpc, beta_per_channel=bpc, has_w=bpc, use_l2norm=l2,
                          has_initial_state=h0, has_final_state=True, gate_align16=gpc and io == "bfloat16", **kw)


def product_configs() -> dict:
    return {
        "gdn_l2": _cfg("gdn"), "gdn_nol2": _cfg("gdn", l2=False), "kda_l2": _cfg("kda"),
        "kda_nol2": _cfg("kda", l2=False), "gdn2_l2": _cfg("gdn2"), "gdn_ckpt": _cfg("gdn", write_checkpoints=True),
        "gdn_values": _cfg("gdn", write_checkpoints=True, write_values=True),
        "kda_values": _cfg("kda", write_checkpoints=True, write_values=True),
        "gdn_fp16": _cfg("gdn", io="float16"), "kda_fp16": _cfg("kda", io="float16"),
        "gdn_trans": _cfg("gdn", h0=True), "kda_trans": _cfg("kda", h0=True),
    }


def call_configs() -> dict:
    import torch

    from cudnn.linear_attention.frost.kernels.frost_configs import call_configs as derive

    T, H, K, V = 256, 16, 128, 128
    found = {}
    for fam in ("gdn", "kda"):
        args = dict(q=torch.zeros(T, H, K, dtype=torch.bfloat16), k=torch.zeros(T, H, K, dtype=torch.bfloat16),
                    v=torch.zeros(T, H, V, dtype=torch.bfloat16),
                    g=torch.zeros(T, H) if fam == "gdn" else torch.zeros(T, H, K), beta=torch.zeros(T, H),
                    cu_seqlens=torch.tensor([0, T], dtype=torch.int32))
        for i, c in enumerate(derive(fam, args, final_state=True, l2norm=True, backward=True)):
            found[f"call_{fam}_{i}_{'bwd-' + c.stage if hasattr(c, 'stage') else 'fwd'}"] = c
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--calls", action="store_true", help="also every config of a GDN / KDA training call")
    ap.add_argument("--no-output", action="store_true", help="also the write_output=False twins")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    todo = product_configs()
    if args.no_output:
        todo.update({f"{n}_noout": dataclasses.replace(c, write_output=False) for n, c in list(todo.items())
                     if not c.write_checkpoints})
    if args.calls:
        todo.update(call_configs())
    for name, c in todo.items():
        t0 = time.time()
        with tempfile.TemporaryDirectory() as tmp:
            cubin = compile_bwd_cubin(c, tmp) if hasattr(c, "stage") else compile_cubin(c, tmp)
            res, ins = resource_usage(cubin), sass_instructions(cubin)
        with open(os.path.join(args.out, name + ".sass"), "w") as f:
            f.write("\n".join(ins) + "\n")
        with open(os.path.join(args.out, name + ".json"), "w") as f:
            json.dump(res, f)
        print(f"{name}: {res} {len(ins)} instructions ({time.time() - t0:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
