"""Device-built chunk table for token-packed (THD) varlen batches, and the cu_seqlens safety.

One launch turns `cu_seqlens [N+1]` into:
- `cu_safe [N+1] int32`: the sanitised table S every later kernel reads instead of
  cu_seqlens (seq_bounds.py: clamped into [0, T], running max, so non-decreasing);
- `table [NT_bound, 2] int32`: row r = (sequence, chunk-in-sequence) of the r-th chunk
  in sequence order; rows past the real chunk count hold the inert sentinel
  (last non-empty sequence, NT_bound), which every consumer skips because that chunk
  starts past its sequence's end;
- `count [1] int32`: the real number of chunks;
- `offsets [N+1] int32`: index of each sequence's first chunk row (offsets[N] = count);
- zeros in the rows of up to five [T, heads, D] outputs that no sequence covers
  ([0, S[0]) and [S[N], T)), which no later kernel writes.
`NT_bound = ceil(T / BT) + N` bounds the chunk count of the sanitised table, so
consumers can launch a grid of NT_bound rows without reading cu_seqlens on the host (no
host synchronisation, CUDA-graph friendly).

Grid (ceil(NT_bound / ROWS), heads): CTA (p, 0) writes table rows [p ROWS, (p+1) ROWS);
CTA (p, h) zeros head h's uncovered row tiles p, p + grid_x, ... of every output (none
for a well-formed table). Every CTA sanitises the table in registers and recomputes the
per-sequence chunk prefix, which costs O(N) per CTA and needs N < NP (a power of two
chosen on the host).
"""
import cuda.tile as ct

from .seq_bounds import ROWS as ZERO_ROWS
from .seq_bounds import sanitized_bounds, zero_rows_outside

ROWS = 128
MAX_ZEROED = 5   # outputs one launch zeros (the backward's dq, dk, dv, dg, dbeta)


@ct.kernel
def chunk_table_kernel(cu_seqlens, cu_safe, table, count, offsets, z0, z1, z2, z3, z4,
                       n_seq: int, total: int, nt_bound: int, BT: ct.Constant[int],
                       NP: ct.Constant[int], ROWS_: ct.Constant[int],
                       N_ZERO: ct.Constant[int], BR: ct.Constant[int], BD: ct.Constant[int],
                       SAFE: ct.Constant[bool]):
    pid = ct.bid(0)
    head = ct.bid(1)
    seq = ct.arange(NP, dtype=ct.int32)
    valid = seq < n_seq
    if SAFE:
        bos, eos = sanitized_bounds(cu_seqlens, n_seq, total, NP)
    else:   # timing variant (bench/cu_seqlens_cost.py), never launched by the engine
        bos = ct.gather(cu_seqlens, seq, mask=valid)
        eos = ct.gather(cu_seqlens, seq + 1, mask=valid)
    if head == 0:
        n_chunks = ct.where(valid, (eos - bos + (BT - 1)) // BT, 0)
        ends = ct.cumsum(n_chunks, axis=0)
        starts = ends - n_chunks
        n_total = ct.sum(n_chunks)
        # last sequence that owns at least one chunk (0 when every sequence is empty)
        last_nonempty = ct.max(ct.where(n_chunks > 0, seq, 0))

        rows = pid * ROWS_ + ct.arange(ROWS_, dtype=ct.int32)
        rows_c = ct.expand_dims(rows, axis=1)                      # [ROWS, 1]
        owner = ct.sum(ct.where(ct.expand_dims(ends, axis=0) <= rows_c, 1, 0), axis=1)
        owner_c = ct.expand_dims(owner, axis=1)
        first = ct.sum(ct.where(ct.expand_dims(seq, axis=0) == owner_c,
                                ct.expand_dims(starts, axis=0), 0), axis=1)
        live = rows < n_total
        seq_col = ct.where(live, owner, last_nonempty)
        chunk_col = ct.where(live, rows - first, nt_bound)
        pair = ct.cat((ct.expand_dims(seq_col, axis=1), ct.expand_dims(chunk_col, axis=1)),
                      axis=1)
        ct.store(table, (pid, 0), tile=ct.astype(pair, ct.int32))
        if pid == 0:
            ct.store(count, (0,), tile=ct.astype(ct.reshape(n_total, (1,)), ct.int32))
            ct.store(offsets, (0,), tile=ct.astype(starts, ct.int32))   # clipped to N+1
            if SAFE:
                ct.store(cu_safe, (0,), tile=ct.astype(bos, ct.int32))  # clipped to N+1
    if SAFE and N_ZERO > 0:
        covered_from = ct.min(bos)
        covered_to = ct.max(bos)
        parts = ct.num_blocks(0)
        zero_rows_outside(z0, covered_from, covered_to, total, head, pid, parts, BR, BD)
        if N_ZERO > 1:
            zero_rows_outside(z1, covered_from, covered_to, total, head, pid, parts, BR, BD)
        if N_ZERO > 2:
            zero_rows_outside(z2, covered_from, covered_to, total, head, pid, parts, BR, BD)
        if N_ZERO > 3:
            zero_rows_outside(z3, covered_from, covered_to, total, head, pid, parts, BR, BD)
        if N_ZERO > 4:
            zero_rows_outside(z4, covered_from, covered_to, total, head, pid, parts, BR, BD)


def next_pow2(x: int) -> int:
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def chunk_table_fwd(cu_seqlens, scratch, total_tokens: int, bt: int, stream, zeroed=(),
                    safe: bool = True) -> None:
    """From cu_seqlens [N+1]: fill the workspace's `cu_safe` [N+1], `table` [NT_bound, 2],
    `count` [1] and `offsets` [N+1] (int32) and zero the uncovered rows of each output in
    `zeroed` ([T, heads, D] or [T, heads], at most MAX_ZEROED). `safe=False` is the timing
    variant of bench/cu_seqlens_cost.py: the raw table, no cu_safe, no zeroing."""
    if len(zeroed) > MAX_ZEROED:
        raise ValueError(f"chunk_table_fwd zeros at most {MAX_ZEROED} outputs, "
                         f"got {len(zeroed)}")
    table, count = scratch["table"], scratch["count"]
    n_seq, nt_bound = cu_seqlens.shape[0] - 1, table.shape[0]
    outs = [z if z.dim() == 3 else z.unsqueeze(-1) for z in zeroed] if safe else []
    heads = max([z.shape[1] for z in outs] + [1])
    width = next_pow2(max([z.shape[2] for z in outs] + [1]))
    # ports past the last output still need an array; N_ZERO compiles them out
    pad = [count.view(1, 1, 1)] * (MAX_ZEROED - len(outs))
    grid = ((nt_bound + ROWS - 1) // ROWS, heads, 1)
    ct.launch(stream, grid, chunk_table_kernel,
              (cu_seqlens, scratch["cu_safe"], table, count, scratch["offsets"], *outs, *pad,
               n_seq, int(total_tokens), nt_bound, bt, next_pow2(n_seq + 1), ROWS, len(outs),
               ZERO_ROWS, width, bool(safe)))
