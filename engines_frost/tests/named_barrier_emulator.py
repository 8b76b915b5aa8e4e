"""Named-barrier semantics for the warp-specialised kernels' hand-over tests (pure Python).

Each actor stands for one role's threads and runs a program of operations:
("arrive", bar) adds the role's threads to barrier bar; ("sync", bar) adds them and blocks
until the barrier holds its capacity, which releases every waiter and starts the
barrier's next generation; ("write", tile, chunk) tags a tile with the chunk whose data it
now holds; ("read", tile, chunk) starts a read that must see that chunk's data;
("done", tile) ends the actor's read. A random scheduler interleaves the actors; the run
fails (AssertionError) on a deadlock, a barrier over-arrived, a write to a tile another
role is reading, a read of another chunk's data, or arrivals left at exit.
"""
from __future__ import annotations

import random


class Deadlock(AssertionError):
    pass


def run_actors(programs: dict, threads: dict, capacity: dict, seed: int, label: str = "") -> None:
    """programs: actor -> iterable of operations; threads: actor -> its thread count;
    capacity: barrier id -> the thread count that completes it."""
    rng = random.Random(seed)
    count, gen, blocked = {}, {}, {}
    programs = {name: iter(ops) for name, ops in programs.items()}
    pending = {name: next(ops, None) for name, ops in programs.items()}
    tag = {}  # tile -> chunk whose data it holds
    readers = {}  # tile -> actors reading it
    while any(op is not None for op in pending.values()):
        runnable = [a for a, op in pending.items()
                    if op is not None and (a not in blocked or gen.get(blocked[a][0], 0) > blocked[a][1])]
        if not runnable:
            raise Deadlock(f"{label}: {pending} blocked on {blocked}")
        actor = rng.choice(runnable)
        op = pending[actor]
        if actor in blocked:  # its sync completed: move on
            del blocked[actor]
        elif op[0] in ("arrive", "sync"):
            bar = op[1]
            count[bar] = count.get(bar, 0) + threads[actor]
            assert count[bar] <= capacity[bar], f"{label}: barrier {bar} over-arrived"
            if count[bar] == capacity[bar]:
                count[bar] = 0
                gen[bar] = gen.get(bar, 0) + 1
            elif op[0] == "sync":
                blocked[actor] = (bar, gen.get(bar, 0))
                continue
        elif op[0] == "write":
            _, tile, i = op
            assert not readers.get(tile), f"{label}: chunk {i}'s {tile} written while {readers[tile]} read it"
            tag[tile] = i
        elif op[0] == "read":
            _, tile, i = op
            assert tag.get(tile) == i, f"{label}: {actor} reads {tile} for chunk {i}, holding chunk {tag.get(tile)}"
            readers.setdefault(tile, set()).add(actor)
        elif op[0] == "done":
            readers[op[1]].discard(actor)
        pending[actor] = next(programs[actor], None)
    assert not any(count.values()), f"{label}: arrivals left at exit {count}"


def fails(runner, chunks_range, seeds: int = 300, **mutation) -> bool:
    """Whether runner(chunks, seed, **mutation) fails for some chunk count and seed."""
    for chunks in chunks_range:
        for seed in range(seeds):
            try:
                runner(chunks, seed, **mutation)
            except AssertionError:
                return True
    return False
