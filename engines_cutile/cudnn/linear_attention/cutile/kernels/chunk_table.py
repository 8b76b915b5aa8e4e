"""Device-built chunk table for token-packed (THD) varlen batches.

One launch turns `cu_seqlens [N+1]` into:
- `table [NT_bound, 2] int32`: row r = (sequence, chunk-in-sequence) of the r-th chunk
  in sequence order; rows past the real chunk count hold the inert sentinel
  (last non-empty sequence, NT_bound), which every consumer skips because that chunk
  starts past its sequence's end;
- `count [1] int32`: the real number of chunks;
- `offsets [N+1] int32`: index of each sequence's first chunk row (offsets[N] = count).
`NT_bound = ceil(T / BT) + N` bounds the chunk count for any split of T tokens into N
sequences, so consumers can launch a grid of NT_bound rows without reading
cu_seqlens on the host (no host synchronisation, CUDA-graph friendly).

Each CTA handles ROWS table rows; every CTA recomputes the per-sequence chunk prefix
from cu_seqlens, which costs O(N) per CTA and needs N <= NP (a power of two chosen on
the host).
"""
import cuda.tile as ct

ROWS = 128


@ct.kernel
def chunk_table_kernel(cu_seqlens, table, count, offsets, n_seq: int, nt_bound: int,
                       BT: ct.Constant[int], NP: ct.Constant[int], ROWS_: ct.Constant[int]):
    pid = ct.bid(0)
    seq = ct.arange(NP, dtype=ct.int32)
    valid = seq < n_seq
    bos = ct.gather(cu_seqlens, seq, mask=valid)
    eos = ct.gather(cu_seqlens, seq + 1, mask=valid)
    n_chunks = ct.where(valid, (eos - bos + (BT - 1)) // BT, 0)
    ends = ct.cumsum(n_chunks, axis=0)
    starts = ends - n_chunks
    total = ct.sum(n_chunks)
    # last sequence that owns at least one chunk (0 when every sequence is empty)
    last_nonempty = ct.max(ct.where(n_chunks > 0, seq, 0))

    rows = pid * ROWS_ + ct.arange(ROWS_, dtype=ct.int32)
    rows_c = ct.expand_dims(rows, axis=1)                      # [ROWS, 1]
    owner = ct.sum(ct.where(ct.expand_dims(ends, axis=0) <= rows_c, 1, 0), axis=1)
    owner_c = ct.expand_dims(owner, axis=1)
    first = ct.sum(ct.where(ct.expand_dims(seq, axis=0) == owner_c,
                            ct.expand_dims(starts, axis=0), 0), axis=1)
    live = rows < total
    seq_col = ct.where(live, owner, last_nonempty)
    chunk_col = ct.where(live, rows - first, nt_bound)
    pair = ct.cat((ct.expand_dims(seq_col, axis=1), ct.expand_dims(chunk_col, axis=1)), axis=1)
    ct.store(table, (pid, 0), tile=ct.astype(pair, ct.int32))
    if pid == 0:
        ct.store(count, (0,), tile=ct.astype(ct.reshape(total, (1,)), ct.int32))
        ct.store(offsets, (0,), tile=ct.astype(starts, ct.int32))   # clipped to N+1


def next_pow2(x: int) -> int:
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def chunk_table_fwd(cu_seqlens, table, count, offsets, n_seq: int, bt: int, stream) -> None:
    """Fill `table` [NT_bound, 2], `count` [1] and `offsets` [N+1] (int32) from cu_seqlens."""
    nt_bound = table.shape[0]
    grid = ((nt_bound + ROWS - 1) // ROWS, 1, 1)
    ct.launch(stream, grid, chunk_table_kernel,
              (cu_seqlens, table, count, offsets, n_seq, nt_bound, bt, next_pow2(n_seq + 1),
               ROWS))
