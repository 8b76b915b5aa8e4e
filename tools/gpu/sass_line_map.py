#!/usr/bin/env python3
"""Which Python function of the kernel sources each SASS instruction of a FROST kernel
comes from: the map `ncu_source_report.py --lines` joins with a per-SASS profile, so a
barrier-free stretch (a four-role kernel's math warpgroup, say) splits by sub-stage.

Built on the build machine, no GPU: the kernel is compiled for sm_90a with the DSL's
line table (CUTE_DSL_LINEINFO=1, which leaves the SASS instruction for instruction as
without it) and disassembled with nvdisasm -g; every instruction gets the file and line
its code was traced from and the innermost def enclosing that line. The DSL inlines
everything, so a helper shared by several stages (warp_mma, load_vec) keeps its own name;
the role split of ncu_source_report.py tells its callers apart where roles differ. Code
the DSL generates without a location of its own (the branches of dynamic ifs, mostly) is
given the kernel's entry line and so shows as its __call__ (a fifth of the four-role GDN
forward's math role, for instance); CUTE_DSL_LOC_TRACEBACKS does not help, as nvdisasm
then names the DSL's own frames instead.

  python3 tools/gpu/sass_line_map.py --family gdn [--kernel fwd] [--seqs 8 --tokens 4096
      --heads 16 --dim 128] [--l2norm] OUT.json

--kernel: fwd (the forward a plain call launches), fwd-train (the training forward with
checkpoints and U), or a backward kernel of such a training call: chain (reading U),
grads (reading the checkpoints). The shape picks the config exactly as a call of that shape does
(frost_configs.call_configs), so profile the same shape on the GPU.
"""
from __future__ import annotations

import argparse
import ast
import bisect
import functools
import json
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_FILE = re.compile(r'^\s*//## File "([^"]+)", line (\d+)')
_INSTR = re.compile(r"^\s+/\*([0-9a-f]{4,6})\*/\s+(.*?)\s*;")
KERNELS = ("fwd", "fwd-train", "chain", "grads")


def parse_nvdisasm(text: str) -> list[tuple[str, str | None, int]]:
    """(instruction, file, line) per SASS instruction of `nvdisasm -g` output, in address
    order; an instruction before any line annotation has file None, line 0."""
    out, where = [], (None, 0)
    for line in text.splitlines():
        m = _FILE.match(line)
        if m:
            where = (m.group(1), int(m.group(2)))
            continue
        m = _INSTR.match(line)
        if m:
            out.append((m.group(2).strip(), *where))
    return out


@functools.lru_cache(maxsize=None)
def function_spans(path: str) -> tuple[list[int], list[tuple[int, int, str]]]:
    """The defs of a Python file as (first line, last line, qualified name), sorted by first
    line (decorators included), with the sorted first lines for bisection."""
    with open(path) as f:
        tree = ast.parse(f.read(), filename=path)
    spans = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                    spans.append((first, child.end_lineno, name))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    spans.sort()
    return [s[0] for s in spans], spans


def enclosing_function(path: str | None, line: int) -> str:
    """The innermost def of `path` containing `line`, as "file.py:Class.method"; the file
    alone at module level, "?" without a location or for a file that cannot be read."""
    if not path:
        return "?"
    base = os.path.basename(path)
    try:
        starts, spans = function_spans(path)
    except (OSError, SyntaxError):
        return base
    best = None
    for first, last, name in spans[:bisect.bisect_right(starts, line)]:
        if first <= line <= last and (best is None or first >= best[0]):
            best = (first, name)
    return f"{base}:{best[1]}" if best else base


def line_map(text: str) -> list[dict]:
    """The map's entries for `nvdisasm -g` output: index, instruction, file (relative to the
    repository where it lies inside it), line, function."""
    entries = []
    for i, (instr, path, line) in enumerate(parse_nvdisasm(text)):
        rel = os.path.relpath(path, REPO) if path and path.startswith(REPO + os.sep) else path
        entries.append({"index": i, "sass": instr, "file": rel, "line": line,
                        "function": enclosing_function(path, line)})
    return entries


def _args_for(family: str, seqs: int, tokens: int, heads: int, dim: int) -> dict:
    import torch

    T, bf16 = seqs * tokens, torch.bfloat16
    vec = family in ("kda", "gdn2")
    args = dict(q=torch.empty(T, heads, dim, dtype=bf16), k=torch.empty(T, heads, dim, dtype=bf16),
                v=torch.empty(T, heads, dim, dtype=bf16),
                g=torch.empty(T, heads, dim) if vec else torch.empty(T, heads),
                beta=torch.empty(T, heads, dim) if family == "gdn2" else torch.empty(T, heads),
                cu_seqlens=torch.arange(0, T + 1, tokens, dtype=torch.int32))
    if family == "gdn2":
        args["w"] = torch.empty(T, heads, dim, dtype=bf16)
    return args


def kernel_config(family: str, kernel: str, seqs: int, tokens: int, heads: int, dim: int, l2norm: bool):
    """The FrostFwdConfig / FrostBwdConfig a call of that shape launches as `kernel`."""
    from cudnn.linear_attention.frost.kernels.frost_configs import call_configs

    found = call_configs(family, _args_for(family, seqs, tokens, heads, dim), final_state=True,
                         l2norm=l2norm, backward=kernel != "fwd")
    if kernel == "fwd":
        return found[0]
    if kernel == "fwd-train":
        return next(c for c in found if not hasattr(c, "stage") and c.write_values and c.write_output)
    # a training call's (checkpoints and U from the forward): the chain reads U, the grads
    # kernel the checkpoints; the first such config is the one without d_final_state
    want = "forward_values" if kernel == "chain" else "checkpoints"
    return next(c for c in found if getattr(c, "stage", None) == kernel and getattr(c, want))


def build(cfg) -> tuple[str, str]:
    """(kernel class name, nvdisasm -g text) of cfg's sm_90a kernel with the line table."""
    import tempfile

    sys.path.insert(0, os.path.join(REPO, "engines_frost", "tests"))
    from frost_cubin_report import compile_bwd_cubin, compile_cubin, tool

    exe = tool("NVDISASM", "nvdisasm")
    if exe is None:
        raise SystemExit("nvdisasm not found (set NVDISASM or pip install nvidia-cuda-nvdisasm)")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = compile_bwd_cubin(cfg, tmp) if hasattr(cfg, "stage") else compile_cubin(cfg, tmp)
        text = subprocess.run([exe, "-g", "-c", cubin], check=True, capture_output=True, text=True).stdout
    from cudnn.linear_attention.frost.kernels.bwd_compile import bwd_kernel_for
    from cudnn.linear_attention.frost.kernels.compile_kernel import kernel_class

    cls = bwd_kernel_for(cfg) if hasattr(cfg, "stage") else kernel_class(cfg, "sm_90a")
    return cls.__name__, text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--family", required=True, choices=("gdn", "kda", "gdn2"))
    ap.add_argument("--kernel", default="fwd", choices=KERNELS)
    ap.add_argument("--seqs", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--dim", type=int, default=128, help="K = V")
    ap.add_argument("--l2norm", action="store_true")
    args = ap.parse_args(argv)
    for name, value in (("--seqs", args.seqs), ("--tokens", args.tokens), ("--heads", args.heads)):
        if value < 1:
            ap.error(f"{name} must be >= 1, got {value}")
    if args.dim not in (64, 128):
        ap.error(f"--dim must be 64 or 128, got {args.dim}")
    # the line table changes no instruction (checked: the same SASS with and without it)
    os.environ["CUTE_DSL_LINEINFO"] = "1"
    cfg = kernel_config(args.family, args.kernel, args.seqs, args.tokens, args.heads, args.dim, args.l2norm)
    print(f"compiling {args.family} {args.kernel} for sm_90a with the line table ...", flush=True)
    cls, text = build(cfg)
    entries = line_map(text)
    with open(args.out, "w") as f:
        json.dump({"kernel": cls, "family": args.family, "stage": args.kernel, "config": repr(cfg),
                   "instructions": entries}, f)
    located = sum(e["file"] is not None for e in entries)
    print(f"{cls}: {len(entries)} instructions, {located} with a source line -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
