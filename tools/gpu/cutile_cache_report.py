#!/usr/bin/env python3
"""What a cuTile disk cache holds, and how much of it this machine had to JIT-compile.

  python3 tools/gpu/cutile_cache_report.py .tilecache [--stamp FILE] [--since FILE]

Prints the entry count and size and the tileiras version(s) the entries were made with
next to the tileiras on PATH (a different version means every lookup misses).
--stamp FILE writes the keys present now; --since FILE reports the entries whose keys
are not in FILE, i.e. the kernels this machine JIT-compiled after the cache was unpacked
(tools/gpu/gpu_suite.sh stamps in `tilecache`, reports in `packcache`).  Keys, not times:
entries made on other machines carry those machines' clocks.  Standard library only.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sqlite3
import subprocess
import sys


def _release(version_text: str | None) -> str:
    """'Cuda compilation tools, release 13.4, V13.4.92' out of tileiras --version."""
    for line in (version_text or "").splitlines():
        if "release" in line:
            return line.strip()
    return (version_text or "unknown").strip()


def _tileiras_here() -> str:
    from cudnn.linear_attention.cutile.kernel_cache import tileiras_path
    exe = tileiras_path()
    if exe is None:
        return "no tileiras installed"
    out = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    return _release(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cache_dir")
    p.add_argument("--stamp", metavar="FILE", help="write the keys present now to FILE")
    p.add_argument("--since", metavar="FILE",
                   help="report the entries whose keys FILE (a --stamp) does not list")
    a = p.parse_args(argv)
    db = os.path.join(a.cache_dir, "cache.db")
    if not os.path.exists(db):
        print(f"cuTile cache {a.cache_dir}: empty (no cache.db)")
        return 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = conn.execute("SELECT key, blob_size, metadata FROM cache").fetchall()
    conn.close()
    metas = [json.loads(m) if m else {} for _, _, m in rows]
    print(f"cuTile cache {a.cache_dir}: {len(rows)} entries, "
          f"{sum(s for _, s, _ in rows) / 1e6:.1f} MB of cubins")
    versions = collections.Counter(_release(m.get("compiler_version")) for m in metas)
    for version, n in versions.most_common():
        print(f"  made with {version}: {n} entries")
    print(f"  tileiras here: {_tileiras_here()}")
    if a.stamp:
        with open(a.stamp, "w") as f:
            f.write("".join(f"{key}\n" for key, _, _ in rows))
    if a.since:
        with open(a.since) as f:
            known = set(f.read().split())
        new = [m for (key, _, _), m in zip(rows, metas) if key not in known]
        seconds = sum(m.get("compilation_time_seconds") or 0 for m in new)
        kernels = collections.Counter((m.get("kernel_names") or ["?"])[0].split("_K")[0]
                                      for m in new)
        print(f"  JIT-compiled since {a.since}: {len(new)} entries, {seconds:.0f} s of "
              f"compilation" + (f" ({dict(kernels)})" if kernels else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
