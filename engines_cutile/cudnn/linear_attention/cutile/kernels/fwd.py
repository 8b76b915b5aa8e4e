"""Host orchestration of the chunked GDN / KDA forward: three launches, no host sync.

1. chunk_table: (sequence, chunk) rows built on device from cu_seqlens, and the
   cu_seqlens safety (seq_bounds.py): the sanitised table `cu_safe` (clamped into
   [0, T], non-decreasing) that every later kernel reads instead of cu_seqlens, and
   zeros in the output rows outside every sequence;
2. wy_fwd: per chunk and output head: w, u, the intra-chunk scores P and (KDA) decayed
   q/k and the chunk's total decay (scratch);
3. chunk_fwd: per sequence, head and V block: the state recurrence with fused outputs
   (GDN: the decays applied there as row scales of q @ S and v_new, ROW_SCALES).

Buffers: q, k [T, H, K]; v [T, HV, V]; g [T, HO] (GDN) or [T, HO, K] (KDA) and beta
[T, HO] in fp32 or the io dtype; cu_seqlens [N+1] int32; initial_state / final_state
[N, HO, V, K] fp32 (optional); o [T, HO, V] io dtype.  The q/k head of output head h is
h // (HO / H) and its v head h // (HO / HV) (requires HK == H and HV % H == 0 or H % HV
== 0).  Scratch regions come from `fwd_layout` and are carved from the workspace.
KDA with float16 q/k/v runs on fp32 copies of them with fp32 scratch (input_staging.py:
a tileiras 13.4 crash); `fwd_layout` reserves those regions and `chunked_fwd` fills them.
"""
from __future__ import annotations

import contextlib
import math
import os

from cudnn.linear_attention.common.cu_seqlens_check import check_cu_seqlens, strict_requested

from ..workspace import WorkspaceLayout
from .input_staging import add_staging, needs_fp32_staging, stage_inputs
from .seq_bounds import add_regions as add_cu_regions

BT = 64          # chunk length: the WY inverse is BT x BT, the scan step of stage 2
BV_STAGE2 = 64   # V block of stage 2 (one CTA per sequence x head x V block)
SLICE_TMA_ENV = "CUDNN_CUTILE_SLICE_TMA"


def slice_tma_requested(flag: bool | None = None) -> bool:
    """The kernels' SLICE_TMA constant: whether loads and stores through a per-sequence
    slice (bounds read from cu_seqlens on the device) may use TMA.  `flag` when given,
    else CUDNN_CUTILE_SLICE_TMA: unset, empty or 1 allows it (the fast default), 0 makes
    them plain loads and stores.  With TMA tileiras builds those slices' tensor maps in the
    kernel, and compute-sanitizer's memcheck reports the map writes as out-of-bounds
    atomics; the =0 build is memcheck-clean but its GDN forward is 2.2x slower (0.815 ->
    1.81 ms at 8 x 4096 tokens, 16 heads, K = V = 128; fwd+bwd 4.9 -> 12.2 ms), so it is
    for sanitizer runs only.  Each value is its own kernel specialization (cache entry)."""
    if flag is not None:
        return bool(flag)
    value = os.environ.get(SLICE_TMA_ENV, "").strip()
    if value in ("", "1"):
        return True
    if value == "0":
        return False
    raise ValueError(f"{SLICE_TMA_ENV}={value!r}: expected 1 (TMA through sequence slices, "
                     f"the default) or 0 (no TMA there: the compute-sanitizer build)")


def nt_bound(total_tokens: int, n_seq: int, bt: int = BT) -> int:
    """Upper bound on the number of chunks of any split of T tokens into N sequences."""
    return (total_tokens + bt - 1) // bt + n_seq


def pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


def scratch_dtype(kda: bool, io_dtype, io_itemsize: int, float32_dtype):
    """(dtype, itemsize) of the io-precision scratch: io_dtype, or fp32 when staged."""
    if needs_fp32_staging(kda, io_dtype):
        return float32_dtype, 4
    return io_dtype, io_itemsize


def row_scales(kda: bool, backward: bool) -> bool:
    """Whether stage 1 writes GDN's row factors q_row / k_row instead of qg / kd (GDN
    forward only: KDA's decays are per channel, the backward's recompute reads qg / kd)."""
    return not kda and not backward


def fwd_layout(total_tokens: int, n_seq: int, ho: int, dk: int, dv: int, *, kda: bool,
               io_dtype, io_itemsize: int, int32_dtype, float32_dtype,
               h_q: int | None = None, hv: int | None = None,
               backward: bool = False) -> WorkspaceLayout:
    """Scratch of one forward call; `.size` is the exact number of workspace bytes.

    `io_dtype` is the q/k/v dtype; h_q / hv (q/k and v heads, default ho) size the fp32
    copies of q/k/v that KDA with float16 io needs (input_staging.py); `backward` keeps
    the regions the backward's recompute needs (qg, kd for GDN too)."""
    lay = WorkspaceLayout()
    rows = nt_bound(total_tokens, n_seq)
    if needs_fp32_staging(kda, io_dtype):
        add_staging(lay, {"q": (total_tokens, h_q or ho, dk), "k": (total_tokens, h_q or ho, dk),
                          "v": (total_tokens, hv or ho, dv)}, float32_dtype)
    io_dtype, io_itemsize = scratch_dtype(kda, io_dtype, io_itemsize, float32_dtype)
    lay.add("w", (total_tokens, ho, dk), io_dtype, io_itemsize)
    lay.add("u", (total_tokens, ho, dv), io_dtype, io_itemsize)
    lay.add("p", (total_tokens, ho, BT), io_dtype, io_itemsize)
    if row_scales(kda, backward):
        lay.add("q_row", (total_tokens, ho), float32_dtype, 4)
        lay.add("k_row", (total_tokens, ho), float32_dtype, 4)
    else:
        lay.add("qg", (total_tokens, ho, dk), io_dtype, io_itemsize)
        lay.add("kd", (total_tokens, ho, dk), io_dtype, io_itemsize)
    lay.add("decay", (rows, ho, dk if kda else 1), float32_dtype, 4)
    lay.add("reroute", (rows, ho), int32_dtype, 4)
    lay.add("table", (rows, 2), int32_dtype, 4)
    lay.add("count", (1,), int32_dtype, 4)
    lay.add("offsets", (n_seq + 1,), int32_dtype, 4)
    add_cu_regions(lay, n_seq, int32_dtype)
    return lay


def chunked_fwd(q, k, v, g, beta, cu_seqlens, o, scratch, *, kda: bool, scale: float,
                initial_state=None, final_state=None, use_l2norm: bool = False,
                stream=None, bv: int = BV_STAGE2,
                stages: tuple[str, ...] = ("table", "wy", "chunk"),
                strict_cu_seqlens: bool | None = None,
                slice_tma: bool | None = None) -> None:
    """Run the forward; `stages` lets benchmarks time one launch at a time ("wy1" / "wy2":
    one KDA score tier of the "wy" stage). `strict_cu_seqlens` (None: the
    CUDNN_STRICT_CU_SEQLENS environment variable) checks cu_seqlens on the device first
    (ValueError naming its first bad entry; one synchronisation).  `slice_tma` (None:
    CUDNN_CUTILE_SLICE_TMA, see `slice_tma_requested`) picks the kernels' SLICE_TMA build."""
    import cuda.tile as ct
    import torch

    from .chunk_fwd import la_chunk_fwd_kernel
    from .chunk_table import chunk_table_fwd
    from .wy_fwd import la_wy_fwd_kernel

    tma = slice_tma_requested(slice_tma)   # read first: a bad value fails before any launch
    if stream is None:
        stream = torch.cuda.current_stream()
    if strict_requested(strict_cu_seqlens):
        with (torch.cuda.stream(stream) if cu_seqlens.is_cuda else contextlib.nullcontext()):
            check_cu_seqlens(cu_seqlens, q.shape[0], "cutile")
    if needs_fp32_staging(kda, q.dtype):
        q, k, v = stage_inputs(scratch, {"q": q, "k": k, "v": v}, stream)
    _, h_q, dk = q.shape
    hv, dv = v.shape[1], v.shape[2]
    ho = max(h_q, hv)
    n_seq = cu_seqlens.shape[0] - 1
    bk, bv_full = pow2(dk), pow2(dv)
    bv = min(bv, bv_full)
    s = scratch
    if "table" in stages:
        chunk_table_fwd(cu_seqlens, s, q.shape[0], BT, stream, zeroed=(o,))
    # every later kernel reads the sanitised table: rows in [0, T) whatever cu_seqlens holds
    cu_seqlens = s["cu_safe"]
    gw = bk if kda else 1
    placeholder3 = s["count"].view(1, 1, 1)   # ports a flag compiles out still need an array
    rowwise = row_scales(kda, False)
    placeholder2 = s["count"].view(1, 1)
    qg, kd = (placeholder3, placeholder3) if rowwise else (s["qg"], s["kd"])
    q_row, k_row = (s["q_row"], s["k_row"]) if rowwise else (placeholder2, placeholder2)
    # KDA: tier 1 serves chunks whose gate range fits one score split and flags the
    # rest, which the tier-2 variant (blocked exact scores) then serves
    for tier in ((1, 2) if kda else (1,)):
        if "wy" in stages or f"wy{tier}" in stages:
            ct.launch(stream, (s["table"].shape[0], ho, 1), la_wy_fwd_kernel,
                      (q, k, v, g, beta, cu_seqlens, s["table"], s["w"], s["u"], s["p"],
                       qg, kd, s["decay"], s["reroute"], placeholder3, q_row, k_row,
                       float(scale), ho // h_q, ho // hv, BT, int(math.log2(BT)), bk,
                       bv_full, gw, bool(kda), bool(use_l2norm), tier, False, rowwise, tma))
    if "chunk" not in stages:
        return
    placeholder = s["count"].view(1, 1, 1, 1)
    ct.launch(stream, (n_seq, ho, (dv + bv - 1) // bv), la_chunk_fwd_kernel,
              (s["w"], s["u"], s["p"], qg, kd, s["decay"], cu_seqlens, s["offsets"],
               placeholder if initial_state is None else initial_state,
               placeholder if final_state is None else final_state,
               o, placeholder, o, q if rowwise else placeholder3, k if rowwise else placeholder3,
               q_row, k_row, ho // h_q if rowwise else 1, BT, bk, bv, gw,
               initial_state is not None, final_state is not None, False, rowwise, tma))
