"""kernels/checkpoints_dsl.py's own source on the SIMT emulator: the state_checkpoints row
every lane of every warp computes for (sequence, chunk) is the packed layout of
checkpoints.py (the forward writes there, the backward reads there), for well-formed
tables with empty and short sequences, more sequences than lanes, and malformed tables
(bounds clamped as seq_bounds.py reads them; reads kept inside the tensor).
"""
import os
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from cutlass import Int32  # noqa: E402

from cudnn.linear_attention.frost.kernels import checkpoints, checkpoints_dsl, seq_bounds  # noqa: E402

from simt_emulator import Tensor, emulated, run_cta, thread_index  # noqa: E402


def _cu(lengths):
    return [0, *np.cumsum(lengths).tolist()]


TABLES = {  # (cu_seqlens, T)
    "well_formed": (_cu([64, 1, 63, 65, 0, 130]), 323),
    "empty_only": (_cu([0, 0, 0]), 0),
    "many_short": (_cu([(i * 7) % 17 for i in range(70)]), sum((i * 7) % 17 for i in range(70))),
    "long_and_short": (_cu([4096, 1, 4095, 129]), 8321),
    "last_past_T": ([0, 10, 25, 70], 40),
    "negative": ([-8, 10, 25, 40], 40),
    "non_monotone": ([0, 30, 12, 40], 40),
    "descending": ([40, 30, 20, 10], 40),
    "extremes": ([-(2**31) + 1, 2**31 - 1, 3, 7], 40),
    "overlapping": ([0, 200, 0, 200, 0, 200], 200),  # clamped lengths sum past T
}


def run(table, T):
    packed_row0 = emulated(checkpoints_dsl, "packed_row0", helper_modules=[seq_bounds])
    checkpoint_row = emulated(checkpoints_dsl, "checkpoint_row", helper_modules=[seq_bounds])
    N = len(table) - 1
    cu = Tensor(np.array(table, dtype=np.int64), Int32)
    threads = 64
    got = np.zeros((threads, N, 2), dtype=np.int64)

    def thread():
        tid = thread_index()
        for n in range(N):
            got[tid, n, 0] = int(packed_row0(cu, n, T, tid % 32))
            got[tid, n, 1] = int(checkpoint_row(cu, n, 1, T, N, tid % 32))

    run_cta(thread, threads)
    return got


@pytest.mark.parametrize("name", sorted(TABLES))
def test_every_lane_finds_the_packed_row(name):
    table, T = TABLES[name]
    N = len(table) - 1
    got = run(table, T)
    rows = T // 64 + N
    for n in range(N):
        want = checkpoints.packed_row0(table, n, T)
        assert (got[:, n, 0] == want).all(), (n, want, set(got[:, n, 0].tolist()))
        assert (got[:, n, 1] == min(want + 1, rows - 1)).all(), n


@pytest.mark.parametrize("name", ["well_formed", "many_short", "long_and_short"])
def test_well_formed_rows_stay_inside_the_tensor(name):
    """For a well-formed table every written row is below T // 64 + N (no clamping)."""
    table, T = TABLES[name]
    index = checkpoints.checkpoint_index(table, T)
    assert len(index) <= checkpoints.checkpoint_rows(T, len(table) - 1)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
