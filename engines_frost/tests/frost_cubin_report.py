"""Compile one FROST forward kernel for sm_90a and report what ptxas made of it (dev tool).

No GPU needed. Prints the resource usage (registers, local memory = spills, stack) from
cuobjdump and, where nvdisasm is found, an instruction histogram per barrier-delimited
region of the SASS (region 1 ends at the first BAR.SYNC: state init + rows stage; then
operands, gram, chain for mma/pipelined). ``--sass FILE`` writes the SASS with addresses stripped,
so two builds can be diffed (``--sass`` of pipelined before and after a refactor must be equal).
``--algorithm`` builds another kernel layer as the test tooling does
(frost_fwd_experiments.py: oracle, mma, wgmma; pipelined, the default, is the product's kernel
on archs other than sm_90a, forced here for sm_90a, where the product compiles wgmma).

  PYTHONPATH=$(python3 tools/pythonpath.py) python3 engines_frost/tests/frost_cubin_report.py --algorithm pipelined --family kda

Tools: CUOBJDUMP and NVDISASM name them; else `cuobjdump` / `nvdisasm` on PATH, else in
this Python environment's CUDA 13 wheels (nvidia/cu13/bin: pip packages
nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm).
"""
from __future__ import annotations

import argparse
import collections
import glob
import os
import re
import shutil
import subprocess
import tempfile

FAMILIES = {"gdn": (False, False), "kda": (True, False), "gdn2": (True, True)}
#: the forward's launchers by what they write (FrostFwdConfig's write_* fields): the plain
#: forward, the span summaries' output-free one, the training forwards (checkpoints; + U)
#: and the backward's output-free recompute of checkpoints and U
BUILDS = {"plain": {}, "no-output": {"write_output": False}, "checkpoints": {"write_checkpoints": True},
          "values": {"write_checkpoints": True, "write_values": True},
          "recompute": {"write_checkpoints": True, "write_values": True, "write_output": False}}
_INSTR = re.compile(r"^\s+/\*[0-9a-f]{4,6}\*/\s+(?:@!?U?P[0-9T]\s+)?([A-Z0-9_]+(?:\.[A-Z0-9_]+)*)(.*?);")


def tool(env: str, name: str) -> str | None:
    """$env if set (None unless that file exists), else `name` on PATH, else in the CUDA 13
    wheels of this environment (nvidia/cu13/bin); None when none has it."""
    if os.environ.get(env):
        return os.environ[env] if os.path.isfile(os.environ[env]) else None
    found = shutil.which(name)
    if found is None:
        import importlib.util
        spec = importlib.util.find_spec("nvidia.cu13") if importlib.util.find_spec("nvidia") else None
        for root in (spec.submodule_search_locations or []) if spec else []:
            found = found or shutil.which(name, path=os.path.join(root, "bin"))
    return found


def compile_cubin(cfg, out_dir: str, notes: set | None = None) -> str:
    """cute.compile the config's kernel class for sm_90a, keeping the cubin; returns its
    path. `notes`, if given, gets the build's ptxas performance notes (build_cubin)."""
    from cudnn.linear_attention.frost.kernels.compile_kernel import kernel_class
    from cudnn.linear_attention.frost.kernels.launch_abi import fake_args

    return build_cubin(kernel_class(cfg, "sm_90a")(cfg), fake_args(cfg), out_dir, notes)


#: cute.compile options that make the DSL's ptxas run verbose and hand its log to the DSL's
#: remark printer (stderr), where ptxas_notes reads its performance notes
PTXAS_NOTES_OPTIONS = "--gpu-arch sm_90a --ptxas-options '-v' --remark-filter ptxas"
#: ptxas's "Potential Performance Loss" notes on Hopper code, by number: a setmaxnreg it
#: ignored (C7507), wgmma serialised for want of registers (C7511, C7512), a wgmma wait or
#: arrive it injected because registers of an in-flight wgmma are touched (C7517, C7519)
PTXAS_NOTE = re.compile(r"\((C75\d\d)\)")


def build_cubin(kernel, args, out_dir: str, notes: set | None = None) -> str:
    """cute.compile `kernel` (a CuTe DSL callable, with its cute.compile arguments) for
    sm_90a, keeping the cubin in out_dir; returns its path. With `notes` (a set), ptxas
    runs verbose in the same build and its C75xx performance notes (PTXAS_NOTE) are added
    to the set: the build ptxas_notes reads, so a test that inspects a kernel's cubin can
    check its notes without a second compile. No GPU needed."""
    import contextlib
    import io
    import warnings

    import cutlass.cute as cute

    keep = f"--keep-cubin --dump-dir {out_dir}"
    if notes is None:
        cute.compile(kernel, *args, options=f"--gpu-arch sm_90a {keep}")
    else:
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cute.compile(kernel, *args, options=f"{PTXAS_NOTES_OPTIONS} {keep}")
        notes.update(PTXAS_NOTE.findall(err.getvalue()))
    (cubin,) = glob.glob(os.path.join(out_dir, "*.cubin"))
    return cubin


def ptxas_notes(kernel, args) -> set[str]:
    """The C75xx performance notes (PTXAS_NOTE) ptxas prints for `kernel` (a CuTe DSL
    callable, with its cute.compile arguments) built for sm_90a (build_cubin's build).
    No GPU needed."""
    notes = set()
    with tempfile.TemporaryDirectory() as tmp:
        build_cubin(kernel, args, tmp, notes)
    return notes


def compile_bwd_cubin(bcfg, out_dir: str, notes: set | None = None) -> str:
    """cute.compile a backward stage's kernel class (bwd_compile) for sm_90a, keeping the
    cubin; returns its path. `notes`, if given, gets the build's ptxas performance notes
    (build_cubin)."""
    from cudnn.linear_attention.frost.kernels.bwd_abi import bwd_fake_args
    from cudnn.linear_attention.frost.kernels.bwd_compile import bwd_kernel_for

    return build_cubin(bwd_kernel_for(bcfg)(bcfg), bwd_fake_args(bcfg), out_dir, notes)


def resource_usage(cubin: str) -> dict[str, int]:
    """REG, STACK, SHARED, LOCAL of the (single) kernel function in the cubin."""
    exe = tool("CUOBJDUMP", "cuobjdump")
    if exe is None:
        raise FileNotFoundError("cuobjdump not found (set CUOBJDUMP)")
    text = subprocess.run([exe, "--dump-resource-usage", cubin], check=True, capture_output=True, text=True).stdout
    fields = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", text)
    return dict(zip(("REG", "STACK", "SHARED", "LOCAL"), map(int, fields.groups())))


def sass_instructions(cubin: str) -> list[str]:
    """The kernel's SASS, one normalised instruction per entry (no addresses, no comments)."""
    exe = tool("NVDISASM", "nvdisasm")
    if exe is None:
        raise FileNotFoundError("nvdisasm not found (set NVDISASM or pip install nvidia-cuda-nvdisasm)")
    text = subprocess.run([exe, "-c", cubin], check=True, capture_output=True, text=True).stdout
    out = []
    for line in text.splitlines():
        m = _INSTR.match(line)
        if m:
            out.append(line.split("*/", 1)[1].strip())
    return out


def sass_tools_missing() -> bool:
    """Whether cuobjdump or nvdisasm is missing (the tests that read SASS skip then)."""
    return tool("CUOBJDUMP", "cuobjdump") is None or tool("NVDISASM", "nvdisasm") is None


def build_opcodes(cfg, backward: bool = False) -> tuple[set, dict, collections.Counter]:
    """Compile cfg (a FrostBwdConfig with backward) for sm_90a: its ptxas notes, resource
    usage and opcode counts (each instruction's opcode with its modifiers, predicate
    dropped)."""
    notes = set()
    with tempfile.TemporaryDirectory() as tmp:
        cubin = (compile_bwd_cubin if backward else compile_cubin)(cfg, tmp, notes)
        usage, sass = resource_usage(cubin), sass_instructions(cubin)
    ops = collections.Counter(next(w for w in line.split() if not w.startswith("@")) for line in sass if line.split())
    return notes, usage, ops


def count_ops(ops: collections.Counter, prefix: str, suffix: str = "") -> int:
    """How many of build_opcodes' instructions have an opcode starting with prefix and
    ending with suffix (e.g. "LDGSTS.", ".128": 16-byte cp.async, any cache modifier)."""
    return sum(n for op, n in ops.items() if op.startswith(prefix) and op.endswith(suffix))


def setmaxnreg_sites(instrs: list[str]) -> tuple[list[int], list[int]]:
    """Where a warp-specialised kernel re-splits its registers (instructions without guard
    predicates): the indices of its USETMAXREG.DEALLOC (the role that lowers its count)
    and of its USETMAXREG.TRY_ALLOC (the role that raises it)."""
    return ([n for n, i in enumerate(instrs) if i.startswith("USETMAXREG.DEALLOC")],
            [n for n, i in enumerate(instrs) if i.startswith("USETMAXREG.TRY_ALLOC")])


def four_role_regions(instrs: list[str], split: tuple[int, int, int]) -> tuple[list[str], list[str], list[str]]:
    """(copies, math, chain) SASS of a four-role kernel (fwd_ws4.py, bwd_chain_ws4.py) whose
    (chain, math, copies) setmaxnreg split is `split`: the copies' branch first (the highest
    warps lower their count first), then math's, then the chain's raise; AssertionError
    where the sites or their counts are not so."""
    dealloc, alloc = setmaxnreg_sites(instrs)
    assert len(dealloc) == 2 and len(alloc) == 1 and dealloc[1] < alloc[0], (dealloc, alloc)
    chain_regs, math_regs, copy_regs = split
    assert f"{copy_regs:#x}" in instrs[dealloc[0]] and f"{math_regs:#x}" in instrs[dealloc[1]], split
    assert f"{chain_regs:#x}" in instrs[alloc[0]], split
    return instrs[dealloc[0]:dealloc[1]], instrs[dealloc[1]:alloc[0]], instrs[alloc[0]:]


def region_histograms(instrs: list[str]) -> list[collections.Counter]:
    regions, cur = [], collections.Counter()
    for ins in instrs:
        op = ins.split()[0] if not ins.startswith("@") else ins.split()[1]
        cur[op.split(".")[0] if op not in ("LDS.128", "STS.128", "STS.U16", "LDS.U16") else op] += 1
        if op.startswith("BAR.SYNC"):
            regions.append(cur)
            cur = collections.Counter()
    regions.append(cur)
    return regions


def config_for(family: str, algorithm: str, K: int, V: int, l2: bool, io: str = "bfloat16",
               gate_align16: bool = True, skip_stages: tuple[str, ...] = (), build: str = "plain",
               decay: str | None = None):
    """The benchmark's configuration (no initial state, fp32 final state); vector gates
    16-byte aligned, as frost_fwd finds them for torch-allocated g, unless told otherwise;
    for kernel layer `algorithm` (the product config where that is the product's pick),
    with `skip_stages` compiled out of the chunk loop (what a stage alone keeps live) and
    the launcher `build` names (BUILDS: the output, state checkpoints, U); `decay` the
    tooling's knob (None: the product's, frost_fwd_experiments.default_decay)."""
    from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

    from frost_fwd_experiments import tooling_config

    gpc, bpc = FAMILIES[family]
    cfg = FrostFwdConfig(io_dtype=io, state_dtype="float32", H=16, HK=16, HV=16, K=K, V=V, gate_per_channel=gpc,
                         beta_per_channel=bpc, has_w=bpc, use_l2norm=l2, has_initial_state=False,
                         has_final_state=True, gate_align16=gate_align16 and gpc, **BUILDS[build])
    return tooling_config(cfg, algorithm, skip_stages=tuple(skip_stages), decay=decay)


def product_and_twin(family: str, build: str = "plain", gate_align16: bool = True, **knob):
    """The bench config of `family` (K = V = 128, l2norm) as the product compiles it, wgmma its
    pick, and the test tooling's twin of it with one wgmma knob changed (e.g. rows="async"):
    the pair a compile test compares the product's SASS against."""
    from frost_fwd_experiments import FrostFwdExperiment, tooling_config

    product = config_for(family, "wgmma", 128, 128, True, build=build, gate_align16=gate_align16)
    assert type(product) is not FrostFwdExperiment, product  # wgmma is the product's pick here
    twin = tooling_config(product, "wgmma", **knob)
    (name, value), = knob.items()
    assert isinstance(twin, FrostFwdExperiment) and getattr(twin, name) == value, twin
    return product, twin


def bwd_config_for(family: str, stage: str, K: int = 128, V: int = 128, H: int = 4, HV: int = 4, l2: bool = True,
                   h0: bool = True):
    """A backward kernel config for the compile tests: bf16, grouped heads H / HV, fp32
    state gradients, an initial state (and so d_initial_state) with h0, 16-byte aligned
    vector gates."""
    from cudnn.linear_attention.frost.kernels.bwd_config import FrostBwdConfig
    from cudnn.linear_attention.frost.kernels.config import FrostFwdConfig

    vec, per_beta = FAMILIES[family]
    f = FrostFwdConfig("bfloat16", "float32" if h0 else None, H, H, HV, K, V, vec, per_beta, per_beta, l2, h0,
                       False, gate_align16=vec)
    return FrostBwdConfig(f, stage, "float32", "float32" if h0 else None)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--algorithm", default="pipelined", help="kernel layer (frost_fwd_experiments.ALGORITHMS)")
    ap.add_argument("--family", choices=FAMILIES, default="gdn")
    ap.add_argument("--K", type=int, default=128)
    ap.add_argument("--V", type=int, default=128)
    ap.add_argument("--l2norm", action="store_true")
    ap.add_argument("--io", default="bfloat16")
    ap.add_argument("--sass", help="write the normalised SASS here")
    ap.add_argument("--gate-align4", action="store_true", help="vector gates only 4-byte aligned")
    ap.add_argument("--skip", nargs="*", default=[], metavar="STAGE",
                    help="per-chunk stages compiled out (frost_fwd_experiments.SKIPPABLE): the registers "
                         "and instructions of what is left, e.g. the chain alone or the stages before it")
    ap.add_argument("--build", choices=BUILDS, default="plain", help="which launcher (what the kernel writes)")
    args = ap.parse_args(argv)
    cfg = config_for(args.family, args.algorithm, args.K, args.V, args.l2norm, args.io, not args.gate_align4,
                     args.skip, args.build)
    with tempfile.TemporaryDirectory() as tmp:
        cubin = compile_cubin(cfg, tmp)
        print(f"{args.algorithm} {args.family} K={args.K} V={args.V} l2norm={int(args.l2norm)} {args.io}"
              f"{' skip=' + '+'.join(args.skip) if args.skip else ''}"
              f"{'' if args.build == 'plain' else ' ' + args.build}:",
              resource_usage(cubin))
        try:
            instrs = sass_instructions(cubin)
        except FileNotFoundError as e:
            print(f"(no SASS histogram: {e})")
            return 0
    if args.sass:
        with open(args.sass, "w") as f:
            f.write("\n".join(instrs) + "\n")
    print(f"{len(instrs)} instructions")
    keys = ("HMMA", "LDSM", "LDS", "LDS.128", "STS", "STS.128", "STS.U16", "MUFU", "LDG", "LDGSTS", "STG",
            "FFMA", "FMUL", "F2FP", "SHFL", "BAR")
    for i, hist in enumerate(region_histograms(instrs)):
        print(f"  region {i}: {sum(hist.values()):5d} instr  " + " ".join(f"{k}={hist[k]}" for k in keys if hist[k]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
