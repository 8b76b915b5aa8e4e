"""cu_seqlens as the cuTile kernels read it, and the rows no sequence covers.

cu_seqlens lives on the device and is never read on the host (no synchronisation), so the
kernels cannot assume it is well formed (0 = cu[0] <= ... <= cu[N] = T): a table with an
entry past T, a negative entry or a descending step would make them slice outside their
arrays (undefined behaviour). Every kernel reads a sanitised copy instead,
S[i] = max(clamp(cu[0], 0, T), ..., clamp(cu[i], 0, T)): non-decreasing and inside [0, T]
by construction, so every sequence [S[n], S[n+1]) lies in [0, T) and the chunk count stays
below NT_bound; a well-formed table is its own sanitised copy, an inverted range becomes
empty. Rows before S[0] and from S[N] on belong to no sequence and are written as zeros,
so no output row is returned uninitialised.

Both happen inside the chunk-table launch (chunk_table.py), no launch of their own: each
of its CTAs sanitises the table in registers (`sanitized_bounds`: one clamp and one max
scan over N + 1 entries), CTA (0, 0) stores S into the workspace's `cu_safe` for the
kernels after it, and the CTAs zero the uncovered rows of the outputs the pass names
(`zero_rows_outside`; nothing to do for a well-formed table). Nothing else writes those
rows: every later kernel works inside [S[0], S[N]) only (the backward's head-group sums
read the zeroed rows of their fp32 partials and write zeros).
"""
import cuda.tile as ct

ROWS = 32   # rows per zero tile


def _larger(a, b):
    return ct.maximum(a, b)


def sanitized_bounds(cu_seqlens, n_seq, total, NP: int):
    """(bos, eos) [NP] int32 tiles: sequence i is [bos[i], eos[i]) of the sanitised table
    for i < n_seq; bos[i] = S[i] for i <= n_seq and S[N] past it, eos[i] = S[N] from N on.
    So S[0] = min(bos) and S[N] = max(bos) (NP > n_seq)."""
    i = ct.arange(NP, dtype=ct.int32)
    here = ct.gather(cu_seqlens, i, mask=i <= n_seq)
    after = ct.gather(cu_seqlens, i + 1, mask=i < n_seq)
    here = ct.minimum(ct.maximum(here, 0), total)
    after = ct.minimum(ct.maximum(after, 0), total)
    # entries past N gather as 0 and leave the running max at S[N]
    bos = ct.scan(here, axis=0, func=_larger, identity=0)
    # S[i + 1] = max(S[i], clamp(cu[i + 1])): one scan serves both ends
    return bos, ct.maximum(bos, after)


def zero_rows_outside(out, first, last, total, h, part, parts, BR: int, BD: int):
    """Zeros into rows [0, first) and [last, total) of head h of `out` [T, heads, D]
    (D <= BD: the tile's columns past D are outside the array and not stored); this caller
    takes row tiles part, part + parts, ...  Slices only non-empty ranges (cuTile: a
    slice must start inside its array) and stores tiles that start inside them. Plain
    stores (allow_tma=False): a TMA store through a slice with device-loaded bounds makes
    the kernel write a tensor-map descriptor in global memory and stage each store site's
    tile in shared memory (sm_90: 20 KB for the forward's one output, 53 KB for the
    backward's five), a cost every launch pays for rows a well-formed table never has."""
    zeros = ct.zeros((BR, 1, BD), dtype=out.dtype)
    if h < out.shape[1]:
        if first > 0:
            head = out.slice(axis=0, start=0, stop=first)
            for j in range(part, ct.cdiv(first, BR), parts):
                ct.store(head, (j, h, 0), tile=zeros, allow_tma=False)
        if total > last:
            tail = out.slice(axis=0, start=last, stop=total)
            for j in range(part, ct.cdiv(total - last, BR), parts):
                ct.store(tail, (j, h, 0), tile=zeros, allow_tma=False)


def add_regions(layout, n_seq: int, int32_dtype) -> None:
    """The workspace region the chunk-table launch stores the sanitised table in."""
    layout.add("cu_safe", (n_seq + 1,), int32_dtype, 4)
