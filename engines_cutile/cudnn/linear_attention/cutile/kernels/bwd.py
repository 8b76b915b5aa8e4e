"""Host orchestration of the chunked GDN / KDA backward (no forward intermediates kept).

1. chunk_table (with the cu_seqlens safety, seq_bounds.py: the sanitised table every
   later kernel reads, clamped into [0, T] and non-decreasing, and zeros in the gradient
   rows outside every sequence), then forward stage 1 again (wy_fwd, keeping
   T = (I + A)^-1);
2. chunk_fwd in RECOMPUTE mode: the state entering every chunk and v_new;
3. chunk_bwd_dhu: the reverse state-gradient recurrence (dS per chunk, dv_new,
   d_initial_state);
4. bwd_dqkwg: per chunk dq and the output/state parts of dk, dw, dG;
5. bwd_wy: per chunk the WY adjoint: dk, dv, dbeta, dg (KDA: two score tiers in 4-5);
6. head_group_sum when q/k (or v) heads are shared by several output heads (the rows
   outside every sequence of its fp32 partials were zeroed in 1, so it writes zeros
   there).

Buffers as fwd.py plus d_out [T, HO, V]; d_final_state / d_initial_state
[N, HO, V, K] fp32 (optional); gradients dq, dk [T, H, K], dv [T, HV, V], dg like g,
dbeta like beta.  Scratch from `bwd_layout` (exact size); KDA with float16 io also
stages dO in fp32 (input_staging.py).
"""
from __future__ import annotations

import contextlib
import functools
import math

from cudnn.linear_attention.common.cu_seqlens_check import check_cu_seqlens, strict_requested

from .fwd import BT, BV_STAGE2, fwd_layout, pow2, scratch_dtype, slice_tma_requested
from .input_staging import add_staging, needs_fp32_staging, stage_inputs


def bwd_layout(total_tokens: int, n_seq: int, h_q: int, hv: int, dk: int, dv: int, *,
               kda: bool, io_dtype, io_itemsize: int, int32_dtype, float32_dtype):
    ho = max(h_q, hv)
    lay = fwd_layout(total_tokens, n_seq, ho, dk, dv, kda=kda, io_dtype=io_dtype,
                     io_itemsize=io_itemsize, int32_dtype=int32_dtype,
                     float32_dtype=float32_dtype, h_q=h_q, hv=hv, backward=True)
    if needs_fp32_staging(kda, io_dtype):
        add_staging(lay, {"dO": (total_tokens, ho, dv)}, float32_dtype)
    io_dtype, io_itemsize = scratch_dtype(kda, io_dtype, io_itemsize, float32_dtype)
    rows = lay.regions["table"].shape[0]
    lay.add("tinv", (total_tokens, ho, BT), float32_dtype, 4)
    lay.add("states", (rows, ho, dk, dv), io_dtype, io_itemsize)
    lay.add("dstates", (rows, ho, dk, dv), io_dtype, io_itemsize)
    lay.add("v_new", (total_tokens, ho, dv), io_dtype, io_itemsize)
    lay.add("dv_new", (total_tokens, ho, dv), float32_dtype, 4)
    lay.add("dw", (total_tokens, ho, dk), float32_dtype, 4)
    lay.add("dk_part", (total_tokens, ho, dk), float32_dtype, 4)
    lay.add("dg_part", (total_tokens, ho, dk if kda else 1), float32_dtype, 4)
    if ho != h_q:
        lay.add("dq_group", (total_tokens, ho, dk), float32_dtype, 4)
        lay.add("dk_group", (total_tokens, ho, dk), float32_dtype, 4)
    if ho != hv:
        lay.add("dv_group", (total_tokens, ho, dv), float32_dtype, 4)
    return lay


def chunked_bwd(q, k, v, g, beta, cu_seqlens, d_out, dq, dk, dv, dg, dbeta, scratch, *,
                kda: bool, scale: float, initial_state=None, d_final_state=None,
                d_initial_state=None, use_l2norm: bool = False, stream=None,
                bv: int = BV_STAGE2, stages: tuple[str, ...] | None = None,
                occupancy: int | None = None, strict_cu_seqlens: bool | None = None,
                slice_tma: bool | None = None) -> None:
    """Run the backward; `stages` (default: all) lets benchmarks time launches one kind at
    a time: "table", "wy", "recompute", "dhu", "dqkwg", "bwd_wy", "group_sum" (each later
    stage reads the scratch an earlier full call left).  `occupancy` (benchmarks) replaces
    the dqkwg / bwd_wy kernels' hint (1): at 2 tileiras builds them for two CTAs per SM
    (fewer registers and less shared memory each, more spill), compiled on first use.
    `slice_tma` as chunked_fwd's (None: CUDNN_CUTILE_SLICE_TMA)."""
    import cuda.tile as ct
    import torch

    from .bwd_dqkwg import la_bwd_dqkwg_kda_kernel, la_bwd_dqkwg_kernel
    from .bwd_wy import la_bwd_wy_kda_kernel, la_bwd_wy_kernel
    from .chunk_bwd_dhu import la_chunk_bwd_dhu_kernel
    from .chunk_fwd import la_chunk_fwd_kernel
    from .chunk_table import chunk_table_fwd
    from .head_group_sum import head_group_sum_kernel
    from .wy_fwd import la_wy_fwd_kernel

    tma = slice_tma_requested(slice_tma)   # read first: a bad value fails before any launch
    if stream is None:
        stream = torch.cuda.current_stream()
    if strict_requested(strict_cu_seqlens):
        with (torch.cuda.stream(stream) if cu_seqlens.is_cuda else contextlib.nullcontext()):
            check_cu_seqlens(cu_seqlens, q.shape[0], "cutile")
    if occupancy is not None:
        if occupancy not in (1, 2, 3, 4):
            raise ValueError(f"chunked_bwd: occupancy must be 1..4 (CTAs per SM), got "
                             f"{occupancy!r}")
        la_bwd_dqkwg_kernel = _with_occupancy(la_bwd_dqkwg_kernel, occupancy)
        la_bwd_dqkwg_kda_kernel = _with_occupancy(la_bwd_dqkwg_kda_kernel, occupancy)
        la_bwd_wy_kernel = _with_occupancy(la_bwd_wy_kernel, occupancy)
        la_bwd_wy_kda_kernel = _with_occupancy(la_bwd_wy_kda_kernel, occupancy)
    staged = needs_fp32_staging(kda, q.dtype)
    if staged:
        q, k, v, d_out = stage_inputs(scratch, {"q": q, "k": k, "v": v, "dO": d_out}, stream)
    total, h_q, d_k = q.shape
    hv, d_v = v.shape[1], v.shape[2]
    ho = max(h_q, hv)
    n_seq = cu_seqlens.shape[0] - 1
    bk, bv_full = pow2(d_k), pow2(d_v)
    # 16-bit KDA runs dqkwg / bwd_wy on its own entry points (8 compute warps; see
    # kda_wy_hinted for where tileiras fails under that hint)
    dqkwg_kernel, wy_kernel = la_bwd_dqkwg_kernel, la_bwd_wy_kernel
    if kda and not staged:
        dqkwg_kernel = la_bwd_dqkwg_kda_kernel
        if kda_wy_hinted(bk, bv_full):
            wy_kernel = la_bwd_wy_kda_kernel
    bv = min(bv, bv_full)
    gw = bk if kda else 1
    s = scratch
    rows = s["table"].shape[0]
    tiers = (1, 2) if kda else (1,)
    placeholder = s["count"].view(1, 1, 1, 1)
    placeholder3 = s["count"].view(1, 1, 1)
    placeholder2 = s["count"].view(1, 1)

    def want(stage: str) -> bool:
        return stages is None or stage in stages

    dq_dst = s["dq_group"] if ho != h_q else dq
    dk_dst = s["dk_group"] if ho != h_q else dk
    dv_dst = s["dv_group"] if ho != hv else dv
    if want("table"):   # zeros the rows no later kernel writes (the group sums copy them)
        chunk_table_fwd(cu_seqlens, s, total, BT, stream,
                        zeroed=(dq_dst, dk_dst, dv_dst, dg, dbeta))
    # every later kernel reads the sanitised table: rows in [0, T) whatever cu_seqlens holds
    cu_seqlens = s["cu_safe"]
    for tier in tiers if want("wy") else ():
        ct.launch(stream, (rows, ho, 1), la_wy_fwd_kernel,
                  (q, k, v, g, beta, cu_seqlens, s["table"], s["w"], s["u"], s["p"], s["qg"],
                   s["kd"], s["decay"], s["reroute"], s["tinv"], placeholder2, placeholder2,
                   float(scale), ho // h_q, ho // hv, BT, int(math.log2(BT)), bk, bv_full, gw,
                   bool(kda), bool(use_l2norm), tier, True, False, tma))
    v_blocks = (d_v + bv - 1) // bv
    if want("recompute"):
        ct.launch(stream, (n_seq, ho, v_blocks), la_chunk_fwd_kernel,
                  (s["w"], s["u"], s["p"], s["qg"], s["kd"], s["decay"], cu_seqlens,
                   s["offsets"], placeholder if initial_state is None else initial_state,
                   placeholder, placeholder3, s["states"], s["v_new"], placeholder3,
                   placeholder3, placeholder2, placeholder2, 1, BT, bk, bv, gw,
                   initial_state is not None, False, True, False, tma))
    if want("dhu"):
        ct.launch(stream, (n_seq, ho, v_blocks), la_chunk_bwd_dhu_kernel,
                  (s["w"], s["p"], s["qg"], s["kd"], s["decay"], d_out, cu_seqlens,
                   s["offsets"], placeholder if d_final_state is None else d_final_state,
                   placeholder if d_initial_state is None else d_initial_state,
                   s["dstates"], s["dv_new"], BT, bk, bv, gw, d_final_state is not None,
                   d_initial_state is not None, tma))
    for tier in tiers:
        for part in (1, 2) if want("dqkwg") else ():
            ct.launch(stream, (rows, ho, 1), dqkwg_kernel,
                      (q, k, g, d_out, cu_seqlens, s["table"], s["reroute"], s["states"],
                       s["dstates"], s["v_new"], s["dv_new"], dq_dst, s["dk_part"], s["dw"],
                       s["dg_part"], float(scale), ho // h_q, BT, bk, bv_full, gw, bool(kda),
                       bool(use_l2norm), tier, part, tma))
        if want("bwd_wy"):
            ct.launch(stream, (rows, ho, 1), wy_kernel,
                      (k, v, g, beta, cu_seqlens, s["table"], s["reroute"], s["tinv"],
                       s["dv_new"], s["dw"], s["dk_part"], s["dg_part"], dk_dst, dv_dst, dg,
                       dbeta, ho // h_q, ho // hv, BT, bk, bv_full, gw, bool(kda),
                       bool(use_l2norm), tier, tma))
    t_blocks = (total + BT - 1) // BT
    for part, out, groups, width in ((dq_dst, dq, ho // h_q, bk), (dk_dst, dk, ho // h_q, bk),
                                     (dv_dst, dv, ho // hv, bv_full)):
        if groups > 1 and want("group_sum"):
            ct.launch(stream, (t_blocks, out.shape[1], 1), head_group_sum_kernel,
                      (part, out, groups, BT, width))


def kda_wy_hinted(bk: int, bv: int) -> bool:
    """Whether 16-bit KDA's WY adjoint runs on its own entry point (8 compute warps).

    KDA's entry points serve 16-bit inputs only: under their hint tileiras 13.4 fails
    ("failed to compile Tile IR program") on several fp32-staged (fp16) specializations of
    both kernels, and on bf16 bwd_wy at K = 64, V = 256; those keep the default hints
    (checked on sm_90 for K, V in {64, 128, 256}: K = V, K = 64 / V = 128, K = 256 / V = 64
    compile hinted; V > K from 256 up falls back)."""
    return bv <= 128 or bk >= bv


@functools.lru_cache(maxsize=None)
def _with_occupancy(kernel, occupancy: int):
    """One kernel object per hint: each keeps its own JIT cache across calls."""
    return kernel.replace_hints(occupancy=occupancy)
