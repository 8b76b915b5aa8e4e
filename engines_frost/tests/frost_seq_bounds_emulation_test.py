"""kernels/seq_bounds.py's own source on the SIMT emulator: one warp zeroes exactly the
rows no sequence covers, for any cu_seqlens table (the helpers every FROST kernel calls:
the oracle forward at its end, mma/pipelined/wgmma forward in the CTAs of their extra grid row, the
backward's states kernel before its grads kernel).

Global memory is bounds-checked numpy (an out-of-bounds index raises), the output starts
as NaN, so a row zeroed that should not be (NaN becomes 0) or one left (NaN stays) shows.
"""
import os
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from cutlass import Float32, Int32  # noqa: E402

from cudnn.linear_attention.frost.kernels import seq_bounds  # noqa: E402

from simt_emulator import Pointer, Tensor, emulated, run_cta, thread_index  # noqa: E402

T, HEADS, WIDTH = 40, 2, 3
TABLES = {
    "well_formed": [0, 10, 25, 40],
    "empty_sequences": [0, 0, 25, 25, 40],
    "last_past_T": [0, 10, 25, 70],
    "negative": [-8, 10, 25, 40],
    "last_short_of_T": [6, 10, 25, 33],
    "non_monotone": [0, 30, 12, 40],
    "gap_inside": [10, 20, 0, 5],
    "descending": [40, 30, 20, 10],
    "extremes": [-(2**31) + 1, 2**31 - 1, 3, 7],
}


def covered(table):
    rows = set()
    for bos, eos in zip(table, table[1:]):
        bos, eos = min(max(bos, 0), T), min(max(eos, 0), T)
        rows.update(range(bos, eos))
    return rows


def ordered(table):
    c = [min(max(x, 0), T) for x in table]
    return all(b >= a for a, b in zip(c, c[1:]))


def run_warp(table, head, every_row):
    table_order = emulated(seq_bounds, "table_order")
    zero_rows = emulated(seq_bounds, "zero_uncovered_rows")
    cu = Tensor(np.array(table, dtype=np.int64), Int32)
    out = Tensor(np.full((T, HEADS, WIDTH), np.nan), Float32)
    N = len(table) - 1

    def warp():
        lane = thread_index()
        first, last, order = table_order(cu, N, T, lane)
        zero_rows(cu, N, T, out, head, 0, WIDTH, first, last, order, lane, every_row)

    run_cta(warp, 32)
    return out.array


@pytest.mark.parametrize("name", sorted(TABLES))
@pytest.mark.parametrize("every_row", [False, True], ids=["exact", "before_writes"])
def test_one_warp_zeroes_the_rows_no_sequence_covers(name, every_row):
    table = TABLES[name]
    out = run_warp(table, 1, every_row)
    assert np.isnan(out[:, 0]).all(), "another head's slice was written"
    rows = covered(table)
    for t in range(T):
        zeroed = (out[t, 1] == 0).all()
        if t not in rows:
            assert zeroed, t
        elif not (every_row and not ordered(table)):
            assert np.isnan(out[t, 1]).all(), t   # a covered row is the kernel's to write


@pytest.mark.parametrize("name", ["well_formed", "last_short_of_T", "gap_inside", "descending"])
@pytest.mark.parametrize("heads,jobs", [(5, 2), (3, 3), (2, 4)],
                         ids=["more_heads", "one_each", "idle_warps"])
def test_zeroing_row_covers_every_head_once(name, heads, jobs):
    """zero_uncovered_heads as the tensor-core forward's zeroing grid row runs it: one warp
    per CTA n of `jobs` (= N) CTAs, heads n, n + N, ...: every head's uncovered rows of
    all its columns are zeroed, no covered row is touched, and a warp with no head left
    (N > heads) writes nothing."""
    zero_heads = emulated(seq_bounds, "zero_uncovered_heads")
    table = TABLES[name]
    cu = Tensor(np.array(table, dtype=np.int64), Int32)
    out = Tensor(np.full((T, heads, WIDTH), np.nan), Float32)
    N = len(table) - 1
    for job in range(jobs):
        run_cta(lambda j=job: zero_heads(cu, N, T, out, heads, WIDTH, j, jobs, thread_index()), 32)
    rows = covered(table)
    for t in range(T):
        want = np.nan if t in rows else 0.0
        np.testing.assert_array_equal(out.array[t], np.full((heads, WIDTH), want),
                                      err_msg=f"row {t}")


def test_sequence_bounds_clamp_and_empty_inverted_ranges():
    bounds = emulated(seq_bounds, "sequence_bounds")
    cu = Tensor(np.array([-5, 10, 3, 90], dtype=np.int64), Int32)
    got = [tuple(int(x) for x in bounds(cu, n, T)) for n in range(3)]
    assert got == [(0, 10), (10, 10), (3, 40)]


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
