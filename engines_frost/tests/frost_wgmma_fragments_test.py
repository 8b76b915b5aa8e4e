"""L0: the index maps fwd_wgmma relies on (kernels/wgmma_fragments.py), plain Python.

fwd_wgmma hands the mma layer's per-warp register fragments (the fp32 state S^T, the bf16 A operands)
to warpgroup MMA unchanged, and writes WGMMA's B operands with ordinary 16-byte stores
into 128-byte swizzled tiles. Checked here against the PTX ISA's fragment tables (written
out below as formulas, independent of CuTe) and the hardware swizzle's definition:
- fragment_coords evaluates CuTe thread-value layouts (the ones the DSL traces for
  wgmma m64nNk16 and mma.sync m16n8k16) to exactly the PTX tables;
- warp_view_matches accepts those pairs and rejects a layout with two value modes swapped
  or the warp offset dropped (so fwd_wgmma's trace-time check can fail);
- the SW128 map is a bijection of the tile, keeps each 16-byte vector of a row contiguous
  and aligned, and spreads a column unit's 8 rows over 8 different 16-byte bank groups.
The same hand-over is checked on the layouts the installed CuTe DSL builds, per thread and
value, by frost_compile_wgmma_test (needs the DSL).
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cudnn.linear_attention.frost.kernels.wgmma_fragments import (blocks_view_match, check_b_quads,  # noqa: E402
                                                                  check_c_pairs, fragment_coords, shared_coordinate,
                                                                  sw128_byte_offset, sw128_tile_offset, tv_size,
                                                                  warp_view_matches)


def wgmma_c(n):
    """CuTe's wgmma m64nNk16 fp32 accumulator layout (thread, value) -> 64 x N col-major."""
    return ((4, 8, 4), (2, 2, n // 8)), ((128, 1, 16), (64, 8, 512))


WGMMA_A = ((4, 8, 4), (2, 2, 2)), ((128, 1, 16), (64, 8, 512))  # 64 x 16 A from registers
MMA_C_TILED = ((4, 8), ((2, 2), (1, 2))), ((32, 1), ((16, 8), (0, 128)))  # two m16n8 atoms: 16 x 16
MMA_A = ((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128))  # m16n8k16 A: 16 x 16
# two m16n8k16 B atoms over a [N = 16, K = 16] tile, as the DSL traces warp_mma's B
MMA_B_TILED = ((4, 8), ((2, 2), (2, 1))), ((32, 1), ((16, 128), (8, 0)))


def ptx_wgmma_c(thread, i):
    """PTX ISA, wgmma .m64nNk16 D fragment: row 16 warp + lane / 4 (+8), column pairs."""
    warp, lane = divmod(thread, 32)
    return 16 * warp + lane // 4 + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * (lane % 4) + i % 2


def ptx_mma_c(lane, i):
    """PTX ISA, mma.m16n8k16 D fragment (c0..c3), repeated every 8 columns."""
    return lane // 4 + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * (lane % 4) + i % 2


def ptx_a(lane, i, warp=0):
    """PTX ISA, m16n8k16 (and wgmma m64nNk16 per warp) A fragment a0..a7."""
    return 16 * warp + lane // 4 + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * (lane % 4) + i % 2


@pytest.mark.parametrize("n", [32, 64, 128])
def test_wgmma_accumulator_layout_is_the_ptx_table(n):
    for thread in range(128):
        for i in range(tv_size(wgmma_c(n))[1]):
            assert fragment_coords(*wgmma_c(n), 64, thread, i) == ptx_wgmma_c(thread, i), (thread, i)


def test_warp_layouts_are_the_ptx_tables():
    for lane in range(32):
        for i in range(8):
            assert fragment_coords(*MMA_C_TILED, 16, lane, i) == ptx_mma_c(lane, i), (lane, i)
            assert fragment_coords(*MMA_A, 16, lane, i) == ptx_a(lane, i), (lane, i)
            for warp in range(4):
                assert fragment_coords(*WGMMA_A, 64, 32 * warp + lane, i) == ptx_a(lane, i, warp)


def ptx_b(lane, i):
    """PTX ISA, mma.m16n8k16 B fragment b0..b3 as (n, k), repeated every 8 columns n."""
    return lane // 4 + 8 * (i // 4), 2 * (lane % 4) + i % 2 + 8 * ((i // 2) % 2)


def test_b_layout_is_the_ptx_table_and_its_quads_are_channels():
    """bwd_grads_vec.state_pairs_ldsm sums each lane's B values in groups of four per
    channel: right for the PTX table (each group one column n, four k), and check_b_quads,
    which it runs on the traced layout, says so."""
    for lane in range(32):
        for i in range(8):
            assert fragment_coords(*MMA_B_TILED, 16, lane, i) == ptx_b(lane, i), (lane, i)
    check_b_quads(MMA_B_TILED, 16)


@pytest.mark.parametrize("stride", [
    ((32, 1), ((16, 8), (128, 0))),   # value modes exchanged: a group spans two columns
    ((32, 2), ((16, 128), (8, 0))),   # lanes g skip odd columns: half the tile, some twice
    ((1, 4), ((16, 128), (8, 0))),    # the quad index moves along n, not k
])
def test_b_quad_check_rejects_wrong_maps(stride):
    with pytest.raises(ValueError):
        check_b_quads((MMA_B_TILED[0], stride), 16)


def test_accumulator_values_come_in_column_pairs():
    """bwd_grads_vec reads q-hat, k-hat, b at an accumulator value pair's two channels with
    one 4-byte load: the PTX table's pairs are (r, 2 c), (r, 2 c + 1); check_c_pairs agrees
    and rejects a layout whose values 0 and 1 are rows g and g + 8."""
    check_c_pairs(MMA_C_TILED, 16)
    (t_shape, v_shape), (t_stride, v_stride) = MMA_C_TILED
    with pytest.raises(ValueError):
        check_c_pairs(((t_shape, ((2, 2), (1, 2))), (t_stride, ((8, 16), (0, 128)))), 16)
    with pytest.raises(ValueError):  # lane l % 4 starting at column l % 4: odd pairs
        check_c_pairs(((t_shape, v_shape), ((16, 1), v_stride)), 16)


@pytest.mark.parametrize("n", [64, 128])
def test_warpgroup_fragments_extend_the_warp_fragments(n):
    assert warp_view_matches(wgmma_c(n), 64, MMA_C_TILED, 16, 8)
    assert warp_view_matches(WGMMA_A, 64, MMA_A, 16, 8)


def test_a_mismatch_is_rejected():
    (t_shape, v_shape), (t_stride, v_stride) = wgmma_c(64)
    swapped = (t_shape, v_shape), (t_stride, (8, 64, 512))  # value modes 0 and 1 exchanged
    assert not warp_view_matches(swapped, 64, MMA_C_TILED, 16, 8)
    no_warp_offset = (t_shape, v_shape), ((128, 1, 0), v_stride)  # every warp on rows 0..15
    assert not warp_view_matches(no_warp_offset, 64, MMA_C_TILED, 16, 8)


@pytest.mark.parametrize("n", [32, 64, 128])
def test_warpgroup_accumulator_is_the_warp_blocks_in_order(n):
    """bwd_chain_wgmma cuts dU^T's m64n64 accumulator into the four 16 x 16 blocks of the
    per-warp back substitution, and runs the m64nK update into a warp's [16, K] dS^T
    registers: values [8 b, 8 b + 8) of every thread are the warp's block b. The wgmma
    grads kernel (bwd_grads_wgmma) runs its m64n(K/2) state products into the per-warp
    [16, K/2] accumulators the same way (n = 32 at K = 64)."""
    assert blocks_view_match(wgmma_c(n), 64, MMA_C_TILED, 16, 8, n // 16)
    # against the PTX tables directly: value i sits in n8 column block i // 4 for both
    for thread in range(128):
        warp, lane = divmod(thread, 32)
        for i in range(n // 2):
            r, c = ptx_mma_c(lane, i)
            assert ptx_wgmma_c(thread, i) == (r + 16 * warp, c)


def test_block_order_mismatch_is_rejected():
    """A layout with the column blocks in another order, or one block short, fails."""
    (t_shape, v_shape), (t_stride, v_stride) = wgmma_c(64)
    shifted = (t_shape, v_shape), ((128, 1, 16 + 64 * 16), v_stride)  # every thread 16 columns right
    assert not blocks_view_match(shifted, 64, MMA_C_TILED, 16, 8, 4)
    # the same columns, n8 blocks in another order (value 4 is block 1's first n8 block,
    # not block 0's second): a bijection of the tile that is not the warp blocks in order
    interleaved = (t_shape, (2, 2, 4, 2)), (t_stride, (64, 8, 1024, 512))
    assert sorted(fragment_coords(*interleaved, 64, 0, i) for i in range(32)) == \
        sorted(fragment_coords(*wgmma_c(64), 64, 0, i) for i in range(32))
    assert not blocks_view_match(interleaved, 64, MMA_C_TILED, 16, 8, 4)
    assert not blocks_view_match(wgmma_c(128), 64, MMA_C_TILED, 16, 8, 8, block_cols=8)


@pytest.mark.parametrize("rows,cols", [(128, 128), (128, 64), (64, 64)])
def test_sw128_is_a_bijection_with_contiguous_vectors(rows, cols):
    offsets = {sw128_tile_offset(rows, r, c) for r in range(rows) for c in range(cols)}
    assert offsets == set(range(0, rows * cols * 2, 2))
    for r in range(rows):
        for c0 in range(0, cols, 8):
            base = sw128_tile_offset(rows, r, c0)
            assert base % 16 == 0
            assert [sw128_tile_offset(rows, r, c0 + j) - base for j in range(8)] == list(range(0, 16, 2))


def test_sw128_spreads_a_column_unit_over_the_banks():
    """Eight consecutive rows of one 16-byte column unit land in eight different 16-byte
    slots of a 128-byte line (what the swizzle is for: conflict-free column reads)."""
    for unit in range(8):
        slots = {(sw128_byte_offset(r, 8 * unit) % 128) // 16 for r in range(8)}
        assert len(slots) == 8, unit


@pytest.mark.parametrize("n", [16, 32])
def test_shared_coordinate_finds_the_repeated_rows_and_columns(n):
    """fwd_wgmma_gram loads a gate once per distinct row / column of a thread's values: the
    map must send each value to the first one at the same row (column) per the PTX table."""
    rows, cols = shared_coordinate(wgmma_c(n), 64, 0), shared_coordinate(wgmma_c(n), 64, 1)
    for axis, rep in ((0, rows), (1, cols)):
        for i, r in enumerate(rep):
            assert r <= i
            for thread in range(128):
                assert ptx_wgmma_c(thread, r)[axis] == ptx_wgmma_c(thread, i)[axis], (axis, thread, i, r)
            # and r is the first such value (a later one would be loaded needlessly)
            assert all(any(ptx_wgmma_c(t, j)[axis] != ptx_wgmma_c(t, i)[axis] for t in range(128))
                       for j in range(r))
    assert len(set(rows)) == 2 and len(set(cols)) == n // 4  # two rows, n / 4 column pairs per thread


def test_shared_coordinate_keeps_distinct_values_apart():
    """Values at distinct rows (columns) map to themselves: nothing is merged that differs."""
    tv = ((2,), (4,)), ((256,), (1,))  # thread t, value v -> row v, column 4 t
    assert shared_coordinate(tv, 64, 0) == [0, 1, 2, 3]
    assert shared_coordinate(tv, 64, 1) == [0, 0, 0, 0]
    pairs = ((2,), (2, 2)), ((256,), (1, 64))  # value (a, b) -> row a, column 4 t + b
    assert shared_coordinate(pairs, 64, 0) == [0, 1, 0, 1]
    assert shared_coordinate(pairs, 64, 1) == [0, 0, 2, 2]


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
