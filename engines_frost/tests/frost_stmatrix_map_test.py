"""L0: the stmatrix map the grads kernel's 16-bit shared stores rely on (kernels/stmatrix_map.py).

bwd_grads.store_fragment stores a warp's accumulator tile (dq/dk staging, the score tiles
dZp and dZm) with stmatrix.x4 through CuTe's tiled copy and, while tracing, passes the
copy's register and address layouts to check_stmatrix_copy. Checked here, in plain Python
against the PTX ISA (written out below as formulas, independent of CuTe):
- the layouts CuTe DSL 4.8 traces for that copy (constants below; compiling the kernel
  re-checks the installed DSL's own) store every accumulator value at its coordinate,
  through an instruction model of stmatrix that takes per-lane addresses and registers;
- check_stmatrix_copy accepts them and rejects a register layout with two value modes
  exchanged, an address layout with two matrices exchanged and the transposed form;
- the staged tiles' row pitches put the 8 rows of a matrix in 8 different 16-byte bank
  groups (one shared-memory wavefront per matrix);
- the .trans forms (fwd_ws_wy.py's block loads and stores): the instruction models move
  the transpose, and check_trans_copy accepts the traced .trans layouts only.
"""
import random

import pytest

from cudnn.linear_attention.frost.kernels.stmatrix_map import (BLOCK, bank_groups, check_stmatrix_copy,
                                                               check_trans_copy, ptx_ldmatrix_x4_trans,
                                                               ptx_stmatrix_x4, ptx_stmatrix_x4_trans)
from cudnn.linear_attention.frost.kernels.wgmma_fragments import fragment_coords

# (shape, stride) of the traced layouts, column-major over the 16 x 16 block
ACC = ((4, 8), ((2, 2), (1, 2))), ((32, 1), ((16, 8), (0, 128)))     # warp_mma's tv_layout_C_tiled
SRC = ((4, 8), ((2, 2, 2), 1)), ((32, 1), ((16, 8, 128), 0))         # stmatrix.x4 copy, registers
DST = ((16, 2), (8, 1)), ((1, 128), (16, 0))                          # stmatrix.x4 copy, addresses
DST_TRANS = ((8, 2, 2), (8, 1)), ((16, 8, 128), (1, 0))               # the .trans form's addresses


def ptx_accumulator(lane, v):
    """PTX ISA, mma.m16n8k16 D fragment: value v of lane at (row, column), n8 tiles side by side."""
    return lane // 4 + 8 * ((v // 2) % 2), 8 * (v // 4) + 2 * (lane % 4) + v % 2


def test_traced_accumulator_layout_is_the_ptx_table():
    for lane in range(32):
        for v in range(8):
            assert fragment_coords(*ACC, BLOCK, lane, v) == ptx_accumulator(lane, v)


@pytest.mark.parametrize("pitch", [72, 136])  # elements per staged row: C + 8 (scores), K + 8 (dq/dk at K = 128)
def test_instruction_model_stores_the_accumulator(pitch):
    """Addresses from the address layout, registers packed from the accumulator fragment
    in value order (value 2 i + h is half h of register i), through the PTX instruction
    model: the block in a row-major tile of `pitch` elements per row is the accumulator."""
    rng = random.Random(pitch)
    block = [[rng.random() for _ in range(BLOCK)] for _ in range(BLOCK)]
    frag = [[block[r][c] for r, c in (ptx_accumulator(lane, v) for v in range(8))] for lane in range(32)]
    addresses = []
    for lane in range(32):
        r, c = fragment_coords(*DST, BLOCK, lane, 0)
        addresses.append(r * pitch + c)
        assert addresses[-1] * 2 % 16 == 0  # stmatrix rows are 16-byte aligned
    registers = [[(frag[lane][2 * i], frag[lane][2 * i + 1]) for i in range(4)] for lane in range(32)]
    written = ptx_stmatrix_x4(addresses, registers)
    assert len(written) == BLOCK * BLOCK
    assert written == {r * pitch + c: block[r][c] for r in range(BLOCK) for c in range(BLOCK)}


def test_check_accepts_the_traced_layouts():
    check_stmatrix_copy(SRC, DST, ACC)


def test_check_rejects_wrong_maps():
    (t_shape, _), (t_stride, _) = SRC
    swapped_values = (t_shape, ((2, 2, 2), 1)), (t_stride, ((8, 16, 128), 0))  # row half before column pair
    with pytest.raises(ValueError, match="register layout"):
        check_stmatrix_copy(swapped_values, DST, ACC)
    swapped_matrices = ((8, 2, 2), (8, 1)), ((1, 128, 8), (16, 0))  # lanes 8-15 on the right, 16-23 below
    with pytest.raises(ValueError, match="lands at"):
        check_stmatrix_copy(SRC, swapped_matrices, ACC)
    with pytest.raises(ValueError, match="does not address one row"):
        check_stmatrix_copy(SRC, DST_TRANS, ACC)


@pytest.mark.parametrize("elements", [64 + 8, 128 + 8])  # [C, C] score tiles and [C, K] staging, bf16
def test_staged_rows_are_conflict_free(elements):
    assert sorted(bank_groups(2 * elements)) == list(range(8))
    assert sorted(bank_groups(2 * 128)) != list(range(8))  # unpadded rows would conflict


def test_trans_instruction_model_stores_the_transpose():
    """stmatrix.trans of the accumulator over [16 j, 16 t] with the .trans address layout
    (DST_TRANS: lane a + 8 b + 16 c addresses rows 8 b .. 8 b + 7 of column a + 8 c) into a
    row-major [t, j] tile: element (j, t) lands at row t, column j."""
    pitch = 64
    rng = random.Random(3)
    block = [[rng.random() for _ in range(BLOCK)] for _ in range(BLOCK)]  # block[j][t]
    frag = [[block[r][c] for r, c in (ptx_accumulator(lane, v) for v in range(8))] for lane in range(32)]
    addresses = []
    for lane in range(32):
        j, t = fragment_coords(*DST_TRANS, BLOCK, lane, 0)
        addresses.append(t * pitch + j)  # the transposed view: (j, t) is memory row t, column j
        assert addresses[-1] * 2 % 16 == 0
    registers = [[(frag[lane][2 * i], frag[lane][2 * i + 1]) for i in range(4)] for lane in range(32)]
    written = ptx_stmatrix_x4_trans(addresses, registers)
    assert written == {t * pitch + j: block[j][t] for j in range(BLOCK) for t in range(BLOCK)}


def test_trans_load_model_loads_the_transpose():
    """ldmatrix.trans from a row-major [t, j] tile through the same addresses gives each lane
    the accumulator-order fragment of the (j, t) block: the inverse of the store above."""
    pitch = 72
    rng = random.Random(4)
    memory = {t * pitch + j: rng.random() for t in range(BLOCK) for j in range(BLOCK)}
    addresses = []
    for lane in range(32):
        j, t = fragment_coords(*DST_TRANS, BLOCK, lane, 0)
        addresses.append(t * pitch + j)
    registers = ptx_ldmatrix_x4_trans(addresses, memory)
    for lane in range(32):
        for v in range(8):
            j, t = ptx_accumulator(lane, v)
            assert registers[lane][v // 2][v % 2] == memory[t * pitch + j]


def test_trans_check_accepts_the_trans_layouts_and_rejects_others():
    """The same check serves both directions (check_trans_copy(register side, address side,
    fragment)): it accepts the traced .trans layouts and rejects the plain form's
    addresses and two matrices exchanged."""
    check_trans_copy(SRC, DST_TRANS, ACC)
    with pytest.raises(ValueError, match="consecutive rows"):
        check_trans_copy(SRC, DST, ACC)  # the plain form's addresses
    swapped = ((8, 2, 2), (8, 1)), ((16, 128, 8), (1, 0))  # matrices 1 and 2 exchanged
    with pytest.raises(ValueError, match="lands at"):
        check_trans_copy(SRC, swapped, ACC)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
