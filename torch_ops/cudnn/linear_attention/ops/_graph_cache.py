"""`GraphCache`: a bounded, thread-safe LRU map from a call's configuration to its graph.

Each custom op owns one. A hit moves the entry to the most-recent end; a miss builds the
entry once, even when several threads miss the same key together (builds are serialized
by one build lock and the map is checked again under it), and inserting past `maxsize`
evicts the least recently used entries. A build that raises inserts nothing, so a call no
engine serves is explained afresh every time (and a newly installed engine is seen after
`clear()`). Lookups hold the map lock only for a dict access, never while building.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

V = TypeVar("V")

#: Entries per op. A graph and its compiled plan hold no device buffers (workspace and
#: outputs are allocated per call), so entries are small; the bound only keeps a stream
#: of new shapes (varlen batches change T) from growing memory without limit.
DEFAULT_MAXSIZE = 256


@dataclass(frozen=True)
class CacheInfo:
    name: str
    hits: int
    misses: int
    builds: int
    evictions: int
    size: int
    maxsize: int


class GraphCache(Generic[V]):
    def __init__(self, name: str, maxsize: int = DEFAULT_MAXSIZE) -> None:
        self.name = name
        self._maxsize = _checked_maxsize(maxsize)
        self._entries: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()
        self._build_lock = threading.RLock()
        self._hits = self._misses = self._builds = self._evictions = 0

    def get_or_build(self, key: Hashable, build: Callable[[], V]) -> V:
        entry = self.get(key)
        if entry is not None:
            return entry
        with self._lock:
            self._misses += 1
        with self._build_lock:
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None:  # another thread built it while we waited
                    self._entries.move_to_end(key)
                    return entry
            entry = build()
            with self._lock:
                self._builds += 1
                self._entries[key] = entry
                self._evict_over(self._maxsize)
            return entry

    def get(self, key: Hashable) -> V | None:
        """The entry of `key` (a hit, as get_or_build counts it), or None without building
        or counting a miss (the caller's get_or_build after it counts that)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                self._hits += 1
            return entry

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def keys(self) -> list[Hashable]:
        """Keys from least to most recently used."""
        with self._lock:
            return list(self._entries)

    def values(self) -> list[V]:
        """Entries from least to most recently used (no hit is counted)."""
        with self._lock:
            return list(self._entries.values())

    @property
    def maxsize(self) -> int:
        return self._maxsize

    @maxsize.setter
    def maxsize(self, value: int) -> None:
        with self._lock:
            self._maxsize = _checked_maxsize(value)
            self._evict_over(self._maxsize)

    def clear(self) -> None:
        """Drop every entry and zero the counters (as functools' cache_clear does)."""
        with self._lock:
            self._entries.clear()
            self._hits = self._misses = self._builds = self._evictions = 0

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self.name, self._hits, self._misses, self._builds,
                             self._evictions, len(self._entries), self._maxsize)

    def _evict_over(self, limit: int) -> None:
        while len(self._entries) > limit:
            self._entries.popitem(last=False)
            self._evictions += 1


def _checked_maxsize(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"graph cache maxsize must be an int >= 1, got {value!r}")
    return value
