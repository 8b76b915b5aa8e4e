"""A warp-specialised TMA chunk stream (test tooling): the forward's producer side alone.

Step (2) of the forward's warp-specialisation plan (kernels/NOTES.md, "Warp
specialisation") puts the row loads on a producer warp that fills a ring of shared
stages while consumer warps work on the stage before. This probe is that skeleton with
the simplest possible consumer, so that its two questions have answers before the real
kernel is written:
- does the ring work the way the product needs it: one CTA per (sequence, head) as the
  forward's grid, chunks of 64 tokens starting at the sequence's first token (not on a
  64-row grid: the box's start coordinate is bos + 64 c), rows past the sequence's end
  inside the tensor masked by the consumer (TMA does not zero them; only rows past T come
  back as zeros), empty sequences, T not a multiple of 64;
- how close one producer warp per CTA, 128 CTAs, gets to the byte floor: q, k, v at the
  bench shape are 402 MB (~0.094 ms at 4.3 TB/s), the forward reads them once.

Layout: q, k, v [T, H, D] bf16 viewed as (T, D, H) (box modes first, as
frost_tma_rows_probe.py); each stage holds the three [64, D] tiles in the canonical SW128
layout, swizzle carried in the pointer (fwd_mma.allocate_smem's way). Warps 0-3 consume
(one warpgroup), warp 4 produces: cutlass.pipeline.PipelineTmaAsync's full barriers
(armed with the stage's bytes by one elected lane of the producer warp) and empty
barriers (one arrive per consumer warp). The consumer writes out[t, h] = sum_d (q + k +
v)[t, h, d] in fp32 for the sequence's rows, a value every row's data reaches, so a wrong
box, a wrong swizzle or a missed mask shows in the result.

CPU: frost_tma_probes_test.py (sm_90a build); GPU: frost_tma_stream_probe_gpu_test.py
(values vs float64, and `--bench` for the stream's time at the bench shape).
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass import BFloat16, Float32, Int32, Int64
from cutlass.cute.nvgpu import cpasync, warpgroup

from cudnn.linear_attention.frost.kernels.fwd_mma import SW128_ALIGN, sw128_layout

CHUNK = 64
CONSUMER_WARPS = 4
PRODUCER_WARP = CONSUMER_WARPS  # the warp after the consumer warpgroup
THREADS = 32 * (CONSUMER_WARPS + 1)
OPERANDS = 3  # q, k, v
VEC = 8  # bf16 per 16-byte shared load (one swizzle chunk)


def staged_layout(D: int, stages: int):
    """[CHUNK, D, stages] bf16: `stages` SW128 tiles (fwd_mma.sw128_layout's), one after
    another."""
    atom = warpgroup.make_smem_layout_atom(warpgroup.SmemLayoutAtomKind.K_SW128, BFloat16)
    return cute.tile_to_shape(atom, (CHUNK, D, stages), order=(0, 1, 2))


class TmaStreamProbe:
    """Callable for cute.compile: (q, k, v, cu_seqlens, out, T, N, stream); H, D and the
    number of stages are compile-time."""

    def __init__(self, H: int, D: int, stages: int = 3):
        if D % 64:
            raise ValueError(f"TmaStreamProbe: D must be a multiple of 64 (one SW128 box column), got {D}")
        if stages < 2:
            raise ValueError(f"TmaStreamProbe: stages must be >= 2 (the ring overlaps load and use), got {stages}")
        self.H, self.D, self.stages = H, D, stages

    @cute.jit
    def __call__(self, p_q: cute.Pointer, p_k: cute.Pointer, p_v: cute.Pointer, p_cu: cute.Pointer,
                 p_out: cute.Pointer, T: Int32, N: Int32, stream):
        H, D = self.H, self.D
        rows = cute.make_layout((T, D, H), stride=(H * D, 1, D))
        one = sw128_layout((CHUNK, D))
        aq, tq = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), cute.make_tensor(p_q, rows), one,
                                             (CHUNK, D))
        ak, tk = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), cute.make_tensor(p_k, rows), one,
                                             (CHUNK, D))
        av, tv = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), cute.make_tensor(p_v, rows), one,
                                             (CHUNK, D))
        cu = cute.make_tensor(p_cu, cute.make_layout((N + 1,)))
        out = cute.make_tensor(p_out, cute.make_layout((T, H), stride=(H, 1)))
        self.kernel(aq, tq, ak, tk, av, tv, cu, out).launch(grid=[N, H, 1], block=[THREADS, 1, 1], stream=stream)

    @cute.kernel
    def kernel(self, aq: cute.CopyAtom, tq: cute.Tensor, ak: cute.CopyAtom, tk: cute.Tensor, av: cute.CopyAtom,
               tv: cute.Tensor, cu: cute.Tensor, out: cute.Tensor):
        D, S = self.D, self.stages
        tid, _, _ = cute.arch.thread_idx()
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        n, h, _ = cute.arch.block_idx()
        smem = cutlass.memory.SmemAllocator()
        lay = staged_layout(D, S)
        tiles = [smem.allocate_tensor(BFloat16, lay.outer, SW128_ALIGN, swizzle=lay.inner) for _ in range(OPERANDS)]
        bars = smem.allocate_array(Int64, 2 * S)
        ring = pipeline.PipelineTmaAsync.create(
            num_stages=S, producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 1),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, CONSUMER_WARPS),
            tx_count=OPERANDS * CHUNK * D * 2, barrier_storage=bars)
        bos = cu[n]
        eos = cu[n + 1]
        chunks = (eos - bos + CHUNK - 1) // CHUNK  # an empty sequence (eos <= bos) runs none
        if warp == PRODUCER_WARP:
            # the whole warp runs the producer (the copies and the barrier arm elect their lane)
            parts = []
            for atom, coords, tile in zip((aq, ak, av), (tq, tk, tv), tiles):
                boxes = cute.local_tile(cute.domain_offset((bos, 0, 0), coords), (CHUNK, D), (None, 0, h))
                dst, src = cpasync.tma_partition(atom, 0, cute.make_layout(1), cute.group_modes(tile, 0, 2),
                                                 cute.group_modes(boxes, 0, 2))
                parts.append((atom, src, dst))
            st = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, S)
            for c in cutlass.range(chunks, unroll=1):
                ring.producer_acquire(st)
                for atom, src, dst in parts:
                    cute.copy(atom, src[None, c], dst[None, st.index], tma_bar_ptr=ring.producer_get_barrier(st))
                ring.producer_commit(st)
                st.advance()
        else:
            # two threads per row, each half of the channels, then one butterfly add
            r = tid // 2
            half = tid % 2
            st = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, S)
            for c in cutlass.range(chunks, unroll=1):
                ring.consumer_wait(st)
                acc = Float32(0.0)
                for j in cutlass.range_constexpr(D // 2 // VEC):  # 16-byte loads: a swizzle chunk each
                    for tile in tiles:
                        x = cute.make_rmem_tensor((VEC,), BFloat16)
                        cute.autovec_copy(cute.local_tile(tile[r, None, st.index], (VEC,), (half * (D // 2 // VEC) + j,)), x)
                        for e in cutlass.range_constexpr(VEC):
                            acc = acc + x[e].to(Float32)
                acc = acc + cute.arch.shuffle_sync_bfly(acc, offset=1)
                t = bos + c * CHUNK + r
                if half == 0 and t < eos:  # rows past eos belong to the next sequence
                    out[t, h] = acc
                ring.consumer_release(st)
                st.advance()


def compile_probe(H: int, D: int, stages: int = 3, options: str = "--gpu-arch sm_90a"):
    """cute.compile of the probe with stand-in pointers (the descriptors are encoded when
    the compiled function runs, from the pointers and T it is called with)."""
    import cuda.bindings.driver as cuda
    from cutlass.cute.runtime import make_ptr

    def stand_in(dtype):
        return make_ptr(dtype, 16, cute.AddressSpace.gmem, assumed_align=16)

    bf = [stand_in(BFloat16) for _ in range(OPERANDS)]
    return cute.compile(TmaStreamProbe(H, D, stages), *bf, stand_in(Int32), stand_in(Float32), Int32(100), Int32(2),
                        cuda.CUstream(0), options=options)
