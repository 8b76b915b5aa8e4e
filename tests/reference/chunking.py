"""Chunk bookkeeping for the chunked references: the chunk table and packing to chunks.

Sequences are cut into chunks of BT tokens that never cross a sequence boundary; the last
chunk of a sequence may be partial and an empty sequence has no chunk. This mirrors the
cuTile chunk table (docs/LINEAR_ATTENTION.md §4: rows of (sequence index, chunk-in-sequence)).

Chunked tensors are laid out [NC, HO, BT, ...]: per-token tensors [T, HO, ...] are gathered
chunk by chunk and zero padded past each chunk's end. Zero padding is inert for the delta
rule: a padded token has k = q = v = beta = 0 and gamma = 0, so it changes no state, no
output and no gradient, and the chunk's cumulative gate at row BT-1 equals the one at its
last real token.
"""
from __future__ import annotations

import dataclasses

import torch


@dataclasses.dataclass(frozen=True)
class ChunkLayout:
    chunk_size: int
    total_tokens: int
    seq_of_chunk: tuple[int, ...]  # [NC] sequence index of each chunk
    chunk_start: tuple[int, ...]  # [NC] first token of each chunk
    chunk_len: tuple[int, ...]  # [NC] real tokens in each chunk (1..BT)
    seq_chunks: tuple[tuple[int, int], ...]  # [N] (first chunk, end chunk) of each sequence

    @classmethod
    def from_bounds(cls, bounds: tuple[tuple[int, int], ...], chunk_size: int) -> "ChunkLayout":
        if chunk_size < 1:
            raise ValueError(f"ChunkLayout: chunk_size must be positive, got {chunk_size}")
        seq_of_chunk, starts, lens, seq_chunks = [], [], [], []
        total = bounds[-1][1] if bounds else 0
        for n, (start, end) in enumerate(bounds):
            first = len(starts)
            for s in range(start, end, chunk_size):
                seq_of_chunk.append(n)
                starts.append(s)
                lens.append(min(chunk_size, end - s))
            seq_chunks.append((first, len(starts)))
        return cls(chunk_size, total, tuple(seq_of_chunk), tuple(starts), tuple(lens), tuple(seq_chunks))

    @property
    def num_chunks(self) -> int:
        return len(self.chunk_start)

    def _gather_index(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """[NC, BT] token index (clamped) and validity mask."""
        start = torch.tensor(self.chunk_start, dtype=torch.long, device=device)
        length = torch.tensor(self.chunk_len, dtype=torch.long, device=device)
        offs = torch.arange(self.chunk_size, device=device)
        valid = offs[None, :] < length[:, None]
        index = torch.where(valid, start[:, None] + offs[None, :], torch.zeros_like(offs)[None, :])
        return index, valid

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """[T, HO, *rest] -> [NC, HO, BT, *rest], zero past each chunk's end."""
        index, valid = self._gather_index(x.device)
        rest = x.shape[2:]
        if self.num_chunks == 0:
            return x.new_zeros(0, x.shape[1], self.chunk_size, *rest)
        xc = x[index]  # [NC, BT, HO, *rest]
        xc = xc * valid.reshape(*valid.shape, *([1] * (xc.dim() - 2))).to(x.dtype)
        return xc.transpose(1, 2).contiguous()

    def unpack(self, xc: torch.Tensor) -> torch.Tensor:
        """[NC, HO, BT, *rest] -> [T, HO, *rest], dropping the padding."""
        rest = xc.shape[3:]
        out = xc.new_zeros(self.total_tokens, xc.shape[1], *rest)
        if self.num_chunks == 0:
            return out
        index, valid = self._gather_index(xc.device)
        rows = xc.transpose(1, 2)[valid]  # [T, HO, *rest] in chunk order == token order
        out[index[valid]] = rows
        return out
