"""The layout of the ``state_checkpoints`` tensor the FROST forward writes and the backward
reads (the op spec's checkpoints at a cadence of n = 64 tokens, the kernels' chunk).

Meaning: for sequence b of length L_b, rows j = 0 .. ceil(L_b / 64) - 1 hold the state at
token boundary 64 j of that sequence, i.e. the state entering chunk j (row 0: the
initial state, or zero); the state after the last token is only in final_state. Stored
S^T, [V, K] per head, bf16. Sequences' rows are packed one after another: sequence b
starts at row ``sum_{b' < b} ceil(L_b' / 64)`` (a length-0 sequence has no row). The
tensor has ``T // 64 + N`` rows (the spec's max(T // n + N, 1) for N >= 1), an upper
bound of the rows used; rows at and after the total chunk count are never written (they
keep whatever the buffer held).

The backward's own per-chunk workspaces (bwd_config.workspace rows, kernels/NOTES_bwd.md)
place chunk j of sequence n at row cu[n] // 64 + n + j instead, which needs no sum over
the other sequences; the kernels that read forward-written checkpoints convert with
``packed_row0`` (checkpoints_dsl.py in the kernels, which read every sequence's bounds
clamped into [0, T] as seq_bounds.py does; ``T`` here does the same). Pure Python.
"""
from __future__ import annotations

from collections.abc import Sequence

CHUNK = 64  # tokens per chunk: the kernels' C and the only cadence the FROST engines take


def checkpoint_rows(T: int, N: int) -> int:
    """Rows of a checkpoint tensor (and of the backward's per-chunk workspaces) for T tokens
    in N sequences: T // 64 + N, never fewer than the chunks of any batch of that size."""
    return T // CHUNK + N


def chunk_count(length: int) -> int:
    """Chunks (checkpoint rows) of one sequence: ceil(L / 64), 0 for an empty (or
    malformed, negative-length) sequence."""
    return max(length, 0) // CHUNK + (max(length, 0) % CHUNK > 0)


def sequence_length(cu_seqlens: Sequence[int], n: int, T: int | None = None) -> int:
    """Tokens of sequence n: cu[n + 1] - cu[n], with both bounds clamped into [0, T] first
    when T is given (the kernels' reading of any table), never negative."""
    bos, eos = cu_seqlens[n], cu_seqlens[n + 1]
    if T is not None:
        bos, eos = min(max(bos, 0), T), min(max(eos, 0), T)
    return max(eos - bos, 0)


def packed_row0(cu_seqlens: Sequence[int], n: int, T: int | None = None) -> int:
    """The first checkpoint row of sequence n: the chunks of the sequences before it."""
    return sum(chunk_count(sequence_length(cu_seqlens, m, T)) for m in range(n))


def checkpoint_index(cu_seqlens: Sequence[int], T: int | None = None) -> list[tuple[int, int]]:
    """(sequence, chunk) of every written row, in row order."""
    return [(n, j) for n in range(len(cu_seqlens) - 1)
            for j in range(chunk_count(sequence_length(cu_seqlens, n, T)))]
