"""cu_seqlens as the cuTile kernels read it, and the rows no sequence covers.

cu_seqlens lives on the device and is never read on the host (no synchronisation), so the
kernels cannot assume it is well formed (0 = cu[0] <= ... <= cu[N] = T): a table with an
entry past T, a negative entry or a descending step would make them slice outside their
arrays (undefined behaviour). The host passes therefore hand every kernel a sanitised
copy instead (`sanitized_cu_seqlens`, two small torch launches into the workspace):
S[i] = max(clamp(cu[0], 0, T), ..., clamp(cu[i], 0, T)). It is non-decreasing and inside
[0, T] by construction, so every sequence [S[n], S[n+1]) lies in [0, T) and the chunk
count stays below NT_bound; a well-formed table is its own sanitised copy, an inverted
range becomes empty. Rows before S[0] and from S[N] on belong to no sequence:
`zero_rows_outside_kernel` writes zeros there (one CTA per head, nothing to do for a
well-formed table), so no output row is returned uninitialised.
"""
import cuda.tile as ct

ROWS = 64   # rows per zero tile


@ct.kernel
def zero_rows_outside_kernel(cu_safe, out, n_seq: int, total: int, BR: ct.Constant[int],
                             BD: ct.Constant[int]):
    """out [T, heads, D]: zeros into rows [0, S[0]) and [S[N], T) of head bid(0)."""
    h = ct.bid(0)
    first = ct.load(cu_safe, (0,), shape=())
    last = ct.load(cu_safe, (n_seq,), shape=())
    zeros = ct.zeros((BR, 1, BD), dtype=out.dtype)
    if first > 0:
        head = out.slice(axis=0, start=0, stop=first)
        for j in range(ct.cdiv(first, BR)):
            ct.store(head, (j, h, 0), tile=zeros)
    if total > last:
        tail = out.slice(axis=0, start=last, stop=total)
        for j in range(ct.cdiv(total - last, BR)):
            ct.store(tail, (j, h, 0), tile=zeros)


def sanitized_cu_seqlens(cu_seqlens, total_tokens: int, scratch, stream):
    """The workspace's `cu_safe` [N+1] int32 filled from cu_seqlens on `stream` (see the
    module docstring); returns it."""
    import contextlib

    import torch

    clamped, safe = scratch["cu_clamped"], scratch["cu_safe"]
    index = scratch["cu_argmax"].view(torch.int64)
    on_stream = torch.cuda.stream(stream) if cu_seqlens.is_cuda else contextlib.nullcontext()
    with on_stream:
        torch.clamp(cu_seqlens, 0, total_tokens, out=clamped)
        torch.cummax(clamped, 0, out=(safe, index))
    return safe


def zero_uncovered_rows(cu_safe, out, n_seq: int, stream) -> None:
    """Launch zero_rows_outside_kernel on output `out` ([T, heads, D] or [T, heads])."""
    from .fwd import pow2

    arr = out if out.dim() == 3 else out.unsqueeze(-1)
    ct.launch(stream, (arr.shape[1], 1, 1), zero_rows_outside_kernel,
              (cu_safe, arr, n_seq, arr.shape[0], ROWS, pow2(arr.shape[2])))


def add_regions(layout, n_seq: int, int32_dtype) -> None:
    """The workspace regions sanitized_cu_seqlens writes (argmax: int64 as int32 pairs)."""
    layout.add("cu_clamped", (n_seq + 1,), int32_dtype, 4)
    layout.add("cu_safe", (n_seq + 1,), int32_dtype, 4)
    layout.add("cu_argmax", (2 * (n_seq + 1),), int32_dtype, 4)
