"""GraphCache: LRU order and bound, counters, failed builds, and concurrent use; the op
cache key (what makes two calls share a graph)."""
from __future__ import annotations

import threading
import time

import pytest
import torch

from cudnn.linear_attention.ops._graph_cache import GraphCache
from cudnn.linear_attention.ops._op_factory import cache_key_function
from cudnn.linear_attention.ops.gdn import OPS


def test_hit_returns_the_built_entry_and_counts():
    cache = GraphCache("c", maxsize=4)
    first = cache.get_or_build("a", lambda: ["built a"])
    again = cache.get_or_build("a", lambda: pytest.fail("a hit must not build"))
    assert again is first
    info = cache.info()
    assert (info.hits, info.misses, info.builds, info.size) == (1, 1, 1, 1)


def test_least_recently_used_entry_is_evicted_first():
    cache = GraphCache("c", maxsize=2)
    cache.get_or_build("a", lambda: 1)
    cache.get_or_build("b", lambda: 2)
    cache.get_or_build("a", lambda: pytest.fail("hit"))  # a is now the most recent
    cache.get_or_build("c", lambda: 3)
    assert cache.keys() == ["a", "c"]
    assert cache.info().evictions == 1


def test_shrinking_maxsize_evicts_now():
    cache = GraphCache("c", maxsize=8)
    for key in "abcdef":
        cache.get_or_build(key, lambda k=key: k)
    cache.maxsize = 2
    assert cache.keys() == ["e", "f"]
    assert len(cache) == 2


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_maxsize_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match="maxsize"):
        GraphCache("c", maxsize=bad)


def test_a_failed_build_caches_nothing():
    cache = GraphCache("c")

    def fail():
        raise RuntimeError("no engine")

    with pytest.raises(RuntimeError, match="no engine"):
        cache.get_or_build("a", fail)
    assert "a" not in cache
    assert cache.get_or_build("a", lambda: 7) == 7


def test_threads_missing_the_same_key_build_it_once():
    cache = GraphCache("c")
    builds = []
    start = threading.Barrier(8)
    got = []

    def build():
        builds.append(1)
        time.sleep(0.05)  # long enough for every other thread to miss too
        return object()

    def worker():
        start.wait()
        got.append(cache.get_or_build("k", build))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1
    assert len(got) == 8 and all(entry is got[0] for entry in got)


def test_concurrent_distinct_keys_stay_within_the_bound():
    cache = GraphCache("c", maxsize=5)
    errors = []

    def worker(base):
        try:
            for i in range(200):
                key = (base, i % 13)
                assert cache.get_or_build(key, lambda k=key: k) == key
        except Exception as exc:  # surfaced below, with the thread's failure
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(b,)) for b in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    info = cache.info()
    assert info.size == 5
    assert info.hits + info.misses == 6 * 200


_SIGNATURE = OPS.forward_signature
cache_key = cache_key_function(_SIGNATURE)


def _values(q, **changes):
    T, H, K = q.shape
    values = dict(q=q, k=torch.zeros(T, H, K), v=torch.zeros(T, H, K), g=torch.zeros(T, H),
                  beta=torch.zeros(T, H), cu_seqlens=torch.tensor([0, T]), scale=0.125,
                  output_final_state=False)
    values.update(changes)
    return _SIGNATURE.positional(values)


def test_cache_key_tells_apart_what_shapes_the_graph():
    q = torch.zeros(6, 2, 8)
    base = cache_key(_values(q))
    assert cache_key(_values(torch.ones(6, 2, 8))) == base  # data never matters
    different = [
        _values(torch.zeros(7, 2, 8)),                       # dims
        _values(torch.zeros(6, 8, 2).transpose(1, 2)),       # strides
        _values(torch.zeros(6, 2, 8, dtype=torch.float16)),  # dtype
        _values(q, scale=0.25),                              # attribute
        _values(q, output_final_state=True),
        _values(q, plan_name="plan"),
        _values(q, initial_state=torch.zeros(1, 2, 8, 8)),   # an optional tensor given
        _values(q, initial_state=torch.zeros(1, 2, 8, 8).transpose(2, 3)),
        _values(q, cu_seqlens=torch.tensor([0, 6], dtype=torch.int32)),
    ]
    keys = [cache_key(v) for v in different]
    assert base not in keys
    assert len(set(keys)) == len(keys)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
