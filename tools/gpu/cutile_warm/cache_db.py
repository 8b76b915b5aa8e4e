"""Reading (and pruning) a cuTile disk cache: `<dir>/cache.db`, one sqlite table.

cuTile's schema (cutile_cache/_cache.py in cuda-tile 1.7.0): table `cache` with
`key` (hex sha256, primary key), `blob` (the cubin), `blob_size`, `atime` (last use, for
LRU eviction) and `metadata` (JSON: kernel_names = the mangled symbols compiled into the
cubin, compiler_version, compilation time, tileiras remarks).  The key hashes the
tileiras version text, the target ("sm_90"), the optimisation level, the TileIR
bytecode (which embeds the kernel's source paths) and any preview features.
"""
from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass

CACHE_FILE = "cache.db"


def db_path(path: str) -> str:
    """A cache dir or a cache.db file -> the cache.db path."""
    return os.path.join(path, CACHE_FILE) if os.path.isdir(path) else path


def _connect_read_only(path: str) -> sqlite3.Connection:
    p = db_path(path)
    if not os.path.exists(p):
        raise FileNotFoundError(f"no cuTile cache database at {p}")
    return sqlite3.connect(f"file:{p}?mode=ro", uri=True)


@dataclass(frozen=True)
class Entry:
    key: str
    size: int
    symbols: tuple[str, ...]
    compile_seconds: float | None
    compiler_version: str | None


def entries(path: str) -> list[Entry]:
    if not os.path.exists(db_path(path)):
        return []
    conn = _connect_read_only(path)
    try:
        rows = conn.execute("SELECT key, blob_size, metadata FROM cache").fetchall()
    finally:
        conn.close()
    out = []
    for key, size, metadata in rows:
        meta = json.loads(metadata) if metadata else {}
        out.append(Entry(key, size, tuple(meta.get("kernel_names") or ()),
                         meta.get("compilation_time_seconds"), meta.get("compiler_version")))
    return out


def keys(path: str) -> set[str]:
    return {e.key for e in entries(path)}


def has_key(path: str, key: str) -> bool:
    if not os.path.exists(db_path(path)):
        return False
    conn = _connect_read_only(path)
    try:
        return conn.execute("SELECT 1 FROM cache WHERE key = ?", (key,)).fetchone() is not None
    finally:
        conn.close()


def prune(path: str, keep: set[str]) -> int:
    """Delete every entry whose key is not in `keep` (then VACUUM); returns the count."""
    conn = sqlite3.connect(db_path(path))
    try:
        stale = [k for (k,) in conn.execute("SELECT key FROM cache") if k not in keep]
        conn.executemany("DELETE FROM cache WHERE key = ?", [(k,) for k in stale])
        conn.commit()
        conn.execute("VACUUM")
    finally:
        conn.close()
    return len(stale)
