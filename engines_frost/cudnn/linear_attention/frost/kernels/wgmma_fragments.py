"""Register-fragment and shared-memory index maps that fwd_wgmma relies on (pure Python).

fwd_wgmma keeps fwd_mma's per-warp register tensors (the fp32 state S^T, the bf16 A operands)
and hands them to warpgroup MMA (WGMMA) unchanged. That is only right if, for every
thread, value i of the warp-level m16n8k16 fragment and value i of the warpgroup
m64nNk16 fragment sit at the same (row, column) up to the warp's 16-row offset inside
the warpgroup. Both fragments are CuTe thread-value layouts: ((threads), (values)) ->
a column-major index into the tile. ``fragment_coords`` evaluates one, and
``warp_view_matches`` compares a warpgroup layout with a warp layout; fwd_wgmma asserts it
on the layouts the installed CuTe DSL traces (so a DSL that reorders fragments fails
the compile, not the numerics), and the CPU tests check the same function on the
layouts of the PTX fragment tables.

``sw128_byte_offset`` is the 128-byte swizzled K-major layout WGMMA reads B from
(fwd_mma.SW128 tiles): the tests check that it is a bijection and keeps every 16-byte
vector of a row contiguous, which the operand stage's 16-byte stores need.
"""
from __future__ import annotations


def _flatten(t):
    if isinstance(t, (tuple, list)):
        out = []
        for x in t:
            out.extend(_flatten(x))
        return out
    return [t]


def _evaluate(shape, stride, index: int) -> int:
    """A (possibly nested) layout at a flat column-major index."""
    offset = 0
    for extent, st in zip(_flatten(shape), _flatten(stride)):
        offset += (index % extent) * st
        index //= extent
    return offset


def fragment_coords(tv_shape, tv_stride, rows: int, thread: int, value: int) -> tuple[int, int]:
    """(row, column) of value ``value`` of thread ``thread`` in a thread-value layout
    ((thread modes), (value modes)) over a column-major tile with ``rows`` rows."""
    (t_shape, v_shape), (t_stride, v_stride) = tv_shape, tv_stride
    offset = _evaluate(t_shape, t_stride, thread) + _evaluate(v_shape, v_stride, value)
    return offset % rows, offset // rows


def _size(shape) -> int:
    n = 1
    for extent in _flatten(shape):
        n *= extent
    return n


def warp_view_matches(wg_tv, wg_rows: int, warp_tv, warp_rows: int, values: int) -> bool:
    """True when the first ``values`` values of every thread of the warpgroup layout
    (wg_tv = (shape, stride), 128 threads, wg_rows = 64) are, in order, the warp layout's
    (warp_tv, 32 threads, warp_rows = 16) values of the same lane, shifted down by 16 rows
    per warp. Column ranges may differ in width (a 16 x 16 warp tile against the first
    columns of a 64 x N warpgroup tile)."""
    for thread in range(128):
        warp, lane = divmod(thread, 32)
        for v in range(values):
            r, col = fragment_coords(*wg_tv, wg_rows, thread, v)
            wr, wcol = fragment_coords(*warp_tv, warp_rows, lane, v)
            if (r, col) != (wr + warp_rows * warp, wcol):
                return False
    return True


def blocks_view_match(wg_tv, wg_rows: int, warp_tv, warp_rows: int, per: int, blocks: int,
                      block_cols: int = 16) -> bool:
    """True when every thread's values of the warpgroup layout (128 threads, wg_rows = 64,
    ``blocks`` x ``block_cols`` columns) come as ``blocks`` runs of ``per``, run b being
    the warp layout's first ``per`` values (one warp_rows x block_cols tile) shifted down
    by warp_rows per warp and right by block_cols b. What the wgmma chain (bwd_chain_wgmma)
    relies on when it cuts a warpgroup accumulator into the per-warp 16 x 16 blocks of the
    back substitution, and when it runs the update into a warp's [16, K] dS^T registers
    (K / 16 such runs, in the warp tensor's order)."""
    for thread in range(128):
        warp, lane = divmod(thread, 32)
        for b in range(blocks):
            for v in range(per):
                r, col = fragment_coords(*wg_tv, wg_rows, thread, b * per + v)
                wr, wcol = fragment_coords(*warp_tv, warp_rows, lane, v)
                if (r, col) != (wr + warp_rows * warp, wcol + block_cols * b):
                    return False
    return True


def tv_size(tv) -> tuple[int, int]:
    """(threads, values) of a thread-value layout given as (shape, stride)."""
    return _size(tv[0][0]), _size(tv[0][1])


def sw128_byte_offset(row: int, col: int) -> int:
    """Byte offset of bf16 element (row, col) inside its 8-row x 64-column swizzle atom
    (1024 bytes): row r % 8 is 128 bytes, and its 16-byte unit col // 8 is XOR-ed with
    r % 8 (the hardware's 128-byte swizzle, CuTe's Swizzle<3,4,3> on byte addresses)."""
    unit = (col % 64) // 8
    return (row % 8) * 128 + ((unit ^ (row % 8)) * 16) + (col % 8) * 2


def sw128_tile_offset(rows: int, row: int, col: int) -> int:
    """Byte offset of (row, col) in a [rows, cols] SW128 tile (fwd_mma.sw128_layout): the
    atoms are laid out rows first (row // 8), then by 64-column atom column (col // 64)."""
    atom = (row // 8) + (rows // 8) * (col // 64)
    return atom * 1024 + sw128_byte_offset(row, col)


def check_b_quads(tv, rows: int) -> None:
    """Raises ValueError unless the m16n8k16 B layout tv ((shape, stride) over a
    column-major [N = rows, K] tile) gives each lane its values in groups of four that sit
    in one column n of B (one tile row here) at four different k, and covers the tile once.
    bwd_grads_vec.state_pairs_ldsm sums a lane's groups per channel on that assumption."""
    lanes, values = tv_size(tv)
    if lanes != 32 or values % 4:
        raise ValueError(f"B layout {tv}: not 32 lanes x a multiple of 4 values")
    seen = set()
    for lane in range(32):
        for g in range(values // 4):
            quad = [fragment_coords(*tv, rows, lane, 4 * g + i) for i in range(4)]
            if len({n for n, _ in quad}) != 1 or len({k for _, k in quad}) != 4:
                raise ValueError(f"B layout {tv}: lane {lane} group {g} is {quad}, not one column")
            seen.update(quad)
    if len(seen) != 32 * values:
        raise ValueError(f"B layout {tv}: covers {len(seen)} of {32 * values} elements")


def check_c_pairs(tv, rows: int) -> None:
    """Raises ValueError unless the accumulator layout tv ((shape, stride) over a
    column-major tile with ``rows`` rows) gives each lane its values in pairs 2 i, 2 i + 1
    at (r, c), (r, c + 1) with c even: bwd_grads_vec reads the bf16 operands at a pair's
    two columns with one 4-byte load."""
    lanes, values = tv_size(tv)
    if values % 2:
        raise ValueError(f"accumulator layout {tv}: an odd number of values")
    for lane in range(lanes):
        for i in range(0, values, 2):
            r, c = fragment_coords(*tv, rows, lane, i)
            if c % 2 or fragment_coords(*tv, rows, lane, i + 1) != (r, c + 1):
                raise ValueError(f"accumulator layout {tv}: lane {lane} values {i}, {i + 1} are not a column pair")


def shared_coordinate(tv, rows: int, axis: int) -> list[int]:
    """For each value v of the thread-value layout tv ((shape, stride) over a column-major
    tile with ``rows`` rows), the first value index whose row (axis 0) or column (axis 1)
    equals v's for every thread. fwd_wgmma_gram's Gram epilogue loads a gate or beta once per
    distinct row (column) of a thread's accumulator values and reuses it for the values
    this map sends there; a DSL layout whose repeats differ between threads gives the
    identity map for those values (each loads its own), never a wrong reuse."""
    threads, values = tv_size(tv)
    coords = [[fragment_coords(*tv, rows, t, v) for v in range(values)] for t in range(threads)]
    rep = []
    for v in range(values):
        rep.append(next(w for w in range(v + 1)
                        if all(coords[t][w][axis] == coords[t][v][axis] for t in range(threads))))
    return rep
