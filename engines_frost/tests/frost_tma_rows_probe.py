"""TMA loads of 64-token row blocks into the forward's SW128 operand tiles (test tooling).

Step (1) of the forward's warp-specialisation plan (kernels/NOTES.md, "Warp
specialisation" and "TMA rows and the launch ABI") replaces the per-thread cp.async row
copies with TMA boxes. This probe is the smallest kernel that does that the way the
product would: x is [T, H, D] bf16 (tokens, heads, channels), viewed as (T, D, H) so
that the box modes (64 tokens, D channels) come first and the head is the rest mode; the
shared tile is the canonical K-major SW128 layout that warpgroup MMA reads
(fwd_mma.sw128_layout: 8-row x 64-column swizzle atoms), which makes the box 64 rows x 64
channels, D / 64 boxes per tile; warp 0 arms an mbarrier with the tile's bytes (one
elected lane) and issues them (the copy elects its own lane: it must be reached by the
whole warp), every thread waits on the barrier's phase 0. CTA (c, h) then writes its
tile back, all 64 rows, into out [ceil(T / 64) * 64, H, D], so a run shows both the
coordinates (out[:T] == x, bitwise) and TMA's out-of-bounds fill (rows >= T read as
zeros; rows past a sequence's end inside the tensor are NOT zeroed: that stays the
kernel's job). The descriptor is encoded by the compiled host function on every call
(the NOTES' option (a)).

CPU: frost_tma_probes_test.py (sm_90a build: D / 64 UTMALDG per CTA, an mbarrier);
GPU: frost_tma_rows_probe_gpu_test.py.
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Int32, Int64
from cutlass.cute.nvgpu import cpasync

from cudnn.linear_attention.frost.kernels.fwd_mma import SW128_ALIGN, sw128_layout

CHUNK = 64
THREADS = 128


def tile_layout(D: int):
    """[CHUNK, D] bf16 in the K-major SW128 layout (fwd_mma.sw128_layout's), composed."""
    return sw128_layout((CHUNK, D))


class TmaRowsProbe:
    """Callable for cute.compile: (x, out, T, stream); H and D are compile-time."""

    def __init__(self, H: int, D: int):
        if D % 64:
            raise ValueError(f"TmaRowsProbe: D must be a multiple of 64 (one SW128 box column), got {D}")
        self.H, self.D = H, D

    @cute.jit
    def __call__(self, p_x: cute.Pointer, p_out: cute.Pointer, T: Int32, stream):
        H, D = self.H, self.D
        rows = (T + CHUNK - 1) // CHUNK * CHUNK
        x = cute.make_tensor(p_x, cute.make_layout((T, D, H), stride=(H * D, 1, D)))
        out = cute.make_tensor(p_out, cute.make_layout((rows, H, D), stride=(H * D, D, 1)))
        atom, tma_x = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), x, tile_layout(D), (CHUNK, D))
        self.kernel(atom, tma_x, out).launch(grid=[rows // CHUNK, H, 1], block=[THREADS, 1, 1], stream=stream)

    @cute.kernel
    def kernel(self, atom: cute.CopyAtom, tma_x: cute.Tensor, out: cute.Tensor):
        D = self.D
        tid, _, _ = cute.arch.thread_idx()
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        c, h, _ = cute.arch.block_idx()
        smem = cutlass.memory.SmemAllocator()
        # The swizzle goes in the pointer, as the forward's tiles carry it (fwd_mma.
        # allocate_smem): given the composed layout instead, allocate_tensor applies the
        # atom's swizzle to element indices while TMA applies it to byte addresses, and the
        # read-back saw 16-byte chunks and rows permuted (the H200 run before this).
        lay = tile_layout(D)
        tile = smem.allocate_tensor(BFloat16, lay.outer, SW128_ALIGN, swizzle=lay.inner)
        bar = smem.allocate_array(Int64, 1)
        # Warp 0 as a whole, one lane elected inside: the TMA copy elects its issuing lane
        # with a full-warp elect.sync, so issued from a one-thread branch (tid == 0) it
        # waits for 31 lanes parked at the branch's reconvergence point, and the CTA hangs
        # (the first H200 run of this probe did).
        if warp == 0:
            with cute.arch.elect_one():
                cute.arch.mbarrier_init(bar, 1)
        cute.arch.mbarrier_init_fence()
        cute.arch.sync_threads()
        box = cute.local_tile(tma_x, (CHUNK, D), (c, 0, h))
        dst, src = cpasync.tma_partition(atom, 0, cute.make_layout(1), cute.group_modes(tile, 0, 2),
                                         cute.group_modes(box, 0, 2))
        if warp == 0:
            with cute.arch.elect_one():
                cute.arch.mbarrier_arrive_and_expect_tx(bar, CHUNK * D * 2)
            cute.copy(atom, src, dst, tma_bar_ptr=bar)
        cute.arch.mbarrier_wait(bar, 0)
        for u in cutlass.range_constexpr(CHUNK * D // THREADS):
            idx = tid + u * THREADS
            out[c * CHUNK + idx // D, h, idx % D] = tile[idx // D, idx % D]


def compile_probe(H: int, D: int, options: str = "--gpu-arch sm_90a"):
    """cute.compile of the probe with stand-in pointers (the descriptor is encoded when
    the compiled function runs, from the pointers and T it is called with)."""
    import cuda.bindings.driver as cuda
    from cutlass.cute.runtime import make_ptr

    def stand_in():
        return make_ptr(BFloat16, 16, cute.AddressSpace.gmem, assumed_align=16)

    return cute.compile(TmaRowsProbe(H, D), stand_in(), stand_in(), Int32(100), cuda.CUstream(0), options=options)
