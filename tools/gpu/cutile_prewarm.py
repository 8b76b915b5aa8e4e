#!/usr/bin/env python3
"""Fill cuTile's disk cache on this (GPU-less) host, so the GPU machine does not JIT.

The GPU suites launch cuTile kernels that JIT-compile on first use (tileiras + ptxas);
their disk cache (CUDA_TILE_CACHE_DIR=.tilecache) travels as .kit/tilecache.tar.xz.  This
tool puts into that cache every specialization the suites launch, compiled here for sm_90
under the key the GPU's launch path will look up (tools/gpu/cutile_warm/: the key covers the
kernel's bytecode, which embeds the source path, so entries are made for --remote-root,
where the GPU machine reads the sources).

Where the specializations come from (any mix):
  --suites cutile,smoke,torchops,bench,cuseqlens,cutiletma
                                         replay the suites' launches on CPU tensors through
                                         cuTile's real launch path (default: those six;
                                         also: stagetimes); cuseqlens and cutiletma include
                                         the CUDNN_CUTILE_SLICE_TMA=0 build they run
  --from-cache DIR_OR_DB                 every symbol an earlier cache (e.g. the GPU's) holds
  --symbols FILE                         mangled symbols, one a line

Run from anywhere, with a Python that has the `cutile` extra installed (the compiler is found in
that environment, or on PATH):
  python3 tools/gpu/cutile_prewarm.py
then pack:  tar cf - .tilecache | xz -T0 -9 > .kit/tilecache.tar.xz   (or --pack)
--list prints the specializations; --dry-run reports which keys the cache lacks;
--prune drops entries no listed specialization uses (stale kernels); --verify replays
the suites through cuTile's real launch path (stub driver, no compiler) and reports
every launch that would still JIT on the GPU (--verify-only: that check alone).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)  # the cutile_warm package

from cutile_warm.source_paths import DEFAULT_REMOTE_ROOT  # noqa: E402


def _parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.splitlines()[2:]))
    p.add_argument("--suites", default=None,
                   help="comma-separated suites to replay (default cutile,smoke,torchops,"
                        "bench,cuseqlens,cutiletma unless --from-cache/--symbols is given; "
                        "'none' for none)")
    p.add_argument("--from-cache", action="append", default=[], metavar="DIR_OR_DB")
    p.add_argument("--symbols", action="append", default=[], metavar="FILE")
    p.add_argument("--cache-dir", default=os.path.join(REPO, ".tilecache"))
    p.add_argument("--repo", default=REPO, help="tree whose kernel sources are compiled")
    p.add_argument("--remote-root", default=DEFAULT_REMOTE_ROOT,
                   help="where the GPU machine sees that tree (default %(default)s)")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--kernel", action="append", default=[],
                   help="only specializations of this kernel (repeatable)")
    p.add_argument("--limit", type=int, default=0, help="stop after N specializations")
    p.add_argument("--list", action="store_true", help="print the symbols and exit")
    p.add_argument("--dry-run", action="store_true",
                   help="compute keys, report which the cache holds, compile nothing")
    p.add_argument("--prune", action="store_true",
                   help="afterwards delete cache entries no listed specialization uses")
    p.add_argument("--verify", action="store_true",
                   help="afterwards replay the suites through the launch path: any miss?")
    p.add_argument("--verify-only", action="store_true", help="only the --verify check")
    p.add_argument("--pack", metavar="TAR_XZ",
                   help="afterwards write the cache dir as a .tar.xz (the .kit format)")
    return p.parse_args(argv)


def _suites(args, for_replay: bool = False) -> list[str]:
    from cutile_warm.suite_cases import DEFAULT_SUITES
    if args.suites is None:
        quiet = (args.from_cache or args.symbols) and not for_replay
        return [] if quiet else list(DEFAULT_SUITES)
    return [] if args.suites == "none" else args.suites.split(",")


def collect(args) -> list[str]:
    """Symbols to warm, in first-seen order, with where each list came from."""
    from cutile_warm.cache_db import entries
    symbols: list[str] = []
    suites = _suites(args)
    if suites:
        from cutile_warm.recorder import LaunchRecorder
        from cutile_warm.suite_cases import cases_of, drive
        for suite in suites:
            t0 = time.perf_counter()
            with LaunchRecorder() as rec:
                for case in cases_of([suite]):
                    drive(case)
            found = [s.symbol for s in rec.specializations]
            bad = {s.sm for s in rec.specializations} - {(9, 0)}
            if bad:
                raise SystemExit(f"recorded launches for {bad}, expected sm_90 only")
            print(f"suite {suite}: {rec.launches} launches, {len(found)} specializations "
                  f"({time.perf_counter() - t0:.1f} s)", flush=True)
            symbols += found
    for path in args.from_cache:
        found = [s for e in entries(path) for s in e.symbols]
        print(f"cache {path}: {len(found)} specializations", flush=True)
        symbols += found
    for path in args.symbols:
        with open(path) as f:
            found = [line.strip() for line in f if line.strip() and not line.startswith("#")]
        print(f"file {path}: {len(found)} specializations", flush=True)
        symbols += found
    unique = list(dict.fromkeys(symbols))
    if args.kernel:
        unique = [s for s in unique if s.split("_K")[0] in args.kernel]
    if args.limit:
        unique = unique[:args.limit]
    return unique


def main(argv=None) -> int:
    args = _parse(argv)
    from cutile_warm.session import add_source_roots, missing_toolchain
    add_source_roots(args.repo)
    why = missing_toolchain()
    if why:
        print(f"cutile_prewarm: cannot run: {why}", file=sys.stderr)
        return 2
    from cutile_warm.driver_stub import load_stub_driver
    load_stub_driver()   # before anything imports cuda.tile
    if args.verify_only:
        return 0 if _verify(args) else 1
    symbols = collect(args)
    print(f"{len(symbols)} distinct specializations", flush=True)
    if args.list:
        print("\n".join(symbols))
        return 0
    os.makedirs(args.cache_dir, exist_ok=True)
    t0 = time.perf_counter()
    if args.dry_run:
        outcomes = _dry_run(symbols, args)
    else:
        n = len(symbols)

        def report(i, o):
            size = f" {o.cubin_bytes / 1e6:.2f} MB" if o.cubin_bytes else ""
            extra = f" {o.error}" if o.error else ""
            print(f"[{i + 1}/{n}] {o.status:8s} {o.kernel} {o.seconds:6.1f} s{size} "
                  f"key {str(o.key)[:12]} ({time.perf_counter() - t0:.0f} s total){extra}",
                  flush=True)
        from cutile_warm.warm import warm
        outcomes = warm(symbols, repo=args.repo, cache_dir=args.cache_dir,
                        remote_root=args.remote_root, jobs=args.jobs, on_outcome=report)
    counts = {s: sum(o.status == s for o in outcomes)
              for s in ("cached", "compiled", "missing", "failed")}
    print(f"done in {time.perf_counter() - t0:.0f} s: " +
          ", ".join(f"{v} {k}" for k, v in counts.items() if v), flush=True)
    if args.prune and not args.dry_run:
        from cutile_warm.cache_db import prune
        keep = {o.key for o in outcomes if o.key}
        print(f"pruned {prune(args.cache_dir, keep)} stale entries", flush=True)
    _summary(args.cache_dir)
    verified = _verify(args) if args.verify else True
    if args.pack:
        parent, name = os.path.split(os.path.abspath(args.cache_dir))
        with open(args.pack, "wb") as out:
            # the GPU suite unpacks into .tilecache/ whatever this cache's folder is called
            tar = subprocess.Popen(["tar", "cf", "-", f"--exclude={name}/.unpacked",
                                    f"--transform=s,^{name},.tilecache,", "-C", parent, name],
                                   stdout=subprocess.PIPE)
            subprocess.run(["xz", "-T0", "-9"], stdin=tar.stdout, stdout=out, check=True)
            if tar.wait():
                raise SystemExit("tar failed")
        print(f"packed {args.pack}: {os.path.getsize(args.pack) / 1e6:.1f} MB")
    return 1 if counts["failed"] or not verified else 0


def _verify(args) -> bool:
    """Replay the suites through cuTile's launch path on the cache; True when none misses."""
    from cutile_warm.launch_check import LaunchPathCheck
    from cutile_warm.session import open_session
    from cutile_warm.suite_cases import cases_of, drive
    suites = _suites(args, for_replay=True)
    open_session(args.repo, args.cache_dir, args.remote_root)
    t0 = time.perf_counter()
    with LaunchPathCheck() as check:
        for case in cases_of(suites):
            drive(case)
    print(f"launch-path check ({','.join(suites)}): {check.launches} launches, "
          f"{len(check.hits)} specializations found in the cache, {len(check.misses)} would "
          f"JIT ({time.perf_counter() - t0:.0f} s)", flush=True)
    for symbol, name in check.misses.items():
        print(f"  would JIT {name}: {symbol}")
    return not check.misses


def _dry_run(symbols, args):
    """Keys only, in this process: which specializations the cache lacks."""
    from cutile_warm.cache_db import keys
    from cutile_warm.kernel_table import cache_key, signature_of
    from cutile_warm.session import open_session
    from cutile_warm.warm import Outcome
    table = open_session(args.repo, args.cache_dir, args.remote_root)
    present = keys(args.cache_dir)
    outcomes = []
    for s in symbols:
        t = time.perf_counter()
        name, sig = signature_of(s)
        key = cache_key(table[name], sig)
        status = "cached" if key in present else "missing"
        outcomes.append(Outcome(s, name, status, key, time.perf_counter() - t))
        if status == "missing":
            print(f"missing {name} key {key[:12]} {s}", flush=True)
    return outcomes


def _summary(cache_dir):
    from cutile_warm.cache_db import entries
    es = entries(cache_dir)
    print(f"cache {cache_dir}: {len(es)} entries, {sum(e.size for e in es) / 1e6:.1f} MB of "
          "cubins")


if __name__ == "__main__":
    raise SystemExit(main())
