"""L0: the cp.async group accounting of the full-inverse forward's producer
(kernels/fwd_ws_wy.py FullInverseChain.produce). Pure Python (no cutlass).

Per producer thread, per chunk i (the kernel's order): after the EMPTY wait, the copy of
chunk i's v rows into the operand set (one committed group), wait_group(1), the rows
stage reading chunk i's raw q / k / gate / beta rows, then (if chunk i + 1 exists) the
copies of those rows for chunk i + 1 (one group), the Gram and the solves, and before the
FULL arrive wait_group(1) if chunk i + 1's copies were issued, else wait_group(0). The
first chunk's raw rows are one group committed before the loop. cp.async semantics:
wait_group(n) returns once at most n of the thread's groups are still in flight, and a
group in flight may land at any time before that. Checked for 0 to 7 chunks over random
landing orders: the rows stage never reads a raw-row group still in flight, the FULL
arrive never publishes a set whose v group is in flight, and no group is left in flight
at exit. The mutations at the end must each be caught, so the check can fail.
"""
import random

import pytest


def producer_ops(chunks, top_wait=1, end_wait=lambda i, chunks: 1 if i + 1 < chunks else 0):
    if chunks > 0:
        yield ("commit", ("raw", 0))
    for i in range(chunks):
        yield ("commit", ("v", i))
        yield ("wait", top_wait)
        yield ("use", ("raw", i))
        if i + 1 < chunks:
            yield ("commit", ("raw", i + 1))
        yield ("wait", end_wait(i, chunks))
        yield ("publish", ("v", i))


def run(chunks, seed, ops=producer_ops):
    rng = random.Random(seed)
    in_flight = []  # committed groups not landed yet, oldest first
    for op, arg in ops(chunks):
        # any group in flight may land now (in commit order: cp.async groups complete in order)
        while in_flight and rng.random() < 0.3:
            in_flight.pop(0)
        if op == "commit":
            in_flight.append(arg)
        elif op == "wait":
            while len(in_flight) > arg:
                in_flight.pop(0)
        else:  # use / publish: the group must have landed
            assert arg not in in_flight, f"{chunks} chunks: {op} of {arg} while it is in flight"
    assert not in_flight, f"{chunks} chunks: groups left in flight at exit {in_flight}"


@pytest.mark.parametrize("chunks", range(8))
def test_every_read_and_publish_waits_for_its_copies(chunks):
    for seed in range(200):
        run(chunks, seed)


def _fails(**mutation):
    for chunks in range(1, 6):
        for seed in range(200):
            try:
                run(chunks, seed, ops=lambda n: producer_ops(n, **mutation))
            except AssertionError:
                return True
    return False


def test_mutations_are_caught():
    # waiting for all but two groups at the top: the raw rows may still be in flight
    assert _fails(top_wait=2)
    # keeping one group in flight at the last chunk's end too: its v is published early
    assert _fails(end_wait=lambda i, chunks: 1)
    # not waiting before the FULL arrive at all
    assert _fails(end_wait=lambda i, chunks: 2)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
