"""Which parts of which sequences one rank holds, and which states cross its boundaries.

The global token stream (all sequences of the global cu_seqlens, packed) is cut into
contiguous rank shards at `offsets` ([P + 1] token indices, offsets[0] = 0, offsets[P] =
T). Rank r holds tokens [offsets[r], offsets[r + 1]); a cut may fall anywhere, inside a
sequence and inside a kernel chunk. Each global sequence that meets the shard gives the
rank one *piece* (its tokens on this rank). Only two pieces can touch a cut:
- the *head*: the first piece, when its sequence began on an earlier rank; its entering
  state comes from the left neighbour;
- the *tail*: the last piece, when its sequence goes on to a later rank; its leaving state
  goes to the right neighbour.
When one sequence covers the whole shard and goes on, head and tail are the same piece
(*pass-through*): its leaving state depends on its entering one, so the rank summarizes
its span (an affine map) to forward the state without first running the span. Every
other piece starts and ends here (no communication). Neighbours skip ranks whose shard is
empty. Zero-length sequences (no token anywhere) are owned by the rank holding the token
at their position (the last token's rank for one at the very end), where their final
state is their initial state.

Pure Python on host integers: ranks agree on the plan because they read the same global
cu_seqlens and offsets, so no rank waits on a message that is never sent.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence


@dataclasses.dataclass(frozen=True)
class Piece:
    sequence: int      # global sequence index
    start: int         # global token range of the piece
    end: int
    from_left: bool    # the sequence began on an earlier rank (the head piece)
    to_right: bool     # the sequence goes on on a later rank (the tail piece)

    @property
    def length(self) -> int:
        return self.end - self.start


@dataclasses.dataclass(frozen=True)
class ShardPlan:
    rank: int
    world: int
    start: int                            # this rank's global token range
    end: int
    num_sequences: int                    # N of the global cu_seqlens
    pieces: tuple[Piece, ...]             # non-empty pieces, in token order
    empty_sequences: tuple[int, ...]      # zero-length sequences this rank owns
    left: int | None                      # rank sending the head's entering state
    right: int | None                     # rank receiving the tail's leaving state

    @property
    def head(self) -> Piece | None:
        return self.pieces[0] if self.pieces and self.pieces[0].from_left else None

    @property
    def tail(self) -> Piece | None:
        return self.pieces[-1] if self.pieces and self.pieces[-1].to_right else None

    @property
    def pass_through(self) -> bool:
        return self.head is not None and self.head.to_right

    @property
    def rest(self) -> tuple[Piece, ...]:
        """The pieces other than the head: runnable before any state arrives."""
        return self.pieces[1:] if self.head is not None else self.pieces

    def local(self, piece: Piece) -> tuple[int, int]:
        """The piece's token range in this rank's shard."""
        return piece.start - self.start, piece.end - self.start

    @staticmethod
    def cu_seqlens(pieces: Sequence[Piece]) -> list[int]:
        """cu_seqlens of consecutive pieces run as one batch."""
        cu = [0]
        for piece in pieces:
            cu.append(cu[-1] + piece.length)
        return cu


def _fail(argument: str, expected: str, given: object) -> ValueError:
    return ValueError(f"context_parallel: argument '{argument}': expected {expected}; "
                      f"got {given}")


def check_boundaries(cu: Sequence[int], offsets: Sequence[int], world: int) -> None:
    if len(cu) < 1 or cu[0] != 0 or any(b < a for a, b in zip(cu, cu[1:])):
        raise _fail("cu_seqlens", "non-decreasing sequence boundaries starting at 0", list(cu))
    if len(offsets) != world + 1:
        raise _fail("shard_offsets", f"{world + 1} token offsets (world size {world} + 1)",
                    list(offsets))
    if offsets[0] != 0 or offsets[-1] != cu[-1] or any(b < a for a, b in
                                                       zip(offsets, offsets[1:])):
        raise _fail("shard_offsets", f"non-decreasing offsets from 0 to the total token count "
                    f"{cu[-1]}", list(offsets))


def plan_shard(cu: Sequence[int], offsets: Sequence[int], rank: int) -> ShardPlan:
    """The plan of `rank` for global boundaries `cu` ([N + 1]) and shard `offsets`."""
    world = len(offsets) - 1
    check_boundaries(cu, offsets, world)
    if not 0 <= rank < world:
        raise _fail("rank", f"a rank in [0, {world})", rank)
    total, start, end = cu[-1], offsets[rank], offsets[rank + 1]
    pieces, empty = [], []
    for n, (a, b) in enumerate(zip(cu[:-1], cu[1:])):
        if a == b:
            if _owner_of_position(a, offsets, total) == rank:
                empty.append(n)
            continue
        lo, hi = max(a, start), min(b, end)
        if lo < hi:
            pieces.append(Piece(n, lo, hi, from_left=a < start, to_right=b > end))
    plan = ShardPlan(rank, world, start, end, len(cu) - 1, tuple(pieces), tuple(empty),
                     left=None, right=None)
    left = _neighbour(offsets, rank, -1) if plan.head is not None else None
    right = _neighbour(offsets, rank, +1) if plan.tail is not None else None
    return dataclasses.replace(plan, left=left, right=right)


def _owner_of_position(position: int, offsets: Sequence[int], total: int) -> int:
    """The rank holding token `position` (the last token when position == total; rank 0
    when there are no tokens at all)."""
    if total == 0:
        return 0
    position = min(position, total - 1)
    return next(r for r in range(len(offsets) - 1) if offsets[r] <= position < offsets[r + 1])


def _neighbour(offsets: Sequence[int], rank: int, step: int) -> int:
    """The nearest rank in direction `step` whose shard holds tokens."""
    r = rank + step
    while offsets[r] == offsets[r + 1]:
        r += step
    return r


def equal_offsets(total: int, world: int, local_tokens: int) -> list[int]:
    """Offsets of an even split (every rank holds total / world tokens)."""
    if total % world or total // world != local_tokens:
        raise _fail("shard_offsets", f"explicit offsets, or an even split: {world} ranks of "
                    f"total / world tokens each (cu_seqlens ends at {total})",
                    f"None with {local_tokens} tokens on this rank")
    return [r * local_tokens for r in range(world + 1)]
