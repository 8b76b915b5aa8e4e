"""The stmatrix / ldmatrix maps the kernels' 16-bit shared stores and loads rely on (pure Python).

bwd_grads.store_fragment writes a warp's accumulator tile (bf16/fp16, the m16n8 layout:
lane l holds rows l // 4 and l // 4 + 8, column pairs 2 (l % 4) + {0, 1} of each n8 tile)
into shared memory with ``stmatrix.sync.aligned.m8n8.x4.b16`` through CuTe's tiled copy
(make_tiled_copy_C). The PTX instruction, per the ISA: lanes 8 i .. 8 i + 7 give the row
addresses (16 contiguous bytes each) of 8 x 8 matrix i, and register i of lane l holds
row l // 4, columns 2 (l % 4) and 2 (l % 4) + 1 of matrix i, the lower column in the low
half. CuTe describes the copy by two thread-value layouts over the 16 x 16 block: the
register side (value v of a lane is half v % 2 of its register v // 2) and the address
side (the 8 consecutive elements of the row a lane addresses). ``check_stmatrix_copy``
says whether such a pair, with the MMA's accumulator layout, stores every accumulator
value at its own coordinate; store_fragment runs it on the layouts the installed CuTe DSL
traces (so a DSL that maps them differently fails the compile, not the gradients), and
frost_stmatrix_map_test checks it against the PTX tables and an instruction model
(``ptx_stmatrix_x4``). The .trans forms (``check_trans_copy``: the full-inverse forward's
producer loads k-hat blocks transposed with ldmatrix.trans and stores W' and A blocks
with stmatrix.trans, fwd_ws_wy.py) move each 8 x 8 matrix transposed: register i, half h
of lane l is element l // 4 of the row lane 8 i + 2 (l % 4) + h addresses
(``ptx_stmatrix_x4_trans``, ``ptx_ldmatrix_x4_trans``).
"""
from __future__ import annotations

from cudnn.linear_attention.frost.kernels.wgmma_fragments import fragment_coords, tv_size

BLOCK = 16  # rows and columns one stmatrix.x4 covers (four 8 x 8 matrices)


def ptx_stmatrix_x4(addresses, registers) -> dict[int, object]:
    """What stmatrix.m8n8.x4.b16 writes: addresses[l] is the element offset of the row lane
    l addresses, registers[l][i] = (low half, high half) of lane l's register i. Returns
    {element offset: value}."""
    out = {}
    for i in range(4):
        for r in range(8):
            base = addresses[8 * i + r]
            for c in range(8):
                out[base + c] = registers[4 * r + c // 2][i][c % 2]
    return out


def _check_register_side(what, register_tv, address_tv, fragment_tv) -> None:
    """Both checks' common part: three 32-lane x 8-value layouts, and the register side
    listing each lane's values as the fragment does."""
    for name, tv in (("register", register_tv), ("address", address_tv), ("fragment", fragment_tv)):
        if tv_size(tv) != (32, 8):
            raise ValueError(f"{what}: the {name} layout {tv} is not 32 lanes x 8 values")
    for lane in range(32):
        for v in range(8):
            if fragment_coords(*register_tv, BLOCK, lane, v) != fragment_coords(*fragment_tv, BLOCK, lane, v):
                raise ValueError(f"{what}: register layout {register_tv} differs from the fragment's "
                                 f"{fragment_tv} at lane {lane}, value {v}")


def check_stmatrix_copy(src_tv, dst_tv, acc_tv) -> None:
    """Raises ValueError unless a 16 x 16 stmatrix.x4 copy whose register-side layout is
    src_tv and address-side layout dst_tv (CuTe thread-value layouts over a column-major
    16 x 16 block, given as (shape, stride)) writes value v of every lane at the
    coordinate the accumulator layout acc_tv gives it: src_tv must list each lane's values
    as acc_tv does (so the accumulator fragment is the copy's source as it is), each lane
    must address 8 consecutive columns of one row, and the PTX placement of register i,
    half h of lane l (row l // 4 of matrix i, column 2 (l % 4) + h) must be that value's
    coordinate."""
    _check_register_side("stmatrix", src_tv, dst_tv, acc_tv)
    for lane in range(32):
        r0, c0 = fragment_coords(*dst_tv, BLOCK, lane, 0)
        if [fragment_coords(*dst_tv, BLOCK, lane, c) for c in range(8)] != [(r0, c0 + c) for c in range(8)]:
            raise ValueError(f"stmatrix: lane {lane} of the address layout {dst_tv} does not address one row")
    for lane in range(32):
        for i in range(4):
            for h in range(2):
                placed = fragment_coords(*dst_tv, BLOCK, 8 * i + lane // 4, 2 * (lane % 4) + h)
                if placed != fragment_coords(*src_tv, BLOCK, lane, 2 * i + h):
                    raise ValueError(f"stmatrix: lane {lane} register {i} half {h} lands at {placed}, not at "
                                     f"its value's coordinate (layouts {src_tv}, {dst_tv})")


def ptx_stmatrix_x4_trans(addresses, registers) -> dict[int, object]:
    """What stmatrix.m8n8.x4.trans.b16 writes: each 8 x 8 matrix transposed, i.e. the row
    lane 8 i + r addresses receives column r of matrix i (its element c from lane 4 c +
    r // 2, half r % 2 of register i). Arguments and result as ptx_stmatrix_x4."""
    out = {}
    for i in range(4):
        for r in range(8):
            base = addresses[8 * i + r]
            for c in range(8):
                out[base + c] = registers[4 * c + r // 2][i][r % 2]
    return out


def ptx_ldmatrix_x4_trans(addresses, memory) -> list[list[tuple]]:
    """What ldmatrix.m8n8.x4.trans.b16 loads: lane l's register i = (low, high) halves =
    elements l // 4 of the rows lanes 8 i + 2 (l % 4) and 8 i + 2 (l % 4) + 1 address
    (matrix i transposed). memory maps element offsets to values."""
    return [[tuple(memory[addresses[8 * i + 2 * (lane % 4) + h] + lane // 4] for h in range(2)) for i in range(4)]
            for lane in range(32)]


def check_trans_copy(register_tv, address_tv, fragment_tv) -> None:
    """The .trans forms of stmatrix.x4 (registers -> shared) and ldmatrix.x4 (shared ->
    registers) between a warp's fragment of a 16 x 16 block (coordinates (row, column) of
    fragment_tv: warp_mma's accumulator, or its A operand, the same map for 16 x 16) and a
    shared tile seen through the same coordinates whose first mode is the contiguous one
    (a transposed view of a row-major tile). Both move register i, half h of lane l
    (fragment row l // 4, column 2 (l % 4) + h of matrix i) to or from element l // 4 of
    the row lane 8 i + 2 (l % 4) + h addresses. Raises ValueError unless register_tv lists
    each lane's values as fragment_tv does, each lane addresses 8 consecutive rows of one
    column, and that placement is each value's coordinate. CuTe DSL layouts as
    check_stmatrix_copy's (the copy's register side and address side, from the tiled
    copy: source and destination for stmatrix, destination and source for ldmatrix)."""
    _check_register_side("trans copy", register_tv, address_tv, fragment_tv)
    for lane in range(32):
        r0, c0 = fragment_coords(*address_tv, BLOCK, lane, 0)
        if [fragment_coords(*address_tv, BLOCK, lane, x) for x in range(8)] != [(r0 + x, c0) for x in range(8)]:
            raise ValueError(f"trans copy: lane {lane} of the address layout {address_tv} does not address "
                             f"8 consecutive rows of one column")
    for lane in range(32):
        for i in range(4):
            for h in range(2):
                r0, c0 = fragment_coords(*address_tv, BLOCK, 8 * i + 2 * (lane % 4) + h, 0)
                placed = (r0 + lane // 4, c0)
                if placed != fragment_coords(*register_tv, BLOCK, lane, 2 * i + h):
                    raise ValueError(f"trans copy: lane {lane} register {i} half {h} lands at {placed}, not "
                                     f"at its value's coordinate (layouts {register_tv}, {address_tv})")


def bank_groups(row_bytes: int) -> list[int]:
    """The 16-byte bank group (of 8: 128 bytes per shared-memory wavefront) each of the 8
    row addresses of one 8 x 8 matrix falls in, for rows row_bytes apart (16-byte aligned):
    all different means the matrix is written in one wavefront."""
    return [(r * row_bytes // 16) % 8 for r in range(8)]
