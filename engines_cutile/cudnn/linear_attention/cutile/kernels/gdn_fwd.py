"""Host orchestration of the chunked GDN forward (three launches, no host sync).

1. chunk_table: (sequence, chunk) rows built on device from cu_seqlens;
2. gdn_wy: per chunk and output head, the WY form w, u (scratch);
3. gdn_chunk: per sequence, head and V block, the state recurrence with fused outputs.

Buffers: q [T, H, K], k [T, H, K], v [T, HV, V], g / beta [T, HO] fp32 (or io dtype),
cu_seqlens [N+1] int32, initial_state / final_state [N, HO, V, K] fp32 (optional),
o [T, HO, V] io dtype.  Scratch (from the workspace, see `gdn_fwd_layout`):
w [T, HO, K], u [T, HO, V] in the io dtype, chunk table [NT_bound, 2] + count [1].
"""
from __future__ import annotations

import math

from ..workspace import WorkspaceLayout

BT = 64
BV_CHUNK = 64


def nt_bound(total_tokens: int, n_seq: int, bt: int = BT) -> int:
    return (total_tokens + bt - 1) // bt + n_seq


def gdn_fwd_layout(total_tokens, n_seq, ho, dk, dv, io_dtype, io_itemsize, torch_int32):
    """Scratch regions of one forward call (exact byte size in `.size`)."""
    lay = WorkspaceLayout()
    lay.add("w", (total_tokens, ho, dk), io_dtype, io_itemsize)
    lay.add("u", (total_tokens, ho, dv), io_dtype, io_itemsize)
    lay.add("table", (nt_bound(total_tokens, n_seq), 2), torch_int32, 4)
    lay.add("count", (1,), torch_int32, 4)
    return lay


def _pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


def gdn_fwd(q, k, v, g, beta, cu_seqlens, o, scratch, *, scale: float,
            initial_state=None, final_state=None, use_l2norm: bool = False, stream=None):
    import cuda.tile as ct
    import torch

    from .chunk_table import chunk_table_fwd
    from .gdn_chunk import gdn_chunk_fwd_kernel
    from .gdn_wy import gdn_wy_fwd_kernel

    if stream is None:
        stream = torch.cuda.current_stream()
    total, h_q, dk = q.shape
    hv, dv = v.shape[1], v.shape[2]
    ho = max(h_q, hv)
    n_seq = cu_seqlens.shape[0] - 1
    bk, bv_full = _pow2(dk), _pow2(dv)
    bv = min(BV_CHUNK, bv_full)
    table, count = scratch["table"], scratch["count"]
    chunk_table_fwd(cu_seqlens, table, count, n_seq, BT, stream)
    ct.launch(stream, (table.shape[0], ho, 1), gdn_wy_fwd_kernel,
              (k, v, g, beta, cu_seqlens, table, scratch["w"], scratch["u"],
               ho // h_q, ho // hv, BT, int(math.log2(BT)), bk, bv_full, bool(use_l2norm)))
    dummy = scratch["count"]
    ct.launch(stream, (n_seq, ho, (dv + bv - 1) // bv), gdn_chunk_fwd_kernel,
              (q, k, scratch["w"], scratch["u"], g, cu_seqlens,
               initial_state if initial_state is not None else _dummy_state(dummy),
               final_state if final_state is not None else _dummy_state(dummy),
               o, float(scale), ho // h_q, BT, bk, bv, bool(use_l2norm),
               initial_state is not None, final_state is not None))


def _dummy_state(t):
    # kernels compile the unused state path out; they still need a rank-4 array argument
    return t.view(1, 1, 1, 1)
