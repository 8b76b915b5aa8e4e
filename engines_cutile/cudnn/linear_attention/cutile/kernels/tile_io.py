"""Tile loads and stores shared by the linear-attention kernels.

Token-major arrays are [T, heads, D] (sliced to one sequence by the caller); a chunk's
rows load as a [BT, D] tile, zero-padded past the sequence end.  SLICE_TMA (a kernel
constant, the engine's CUDNN_CUTILE_SLICE_TMA) is every sequence-slice access's
allow_tma: the slices' bounds come from device memory, so with TMA tileiras builds the
tensor map in the kernel (global-memory writes compute-sanitizer's memcheck reports as
out of bounds); False makes the same accesses plain loads and stores (memcheck-clean,
2.2x slower GDN forward).  States are stored
V-major [N, HO, V, K] (the spec's layout) and held on chip K-major [K, BV]; per-chunk
state scratch is K-major [rows, HO, K, V].
"""
import cuda.tile as ct

ZERO = ct.PaddingMode.ZERO


def load_rows_raw(arr, chunk, head, BT: int, BD: int, SLICE_TMA: bool):
    """[BT, BD] tile of a token-major slice, in the array's dtype."""
    return ct.reshape(ct.load(arr, (chunk, head, 0), shape=(BT, 1, BD), padding_mode=ZERO,
                              allow_tma=SLICE_TMA), (BT, BD))


def load_rows(arr, chunk, head, BT: int, BD: int, SLICE_TMA: bool):
    """[BT, BD] fp32 tile of a token-major slice."""
    return ct.astype(load_rows_raw(arr, chunk, head, BT, BD, SLICE_TMA), ct.float32)


def store_rows(arr, chunk, head, tile, BT: int, BD: int, SLICE_TMA: bool):
    ct.store(arr, (chunk, head, 0), tile=ct.reshape(ct.astype(tile, arr.dtype), (BT, 1, BD)),
             allow_tma=SLICE_TMA)


def load_state_vmajor(arr, n, h, vb, BK: int, BV: int):
    """V block `vb` of a V-major [N, HO, V, K] state as a K-major fp32 [BK, BV] tile."""
    s = ct.load(arr, (n, h, vb, 0), shape=(1, 1, BV, BK), padding_mode=ZERO)
    return ct.transpose(ct.astype(ct.reshape(s, (BV, BK)), ct.float32))


def store_state_vmajor(arr, n, h, vb, state, BK: int, BV: int):
    st = ct.reshape(ct.transpose(state), (1, 1, BV, BK))
    ct.store(arr, (n, h, vb, 0), tile=ct.astype(st, arr.dtype))


def load_state_kmajor_raw(arr, row, h, BK: int, BV: int):
    """A K-major per-chunk state [rows, HO, K, V] as a [BK, BV] tile in the array's dtype."""
    t = ct.load(arr, (row, h, 0, 0), shape=(1, 1, BK, BV), padding_mode=ZERO)
    return ct.reshape(t, (BK, BV))


def load_state_kmajor(arr, row, h, BK: int, BV: int):
    """A K-major per-chunk state [rows, HO, K, V] as an fp32 [BK, BV] tile."""
    return ct.astype(load_state_kmajor_raw(arr, row, h, BK, BV), ct.float32)
