"""Isolates what compute-sanitizer memcheck reports on cuTile kernels that read and write
through run-time-sized `Array.slice` views (GPU machine; a diagnostic, not a test).

Memcheck flagged `la_wy_fwd_kernel` (its q load and P store, both through slices
[bos, eos) of token-major arrays) with 4-byte accesses 1.6-4.8 MB past the workspace on
a well-formed table (T = 200, N = 3, H = 2, K = V = 64). One hypothesis: cuTile lowers a
slice with run-time bounds to a TMA descriptor that the kernel builds on the device, and
the sanitizer sees those descriptor writes (or the bulk copies through them) as plain
accesses it cannot place. The cases take that kernel's access pattern apart, each in
its own process under memcheck:

  a  slice_dev_bounds    one CTA per (chunk-table row, head), as la_wy_fwd: sequence and
                         chunk from a device table, bounds from device cu_seqlens, the
                         chunk's [64, 1, 64] tile loaded from a slice of x (own tensor,
                         like q) and stored into a slice of y (a view into a workspace
                         buffer at a region offset, like P)
  b  slice_dev_no_tma    a with allow_tma=False on the load and the store
  c  slice_arg_bounds    a with bos / eos / chunk passed as launch arguments (one launch
                         per chunk-table row): no device-loaded bound reaches the slice
  d  plain_index         no slice view: the tile index over the whole [T, H, D] array
  e  gdn_forward         the engine's GDN forward (kernels/fwd.chunked_fwd) on that table,
                         with a workspace of exactly the plan's size, in the build
                         CUDNN_CUTILE_SLICE_TMA picks (passed on to the sanitized process;
                         default TMA; =0 is the engine's memcheck build, as b)

Each case checks its result against torch first (a wrong copy is reported as such).

What the sm_90 builds hold (tileiras 13.4.92, cuobjdump -sass of each case's cubin on
the build machine): a: UTMALDG.3D / UTMASTG.3D plus 2 ATOMG.E.EXCH (4-byte exchanges:
the kernel writes the slice's tensor-map descriptor into global memory) and
UTMACCTL.IV (descriptor cache invalidate); b: no TMA at all (LDG.E.128 / STG.E.128);
c and d: TMA through host-built descriptors (UTMACCTL.PF prefetch, no ATOMG).
la_wy_fwd_kernel (GDN forward, this shape) has 3 UTMALDG.3D, 3 UTMASTG.3D and 6
ATOMG.E.EXCH. So if only a and e report errors, the 4-byte accesses are most likely those
descriptor writes into memory the sanitizer does not know as an allocation; errors in c
or d would point at TMA itself, in b at the slice arithmetic.

Measured (H100, tileiras 13.4.92, `gpu_suite.sh cutilememcheck`): every case computes the
right result; under memcheck a and e report ~640 "Invalid __global__ atomic of size 4
bytes ... out of bounds" each, at the kernel's entry (the tensor-map writes), addresses
megabytes away from every buffer of the call; b, c and d are clean. The engine's kernels
rebuilt with allow_tma=False on every access through a sequence slice (then a hand
edit; now the opt-in CUDNN_CUTILE_SLICE_TMA=0) made e and all 30 cuTile cases of
tests/numerics/test_cu_seqlens_safety.py clean under memcheck (0 errors), and the cuTile
GDN forward 2.2x slower at the bench shape (0.815 -> 1.81 ms; fwd+bwd 4.9 -> 12.2 ms):
the kernels' own accesses stay inside their buffers on every malformed table; the
reports are the device-built tensor maps.

Run from the repository root on the GPU machine (tools/gpu/gpu_suite.sh stage
cutilememcheck):
  python3 tools/gpu/cutile_memcheck_probe.py              every case without the
                                                          sanitizer (compiles, checks), then
                                                          each under memcheck; a table of
                                                          which cases report errors
  python3 tools/gpu/cutile_memcheck_probe.py --case a     one case in this process
Exit status: 0 when no case reports a memcheck error or a wrong result, 1 otherwise.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys

T, N, H, D, BT = 200, 3, 2, 64, 64
TABLE = [0, 50, 120, 200]
CASES = {"a": "slice_dev_bounds", "b": "slice_dev_no_tma", "c": "slice_arg_bounds",
         "d": "plain_index", "e": "gdn_forward"}
WORKSPACE_OFFSET = 4096   # where y sits in its workspace buffer (a carved region, like P)


try:   # the kernels need cuda.tile; --help and the sanitizer driver do not
    import cuda.tile as ct
except ImportError:
    ct = None

if ct is not None:
    ZERO = ct.PaddingMode.ZERO

    def through_tensor_cores(t, dtype, BT_: int, D_: int):
        """t [BT, 1, D] times the identity on the tensor cores (exact for bf16): the load
        feeds an mma, as la_wy_fwd's do, so cuTile stages it in shared memory (a plain
        load-to-store copy compiles to LDG / STG and never reaches TMA)."""
        r = ct.expand_dims(ct.arange(D_, dtype=ct.int32), axis=1)
        c = ct.expand_dims(ct.arange(D_, dtype=ct.int32), axis=0)
        eye = ct.astype(ct.where(r == c, 1.0, 0.0), dtype)
        out = ct.mma(ct.reshape(t, (BT_, D_)), eye, ct.zeros((BT_, D_), dtype=ct.float32))
        return ct.reshape(ct.astype(out, dtype), (BT_, 1, D_))

    @ct.kernel
    def slice_dev_bounds_kernel(x, y, cu, table, BT_: ct.Constant[int], D_: ct.Constant[int],
                                TMA: ct.Constant[bool]):
        row = ct.bid(0)
        h = ct.bid(1)
        seq = ct.load(table, (row, 0), shape=())
        chunk = ct.load(table, (row, 1), shape=())
        bos = ct.load(cu, (seq,), shape=())
        eos = ct.load(cu, (seq + 1,), shape=())
        if chunk * BT_ < eos - bos:
            xs = x.slice(axis=0, start=bos, stop=eos)
            ys = y.slice(axis=0, start=bos, stop=eos)
            t = ct.load(xs, (chunk, h, 0), shape=(BT_, 1, D_), padding_mode=ZERO,
                        allow_tma=TMA)
            ct.store(ys, (chunk, h, 0), tile=through_tensor_cores(t, x.dtype, BT_, D_),
                     allow_tma=TMA)

    @ct.kernel
    def slice_arg_bounds_kernel(x, y, bos: int, eos: int, chunk: int, BT_: ct.Constant[int],
                                D_: ct.Constant[int]):
        h = ct.bid(1)
        xs = x.slice(axis=0, start=bos, stop=eos)
        ys = y.slice(axis=0, start=bos, stop=eos)
        t = ct.load(xs, (chunk, h, 0), shape=(BT_, 1, D_), padding_mode=ZERO)
        ct.store(ys, (chunk, h, 0), tile=through_tensor_cores(t, x.dtype, BT_, D_))

    @ct.kernel
    def plain_index_kernel(x, y, BT_: ct.Constant[int], D_: ct.Constant[int]):
        tb = ct.bid(0)
        h = ct.bid(1)
        t = ct.load(x, (tb, h, 0), shape=(BT_, 1, D_), padding_mode=ZERO)
        ct.store(y, (tb, h, 0), tile=through_tensor_cores(t, x.dtype, BT_, D_))


def chunk_rows(table: list[int], bt: int) -> list[tuple[int, int]]:
    """(sequence, chunk) of every chunk of a well-formed table, in order."""
    return [(n, c) for n in range(len(table) - 1)
            for c in range(-(-(table[n + 1] - table[n]) // bt))]


def _copy_operands(torch):
    """x [T, H, D] bf16 (own allocation) and y, a [T, H, D] view into a workspace buffer."""
    x = torch.randn(T, H, D, device="cuda").to(torch.bfloat16)
    nbytes = T * H * D * 2
    ws = torch.zeros(WORKSPACE_OFFSET + nbytes, dtype=torch.uint8, device="cuda")
    y = ws[WORKSPACE_OFFSET:].view(torch.bfloat16).view(T, H, D)
    return x, y, ws


def run_case(case: str) -> str | None:
    """Runs one case; None when its result is right, else what is wrong."""
    import torch

    stream = torch.cuda.current_stream()
    if case == "e":
        return _gdn_forward(torch)
    x, y, ws = _copy_operands(torch)
    print(f"{CASES[case]}: x {x.data_ptr():#x} ({x.numel() * 2} bytes), workspace "
          f"{ws.data_ptr():#x} ({ws.numel()} bytes), y at +{WORKSPACE_OFFSET}", flush=True)
    rows = chunk_rows(TABLE, BT)
    if case in ("a", "b"):
        cu = torch.tensor(TABLE, dtype=torch.int32, device="cuda")
        table = torch.tensor(rows, dtype=torch.int32, device="cuda")
        ct.launch(stream, (len(rows), H, 1), slice_dev_bounds_kernel,
                  (x, y, cu, table, BT, D, case == "a"))
    elif case == "c":
        for seq, chunk in rows:
            ct.launch(stream, (1, H, 1), slice_arg_bounds_kernel,
                      (x, y, TABLE[seq], TABLE[seq + 1], chunk, BT, D))
    elif case == "d":
        ct.launch(stream, ((T + BT - 1) // BT, H, 1), plain_index_kernel, (x, y, BT, D))
    else:
        raise ValueError(f"unknown case {case!r}")
    torch.cuda.synchronize()
    if not torch.equal(x, y):
        bad = (x != y).any(-1).any(-1).nonzero().flatten().tolist()
        return f"y != x on {len(bad)} rows (first {bad[:8]})"
    return None


def _gdn_forward(torch):
    """The engine's forward on TABLE, workspace of exactly fwd_layout's size."""
    import math

    from cudnn.linear_attention.cutile.kernels.fwd import chunked_fwd, fwd_layout

    gen = torch.Generator(device="cuda").manual_seed(0)
    rnd = lambda *s: torch.randn(*s, device="cuda", generator=gen)  # noqa: E731
    q = rnd(T, H, D).to(torch.bfloat16)
    k = torch.nn.functional.normalize(rnd(T, H, D), dim=-1).to(torch.bfloat16)
    v = rnd(T, H, D).to(torch.bfloat16)
    g = torch.nn.functional.logsigmoid(rnd(T, H)) * 0.5
    beta = torch.sigmoid(rnd(T, H))
    cu = torch.tensor(TABLE, dtype=torch.int32, device="cuda")
    lay = fwd_layout(T, N, H, D, D, kda=False, io_dtype=torch.bfloat16, io_itemsize=2,
                     int32_dtype=torch.int32, float32_dtype=torch.float32)
    ws = torch.zeros(lay.size, dtype=torch.uint8, device="cuda")
    print(f"gdn_forward: workspace {lay.size} bytes at {ws.data_ptr():#x}", flush=True)
    o = torch.full((T, H, D), float("nan"), device="cuda", dtype=torch.bfloat16)
    chunked_fwd(q, k, v, g, beta, cu, o, lay.carve(ws), kda=False, scale=1 / math.sqrt(D))
    torch.cuda.synchronize()
    if not torch.isfinite(o).all():
        return "o has non-finite rows"
    return None


def _sanitize(case: str, timeout: int) -> tuple[str, int | None, str]:
    """(verdict, error count or None, excerpt) of one case under memcheck."""
    cmd = ["compute-sanitizer", "--tool", "memcheck", "--print-limit", "6",
           sys.executable, os.path.abspath(__file__), "--case", case]
    env = dict(os.environ, PYTORCH_NO_CUDA_MEMORY_CACHING="1")
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", None, ""
    out = res.stdout + res.stderr
    m = re.search(r"ERROR SUMMARY: (\d+) error", out)
    errors = int(m.group(1)) if m else None
    lines = [ln for ln in out.splitlines() if ln.strip()]
    keep = [ln for ln in lines if re.search(r"Invalid|Address|is out of bounds|by thread|"
                                            r"in .*kernel|WRONG|workspace|ERROR SUMMARY", ln)]
    verdict = "clean" if errors == 0 and res.returncode == 0 else (
        f"{errors} errors" if errors else f"rc={res.returncode}")
    return verdict, errors, "\n".join(keep[:24] or lines[-12:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES), help="run one case in this process")
    parser.add_argument("--cases", default="".join(sorted(CASES)),
                        help="cases to run under the sanitizer (default: all)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per sanitized case")
    args = parser.parse_args()
    if args.case:
        wrong = run_case(args.case)
        print(f"case {args.case} ({CASES[args.case]}): {'WRONG: ' + wrong if wrong else 'ok'}",
              flush=True)
        return 1 if wrong else 0
    print(f"T = {T}, N = {N}, H = {H}, D = {D}, table {TABLE}, tile [{BT}, 1, {D}] bf16")
    failed = False
    for case in args.cases:   # without the sanitizer first: compiles into the cache, checks
        wrong = run_case(case)
        print(f"plain   {case} {CASES[case]:18s} {'WRONG: ' + wrong if wrong else 'ok'}",
              flush=True)
        failed |= wrong is not None
    if shutil.which("compute-sanitizer") is None:
        print("compute-sanitizer is not on PATH")
        return 3
    rows = []
    for case in args.cases:
        verdict, _, excerpt = _sanitize(case, args.timeout)
        rows.append((case, verdict))
        print(f"--- memcheck {case} {CASES[case]}: {verdict}\n{excerpt}", flush=True)
        failed |= verdict != "clean"
    print("\nmemcheck per case:")
    for case, verdict in rows:
        print(f"  {case} {CASES[case]:18s} {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
