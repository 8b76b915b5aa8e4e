"""L0: the warp-specialised forward's hand-over (kernels/fwd_ws.py) under named-barrier
semantics, over random interleavings of its two roles. Pure Python (no cutlass).

Each role is one actor standing for its 256 threads: bar.arrive adds 256 arrivals to a
barrier, bar.sync adds 256 and blocks until the barrier holds BLOCK_THREADS, which
releases every waiter and starts its next generation. The producer writes chunk i's
operand set (i % SETS) between its EMPTY wait and its FULL arrive; the consumers read it
between their FULL wait and their EMPTY arrive, with the kernel's conditions
(fwd_ws.waits_for_release, fwd_ws.releases) and barrier ids. Checked for 0 to 7 chunks
and many schedules: no deadlock, every chain reads its own chunk's set, no set is written
while a chain reads it, and no barrier is left holding arrivals at exit. The mutations
at the end must each be caught, so the check can fail.
"""
import pytest
from named_barrier_emulator import fails, run_actors

from cudnn.linear_attention.frost.kernels import fwd_ws as ws

HALF = ws.ROLE_THREADS


def producer_ops(chunks, waits=ws.waits_for_release):
    for i in range(chunks):
        b = i % ws.SETS
        if waits(i):
            yield ("sync", ws.BAR_EMPTY + b)
        yield ("write", b, i)
        yield ("arrive", ws.BAR_FULL + b)


def consumer_ops(chunks, releases=ws.releases):
    for i in range(chunks):
        b = i % ws.SETS
        yield ("sync", ws.BAR_FULL + b)
        yield ("read", b, i)
        yield ("done", b)
        if releases(i, chunks):
            yield ("arrive", ws.BAR_EMPTY + b)


def run(chunks, seed, producer=producer_ops, consumer=consumer_ops):
    programs = {"producer": producer(chunks), "consumer": consumer(chunks)}
    capacity = {ws.BAR_FULL + b: ws.BLOCK_THREADS for b in range(ws.SETS)}
    capacity.update({ws.BAR_EMPTY + b: ws.BLOCK_THREADS for b in range(ws.SETS)})
    run_actors(programs, {"producer": HALF, "consumer": HALF}, capacity, seed, f"{chunks} chunks")


@pytest.mark.parametrize("chunks", range(8))
def test_hand_over_is_safe_under_any_interleaving(chunks):
    for seed in range(300):
        run(chunks, seed)


def test_barrier_ids_are_distinct_and_not_syncthreads():
    ids = [ws.BAR_PRODUCER, *(ws.BAR_FULL + b for b in range(ws.SETS)), *(ws.BAR_EMPTY + b for b in range(ws.SETS))]
    assert len(set(ids)) == len(ids) and 0 not in ids and max(ids) < 16


def _fails(chunks_range, **mutation):
    return fails(run, chunks_range, **mutation)


def test_mutations_are_caught():
    # the producer not waiting for the release: a set rewritten under a chain (or a stale read)
    assert _fails(range(3, 7), producer=lambda n: producer_ops(n, waits=lambda i: False))
    # waiting from the second chunk on: nobody ever releases set 1 for it
    assert _fails(range(2, 5), producer=lambda n: producer_ops(n, waits=lambda i: i >= 1))
    # consumers releasing after every chunk: arrivals left at exit
    assert _fails(range(1, 4), consumer=lambda n: consumer_ops(n, releases=lambda i, c: True))
    # releasing before the chain's reads are done
    def early(n):
        for op in consumer_ops(n):
            if op[0] == "done":
                continue
            if op[0] == "read":
                yield op
                i = op[2]
                if ws.releases(i, n):
                    yield ("arrive", ws.BAR_EMPTY + op[1])
                yield ("done", op[1])
                continue
            if op[0] == "arrive":
                continue
            yield op
    assert _fails(range(3, 7), consumer=early)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
