"""kernels/fragment_stores.py's own source on the SIMT emulator: a warp's [16, K] fp32
accumulator tile, laid out as accumulator_coordinate says, lands in the destination rows
as bf16 through the quad exchange and 16-byte stores, every element once and in its place
(K = 64 and 128, an offset row block, random values); quad_exchange alone is the 4 x 4
transpose of pieces within each quad. The layout itself is checked against CuTe's
partition by frost_compile_test.test_accumulator_layout_is_the_one_the_stores_assume.
"""
import os
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from cutlass import BFloat16, Float32  # noqa: E402

from cudnn.linear_attention.frost.kernels import fragment_stores  # noqa: E402
from cudnn.linear_attention.frost.kernels.fragment_stores import accumulator_coordinate  # noqa: E402

from simt_emulator import Tensor, Val, emulated, run_cta, thread_index  # noqa: E402


def _bf16(x):
    return torch.tensor(x, dtype=torch.float64).to(torch.bfloat16).double().numpy()


@pytest.mark.parametrize("K, row0", [(128, 0), (64, 16), (128, 48)])
def test_accumulator_tile_lands_in_place(K, row0):
    store = emulated(fragment_stores, "store_rows_vectorised", helper_modules=[fragment_stores])
    rng = np.random.default_rng(K + row0)
    tile = rng.standard_normal((16, K)) * 3.0
    dst = Tensor(np.full((row0 + 16 + 3, K), np.nan), BFloat16)

    def thread():
        lane = thread_index()
        acc = Tensor(np.zeros(16 * K // 32), Float32)
        for e in range(16 * K // 32):
            r, c = accumulator_coordinate(lane, e)
            acc[e] = Val(float(np.float32(tile[r, c])))
        store(dst, acc, row0, lane, K)

    run_cta(thread, 32)
    got = dst.array
    assert np.isnan(got[:row0]).all() and np.isnan(got[row0 + 16:]).all()   # nothing outside the block
    np.testing.assert_array_equal(got[row0:row0 + 16], _bf16(tile.astype(np.float32)))


def test_accumulator_coordinates_cover_the_tile_once():
    for K in (64, 128):
        seen = {accumulator_coordinate(lane, e) for lane in range(32) for e in range(16 * K // 32)}
        assert seen == {(r, c) for r in range(16) for c in range(K)}


@pytest.mark.parametrize("width", [1, 2])
def test_quad_exchange_is_a_transpose_within_each_quad(width):
    exchange = emulated(fragment_stores, "quad_exchange", helper_modules=[fragment_stores])
    got = np.zeros((32, 4 * width))

    def thread():
        lane = thread_index()
        x = Tensor(np.array([100 * lane + 10 * p + w for p in range(4) for w in range(width)], dtype=float),
                   Float32)
        exchange(x, lane)
        got[lane] = x.array

    run_cta(thread, 32)
    for lane in range(32):
        quad = lane - lane % 4
        want = [100 * (quad + p) + 10 * (lane % 4) + w for p in range(4) for w in range(width)]
        assert got[lane].tolist() == want, lane


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
