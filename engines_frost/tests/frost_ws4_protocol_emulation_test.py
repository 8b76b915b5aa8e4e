"""L0: the four-role forward's hand-over (kernels/fwd_ws4.py) under named-barrier semantics,
over random interleavings of its roles. Pure Python (no cutlass).

Three actors: the chain (its two warpgroups, 256 threads), math (128) and copies (128).
bar.arrive adds the actor's threads to a barrier, bar.sync adds them and blocks until
the barrier holds its count (FULL / EMPTY: the CTA's 512; RAW_FULL / RAW_FREE: math +
copies, 256), which releases every waiter and starts its next generation. Each role's
program is the kernel's order of barriers and tile accesses, per chunk i:
- copies: RAW_FREE wait (i >= 1), write the raw q / k tiles and the gate / beta rows of
  parity i, RAW_FULL arrive, EMPTY[b] wait (i >= SETS), write v into set b, FULL[b] arrive;
- math: EMPTY[b] wait (i >= SETS), RAW_FULL wait, read the raw tiles (the rows stage),
  RAW_FREE arrive (if chunk i + 1 exists), write set b's math part, read the gate / beta
  rows of parity i (factors, Gram), FULL[b] arrive;
- chain: FULL[b] wait, read set b (both parts), EMPTY[b] arrive (if chunk i + 2 exists).
RawRing's (the raw rows in RING stages instead of one raw tile): the copies write chunk 0's
stage first, then per chunk i chunk i + 1's stage (after RING_EMPTY[(i + 1) mod RING] where
i + 1 >= RING) and chunk i's v (after EMPTY[b], i >= SETS), arriving RING_FULL and FULL;
math waits EMPTY[b] and RING_FULL[i mod RING], reads the stage, writes set b; the chain
reads the stage and set b, arriving EMPTY[b] and RING_EMPTY[i mod RING] where chunk i + SETS
(i + RING) exists. Checked for
0 to 7 chunks and many schedules: no deadlock, every read sees its own chunk's data,
nothing is written while another role reads it, and no barrier holds arrivals at exit.
The mutations at the end must each be caught, so the check can fail.
"""
import pytest
from named_barrier_emulator import fails, run_actors

from cudnn.linear_attention.frost.kernels import fwd_ws4 as ws4

SETS = ws4.SETS
THREADS = {"chain": 256, "math": 128, "copies": 128}
RING = ws4.RING
CAPACITY = {**{ws4.BAR_FULL + b: ws4.BLOCK_THREADS for b in range(SETS)},
            **{ws4.BAR_EMPTY + b: ws4.BLOCK_THREADS for b in range(SETS)},
            ws4.BAR_RAW_FULL: ws4.PAIR_THREADS, ws4.BAR_RAW_FREE: ws4.PAIR_THREADS}
RING_CAPACITY = {**{ws4.BAR_FULL + b: ws4.BLOCK_THREADS for b in range(SETS)},
                 **{ws4.BAR_EMPTY + b: ws4.BLOCK_THREADS for b in range(SETS)},
                 **{ws4.BAR_RING_FULL + r: ws4.PAIR_THREADS for r in range(RING)},
                 **{ws4.BAR_RING_EMPTY + r: ws4.RING_EMPTY_THREADS for r in range(RING)}}


def copies_ops(chunks, free_from=1, empty_from=SETS):
    for i in range(chunks):
        b = i % SETS
        if i >= free_from:
            yield ("sync", ws4.BAR_RAW_FREE)
        yield ("write", "raw", i)
        yield ("write", f"rows{b}", i)
        yield ("arrive", ws4.BAR_RAW_FULL)
        if i >= empty_from:
            yield ("sync", ws4.BAR_EMPTY + b)
        yield ("write", f"v{b}", i)
        yield ("arrive", ws4.BAR_FULL + b)


def math_ops(chunks, empty_from=SETS, frees=lambda i, chunks: i + 1 < chunks):
    for i in range(chunks):
        b = i % SETS
        if i >= empty_from:
            yield ("sync", ws4.BAR_EMPTY + b)
        yield ("sync", ws4.BAR_RAW_FULL)
        yield ("read", "raw", i)
        yield ("done", "raw")
        if frees(i, chunks):
            yield ("arrive", ws4.BAR_RAW_FREE)
        yield ("write", f"set{b}", i)
        yield ("read", f"rows{b}", i)
        yield ("done", f"rows{b}")
        yield ("arrive", ws4.BAR_FULL + b)


def chain_ops(chunks, releases=lambda i, chunks: i + SETS < chunks):
    for i in range(chunks):
        b = i % SETS
        yield ("sync", ws4.BAR_FULL + b)
        yield ("read", f"set{b}", i)
        yield ("read", f"v{b}", i)
        yield ("done", f"set{b}")
        yield ("done", f"v{b}")
        if releases(i, chunks):
            yield ("arrive", ws4.BAR_EMPTY + b)


def ring_copies_ops(chunks, ring_wait=lambda j: j >= RING, empty_from=SETS):
    if chunks > 0:
        yield ("write", "ring0", 0)
        yield ("arrive", ws4.BAR_RING_FULL)
    for i in range(chunks):
        b, r = i % SETS, (i + 1) % RING
        if i + 1 < chunks:
            if ring_wait(i + 1):
                yield ("sync", ws4.BAR_RING_EMPTY + r)
            yield ("write", f"ring{r}", i + 1)
        if i >= empty_from:
            yield ("sync", ws4.BAR_EMPTY + b)
        yield ("write", f"v{b}", i)
        if i + 1 < chunks:
            yield ("arrive", ws4.BAR_RING_FULL + r)
        yield ("arrive", ws4.BAR_FULL + b)


def ring_math_ops(chunks, empty_from=SETS):
    for i in range(chunks):
        b, r = i % SETS, i % RING
        if i >= empty_from:
            yield ("sync", ws4.BAR_EMPTY + b)
        yield ("sync", ws4.BAR_RING_FULL + r)
        yield ("read", f"ring{r}", i)
        yield ("write", f"set{b}", i)
        yield ("done", f"ring{r}")
        yield ("arrive", ws4.BAR_FULL + b)


def ring_chain_ops(chunks, ring_releases=lambda i, chunks: i + RING < chunks):
    for i in range(chunks):
        b, r = i % SETS, i % RING
        yield ("sync", ws4.BAR_FULL + b)
        for tile in (f"set{b}", f"v{b}", f"ring{r}"):
            yield ("read", tile, i)
        for tile in (f"set{b}", f"v{b}", f"ring{r}"):
            yield ("done", tile)
        if i + SETS < chunks:
            yield ("arrive", ws4.BAR_EMPTY + b)
        if ring_releases(i, chunks):
            yield ("arrive", ws4.BAR_RING_EMPTY + r)


def v_ahead_copies_ops(chunks, empty_from=SETS, ring_wait=lambda j: j >= RING):
    """frost_fwd_v_ahead.VAhead's copies: v in the ring stage with its chunk's rows; FULL for
    chunk i arrived at the top of iteration i, after EMPTY (i >= SETS)."""
    if chunks > 0:
        yield ("write", "ring0", 0)
        yield ("arrive", ws4.BAR_RING_FULL)
    for i in range(chunks):
        b, r = i % SETS, (i + 1) % RING
        if i >= empty_from:
            yield ("sync", ws4.BAR_EMPTY + b)
        yield ("arrive", ws4.BAR_FULL + b)
        if i + 1 < chunks:
            if ring_wait(i + 1):
                yield ("sync", ws4.BAR_RING_EMPTY + r)
            yield ("write", f"ring{r}", i + 1)
            yield ("arrive", ws4.BAR_RING_FULL + r)


def v_ahead_chain_ops(chunks):
    """The chain reading v from the chunk's ring stage (no v tile in the set)."""
    for i in range(chunks):
        b, r = i % SETS, i % RING
        yield ("sync", ws4.BAR_FULL + b)
        for tile in (f"set{b}", f"ring{r}"):
            yield ("read", tile, i)
        for tile in (f"set{b}", f"ring{r}"):
            yield ("done", tile)
        if i + SETS < chunks:
            yield ("arrive", ws4.BAR_EMPTY + b)
        if i + RING < chunks:
            yield ("arrive", ws4.BAR_RING_EMPTY + r)


def run(chunks, seed, copies=copies_ops, math=math_ops, chain=chain_ops, capacity=CAPACITY):
    programs = {"copies": copies(chunks), "math": math(chunks), "chain": chain(chunks)}
    run_actors(programs, THREADS, capacity, seed, f"{chunks} chunks")


@pytest.mark.parametrize("chunks", range(8))
def test_hand_over_is_safe_under_any_interleaving(chunks):
    for seed in range(300):
        run(chunks, seed)


def run_ring(chunks, seed, copies=ring_copies_ops, math=ring_math_ops, chain=ring_chain_ops):
    run(chunks, seed, copies, math, chain, RING_CAPACITY)


def run_v_ahead(chunks, seed, copies=v_ahead_copies_ops, math=ring_math_ops, chain=v_ahead_chain_ops):
    run(chunks, seed, copies, math, chain, RING_CAPACITY)


@pytest.mark.parametrize("runner", [run_ring, run_v_ahead], ids=["product", "v_ahead"])
@pytest.mark.parametrize("chunks", range(8))
def test_ring_hand_over_is_safe_under_any_interleaving(runner, chunks):
    for seed in range(300):
        runner(chunks, seed)


def test_barrier_ids_are_distinct_and_not_syncthreads():
    ids = [ws4.BAR_MATH, ws4.BAR_RAW_FULL, ws4.BAR_RAW_FREE,
           *(ws4.BAR_FULL + b for b in range(SETS)), *(ws4.BAR_EMPTY + b for b in range(SETS))]
    assert len(set(ids)) == len(ids) and 0 not in ids and max(ids) < 16
    assert ws4.PAIR_THREADS == THREADS["math"] + THREADS["copies"]
    assert ws4.BLOCK_THREADS == sum(THREADS.values())
    ring = [ws4.BAR_MATH, *(ws4.BAR_FULL + b for b in range(SETS)), *(ws4.BAR_EMPTY + b for b in range(SETS)),
            *(ws4.BAR_RING_FULL + r for r in range(RING)), *(ws4.BAR_RING_EMPTY + r for r in range(RING)),
            ws4.BAR_COPIES]
    assert len(set(ring)) == len(ring) and 0 not in ring and max(ring) < 16
    assert ws4.RING_EMPTY_THREADS == THREADS["chain"] + THREADS["copies"]


def _fails(chunks_range, runner=run, **mutation):
    return fails(runner, chunks_range, **mutation)


def test_mutations_are_caught():
    # copies not waiting for the raw tiles to be read: chunk i + 1's rows over chunk i's
    assert _fails(range(2, 5), copies=lambda n: copies_ops(n, free_from=n + 1))
    # copies not waiting for the set's release: v rewritten under a chain
    assert _fails(range(3, 7), copies=lambda n: copies_ops(n, empty_from=n + 1))
    # math not waiting for the release
    assert _fails(range(3, 7), math=lambda n: math_ops(n, empty_from=n + 1))
    # math freeing the raw tiles after the last chunk too: arrivals left at exit
    assert _fails(range(1, 4), math=lambda n: math_ops(n, frees=lambda i, c: True))
    # the chain releasing after every chunk
    assert _fails(range(1, 4), chain=lambda n: chain_ops(n, releases=lambda i, c: True))


def test_ring_mutations_are_caught():
    # the copies not waiting for the stage's release: chunk i + RING's rows under chunk i's readers
    assert _fails(range(4, 8), run_ring, copies=lambda n: ring_copies_ops(n, ring_wait=lambda j: False))
    # waiting one chunk early: that stage's release never comes
    assert _fails(range(3, 6), run_ring, copies=lambda n: ring_copies_ops(n, ring_wait=lambda j: j >= RING - 1))
    # v not waiting for the set's release
    assert _fails(range(3, 7), run_ring, copies=lambda n: ring_copies_ops(n, empty_from=n + 1))
    # the chain releasing every stage: arrivals left at exit
    assert _fails(range(1, 5), run_ring, chain=lambda n: ring_chain_ops(n, ring_releases=lambda i, c: True))


def test_v_ahead_mutations_are_caught():
    # FULL arrived before EMPTY: the arrival counts toward chunk i - 2's generation of FULL[b]
    assert _fails(range(3, 7), run_v_ahead, copies=lambda n: v_ahead_copies_ops(n, empty_from=n + 1))
    # rows and v not waiting for the stage's release
    assert _fails(range(4, 8), run_v_ahead, copies=lambda n: v_ahead_copies_ops(n, ring_wait=lambda j: False))


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
