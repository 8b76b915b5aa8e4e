"""L0: the hand-over of a proposed vector-gate (KDA, GDN-2) forward in two roles, under
named-barrier semantics, over random interleavings. Pure Python (no cutlass); a design
check before any kernel exists (kernels/NOTES.md "Next for the vector-gate forward: its
state-free work beside the chain, counted").

Shared memory holds one copy of each chain operand (a second set does not fit next to
the raw staging and the Gram's operands), so the state-free role ("free", two warpgroups,
256 threads) writes each tile for chunk c in the window between the chain's last read of
it for chunk c - 1 and the chain's first read of it for chunk c. For every window to span
about a chain step, the chain reads each group once, in this order, and retires it
before the next (v3's chain issues S^T QA^T with R and retires it only after P U, which
would leave QA's window the length of the output stores); per group a FULL / FREE pair of
named barriers (512 threads: both roles):
- KB: the decayed KBA half of the kq tile and W0 (v), read by R^T = W0^T + S^T KBA^T;
- MS: -M's blocks and their inverses (or A), read by the chain's solve of U;
- QP: the QA half and P, read by one output group O^T = S^T QA^T + U^T P^T (the bf16 S^T
  rebuilt from the state registers, still the chunk's entering state there);
- KD: KD^T and e^Gam_last, read by the state update.
The chain (two warpgroups, 256 threads), per chunk c: for each group in that order, FULL
wait, read, FREE arrive where chunk c + 1 exists. The state-free role, per chunk c: the
raw rows of chunk c (its own staging, refilled by its bulk copies), the Gram from them
(private tiles), then per group in the chain's order: FREE wait (c >= 1), write, FULL
arrive; its raw rows are its own (released after its last write, the KD group). Checked
for 0 to 6 chunks and many schedules: no deadlock, every read sees its chunk's data, nothing written while read, no
arrivals left; the mutations at the end must each be caught.
"""
import pytest
from named_barrier_emulator import fails, run_actors

GROUPS = ("kb", "ms", "qp", "kd")  # the chain's reads in its order
TILES = {"kb": ("kba", "w0"), "ms": ("ms",), "qp": ("qa", "p"), "kd": ("kd",)}
FULL = {g: 2 + 2 * n for n, g in enumerate(GROUPS)}  # 0: the CTA's, 1: the free role's own
FREE = {g: 3 + 2 * n for n, g in enumerate(GROUPS)}
THREADS = {"chain": 256, "free": 256}
CAPACITY = {**{bar: 512 for bar in FULL.values()}, **{bar: 512 for bar in FREE.values()}}


def free_ops(chunks, skip_free=None, early_full=None):
    for c in range(chunks):
        yield ("write", "raw", c)  # the bulk copies landed (the role's own wait)
        yield ("read", "raw", c)
        for g in GROUPS:
            if c >= 1 and skip_free != g:
                yield ("sync", FREE[g])
            if early_full == g:
                yield ("arrive", FULL[g])
            for tile in TILES[g]:
                yield ("write", tile, c)
            if early_full != g:
                yield ("arrive", FULL[g])
        yield ("done", "raw")


def chain_ops(chunks, releases=lambda c, chunks: c + 1 < chunks):
    for c in range(chunks):
        for g in GROUPS:
            yield ("sync", FULL[g])
            for tile in TILES[g]:
                yield ("read", tile, c)
            for tile in TILES[g]:
                yield ("done", tile)
            if releases(c, chunks):
                yield ("arrive", FREE[g])


def _run(chunks, seed, skip_free=None, early_full=None, releases=lambda c, chunks: c + 1 < chunks):
    run_actors({"free": free_ops(chunks, skip_free, early_full),
                "chain": chain_ops(chunks, releases)},
               THREADS, CAPACITY, seed, f"{chunks} chunks")


@pytest.mark.parametrize("chunks", range(7))
def test_per_tile_hand_over(chunks):
    for seed in range(100):
        _run(chunks, seed)


@pytest.mark.parametrize("mutation", [
    {"skip_free": "kd"},  # KD^T written while the chain's update may still read it
    {"skip_free": "kb"},  # KBA and v written over the previous chunk's
    {"early_full": "qp"},  # QA and P announced before they are written
    {"releases": lambda c, chunks: True},  # FREE arrived after the last chunk: arrivals left
    {"releases": lambda c, chunks: False},  # never released: the free role deadlocks
], ids=["no-free-wait-kd", "no-free-wait-kb", "full-before-write", "release-after-last", "no-release"])
def test_mutations_are_caught(mutation):
    """Each broken variant fails on some chunk count and schedule: the check can fail."""
    assert fails(_run, range(1, 5), **mutation)
