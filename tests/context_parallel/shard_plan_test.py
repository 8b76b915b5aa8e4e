"""The shard plan (context_parallel/_shard_plan.py): pieces, head/tail, pass-through,
neighbours across empty shards, zero-length sequences, and the argument errors."""
from __future__ import annotations

import pytest

from cudnn.linear_attention.context_parallel._shard_plan import (Piece, check_boundaries,
                                                                 equal_offsets, plan_shard)

CU = [0, 13, 13, 20, 42, 44]  # lengths 13, 0, 7, 22, 2


def test_cuts_inside_sequences_give_head_and_tail_pieces():
    offsets = [0, 5, 5, 30, 44]
    r0, r1, r2, r3 = (plan_shard(CU, offsets, r) for r in range(4))
    assert r0.pieces == (Piece(0, 0, 5, False, True),) and r0.head is None
    assert (r0.tail, r0.right) == (r0.pieces[0], 2)  # rank 1 holds no tokens: skipped
    assert r1.pieces == () and r1.left is None and r1.right is None
    assert r2.head == Piece(0, 5, 13, True, False) and r2.left == 0
    assert r2.empty_sequences == (1,)                 # position 13 lies on rank 2
    assert r2.rest == (Piece(2, 13, 20, False, False), Piece(3, 20, 30, False, True))
    assert r2.tail == r2.rest[-1] and r2.right == 3 and not r2.pass_through
    assert r3.head == Piece(3, 30, 42, True, False) and r3.tail is None
    assert r2.cu_seqlens(r2.rest) == [0, 7, 17] and r2.local(r2.rest[0]) == (8, 15)


def test_a_rank_inside_one_sequence_passes_the_state_through():
    plans = [plan_shard(CU, [0, 25, 28, 36, 44], r) for r in range(4)]
    assert [p.pass_through for p in plans] == [False, True, True, False]
    assert plans[1].rest == () and (plans[1].left, plans[1].right) == (0, 2)
    assert plans[3].head.length == 6 and plans[3].rest == (Piece(4, 42, 44, False, False),)


def test_cuts_at_sequence_boundaries_need_no_messages():
    for r in range(3):
        plan = plan_shard(CU, [0, 13, 20, 44], r)
        assert plan.head is None and plan.tail is None


def test_zero_length_sequences_have_one_owner():
    cu = [0, 0, 4, 4, 8, 8]
    owners = {n: r for r in range(2) for n in plan_shard(cu, [0, 4, 8], r).empty_sequences}
    assert owners == {0: 0, 2: 1, 4: 1}  # the one at the very end: the last token's rank


def test_even_split_and_errors():
    assert equal_offsets(44, 4, 11) == [0, 11, 22, 33, 44]
    with pytest.raises(ValueError, match="'shard_offsets'.*even split"):
        equal_offsets(44, 3, 14)
    with pytest.raises(ValueError, match="'shard_offsets'.*3 token offsets"):
        check_boundaries(CU, [0, 44], 2)
    with pytest.raises(ValueError, match="'rank'"):
        plan_shard(CU, [0, 44], 1)
    with pytest.raises(ValueError, match="'shard_offsets'.*from 0 to the total"):
        plan_shard(CU, [0, 20, 40], 0)
    with pytest.raises(ValueError, match="'cu_seqlens'"):
        plan_shard([0, 5, 3], [0, 3], 0)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
