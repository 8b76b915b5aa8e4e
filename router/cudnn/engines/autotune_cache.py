"""The persistent autotune cache: one JSON file per (graph signature, device, library).

A record says which plan won when every plan of a graph was timed on one device with one
library version: the winner's `(engine_id, public knobs)` and plan name, and every timed
plan's median. The file name is a hash of the key; the key itself is stored in the file
and compared on load, as is a checksum of the content. Rules:
- writes are atomic (a temporary file in the same folder, fsync, `os.replace`), so a
  reader in any process sees a whole old record or a whole new one, never a part; two
  processes tuning the same graph both write whole records and the last one stays;
- a file that cannot be read, parsed, has another format, key or checksum is *corrupt*:
  load() warns (AutotuneCacheWarning, once per file version) and returns None: it is
  never trusted, and the next tuning overwrites it;
- loaded records are memoized per process by (path, mtime, size), so planning a graph
  costs one `stat` when its record is known.
Location: `$CUDNN_AUTOTUNE_CACHE` (a folder; `0`, `off` or `none` turns the cache off),
else `$XDG_CACHE_HOME/cudnn-pygraph/autotune` (`~/.cache/...`).
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV = "CUDNN_AUTOTUNE_CACHE"
FORMAT = 1
_OFF = {"0", "off", "none", "false", "no"}


class AutotuneCacheWarning(UserWarning):
    """A cache entry was ignored (corrupt, of another format, or stale)."""


@dataclass(frozen=True)
class DeviceId:
    """The device a timing belongs to: its name and SM version (major * 10 + minor)."""
    name: str
    sm: int


@dataclass(frozen=True)
class CacheKey:
    signature: str     # hash of the graph's structure (autotune.graph_signature)
    device: DeviceId
    library: str       # library version (autotune.library_version)

    def as_json(self) -> dict[str, Any]:
        return {"signature": self.signature, "device": self.device.name,
                "sm": self.device.sm, "library": self.library}

    def file_name(self) -> str:
        text = json.dumps(self.as_json(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:40] + ".json"


@dataclass(frozen=True)
class PlanKey:
    """One plan as a record names it: `(engine_id, public knobs)` (knobs None when the
    entry has no replayable knobs) and its plan name."""
    engine_id: int
    knobs: tuple[tuple[str, int], ...] | None
    name: str

    def as_json(self) -> dict[str, Any]:
        return {"engine_id": self.engine_id,
                "knobs": None if self.knobs is None else [list(k) for k in self.knobs],
                "name": self.name}

    @staticmethod
    def from_json(data: Any) -> PlanKey:
        knobs = data["knobs"]
        if knobs is not None:
            knobs = tuple((str(k), int(v)) for k, v in knobs)
        engine_id = data["engine_id"]
        if isinstance(engine_id, bool) or not isinstance(engine_id, int):
            raise ValueError(f"engine_id {engine_id!r} is not an int")
        return PlanKey(engine_id, knobs, str(data["name"]))


@dataclass(frozen=True)
class Record:
    key: CacheKey
    winner: PlanKey
    #: (plan, median seconds) of every plan that was timed, in plan-list order.
    measured: tuple[tuple[PlanKey, float], ...]
    #: every plan the tuning tried (timed, or declined / failed on that device).
    tried: tuple[PlanKey, ...] = ()
    created: float = 0.0

    def payload(self) -> dict[str, Any]:
        return {"format": FORMAT, "key": self.key.as_json(), "winner": self.winner.as_json(),
                "measured": [[p.as_json(), s] for p, s in self.measured],
                "tried": [p.as_json() for p in self.tried], "created": self.created}

    def winner_seconds(self) -> float | None:
        return next((s for p, s in self.measured if p == self.winner), None)


def _checksum(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def parse_record(text: str, key: CacheKey) -> Record:
    """The record in `text` for `key`; ValueError saying why it cannot be trusted."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    if data.get("format") != FORMAT:
        raise ValueError(f"format {data.get('format')!r}, expected {FORMAT}")
    checksum = data.pop("checksum", None)
    if checksum != _checksum(data):
        raise ValueError("checksum mismatch (the file was edited or damaged)")
    if data.get("key") != key.as_json():
        raise ValueError("the record belongs to another key (a hash collision or a moved "
                         "file)")
    try:
        winner = PlanKey.from_json(data["winner"])
        measured = tuple((PlanKey.from_json(p), float(s)) for p, s in data["measured"])
        tried = tuple(PlanKey.from_json(p) for p in data["tried"])
        created = float(data.get("created", 0.0))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"malformed record ({type(exc).__name__}: {exc})") from None
    if winner not in {p for p, _ in measured} or not {p for p, _ in measured} <= set(tried):
        raise ValueError("the winner is not among the measured plans")
    return Record(key, winner, measured, tried, created)


def default_directory() -> Path | None:
    """The cache folder from the environment; None when the cache is turned off."""
    env = os.environ.get(ENV)
    if env is not None:
        if env.strip().lower() in _OFF or not env.strip():
            return None
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cudnn-pygraph" / "autotune"


class AutotuneCache:
    """The records of one folder (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self._lock = threading.Lock()
        #: {path: (mtime_ns, size, record or None)}
        self._memo: dict[Path, tuple[int, int, Record | None]] = {}

    def path_of(self, key: CacheKey) -> Path:
        return self.directory / key.file_name()

    def load(self, key: CacheKey) -> Record | None:
        """The record for `key`, or None (missing; corrupt ones warn once per version)."""
        path = self.path_of(key)
        try:
            st = path.stat()
        except OSError:
            return None
        stamp = (st.st_mtime_ns, st.st_size)
        with self._lock:
            memo = self._memo.get(path)
        if memo is not None and memo[:2] == stamp:
            return memo[2]
        try:
            record: Record | None = parse_record(path.read_text(encoding="utf-8"), key)
        except OSError:
            return None  # removed or replaced while we looked: a miss
        except ValueError as exc:
            warnings.warn(f"autotune cache: ignoring {path}: {exc}", AutotuneCacheWarning,
                          stacklevel=3)
            record = None
        with self._lock:
            self._memo[path] = (*stamp, record)
        return record

    def store(self, record: Record) -> Path:
        """Write `record` atomically; returns its path."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path_of(record.key)
        payload = record.payload()
        payload["checksum"] = _checksum(payload)
        text = json.dumps(payload, indent=1, sort_keys=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=self.directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return path

    def __repr__(self) -> str:
        return f"AutotuneCache({str(self.directory)!r})"


_DEFAULT: dict[Path, AutotuneCache] = {}
_DEFAULT_LOCK = threading.Lock()


def cache_for(directory: str | os.PathLike[str] | None) -> AutotuneCache | None:
    """The process's AutotuneCache of `directory` (one per folder, so the memo is shared);
    None for None."""
    if directory is None:
        return None
    path = Path(directory).expanduser()
    with _DEFAULT_LOCK:
        cache = _DEFAULT.get(path)
        if cache is None:
            cache = _DEFAULT[path] = AutotuneCache(path)
        return cache


def default_cache() -> AutotuneCache | None:
    return cache_for(default_directory())


def now() -> float:
    return time.time()
