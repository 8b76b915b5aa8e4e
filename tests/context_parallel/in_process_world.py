"""All ranks of a context-parallel world in ONE process, for machines with fewer devices
than ranks (world 4 on one GPU: the pass-through ranks, whose state goes through the span
summary engines, on a one-GPU machine).

The state exchange is the only cross-rank step, and it runs one way per pass: in the
forward a rank receives only from its left neighbour, in the backward only from its right
one. So running the forwards in rank order, then the backwards in reverse rank order,
with messages kept in a mailbox, gives each rank exactly the messages torch.distributed
would deliver. `in_process_world()` installs the mailbox in place of the transport
(context_parallel._function.Link) and a rank object in place of the process group;
everything else (the shard plan, the autograd function, the engines) is the shipped code.

`check_world(case, world, device, dtype, bound)` runs cp_cases' pieces for every rank and
compares each one with the single-process result (gradients of initial_state and the gate
parameters summed over the ranks).
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import torch

from cudnn.linear_attention import context_parallel as cp
from cudnn.linear_attention.context_parallel import _function
from tests.context_parallel.cp_cases import (CpCase, compare_rank, rank_backward, rank_forward,
                                             single_process)


@dataclasses.dataclass(eq=False)
class InProcessRank:
    """Stands for the process group of one rank: its rank, the world size, the mailbox
    shared by the world and this rank's message counts."""
    rank: int
    world: int
    mailbox: dict[tuple[int, int], collections.deque]
    sends: int = 0
    receives: int = 0


class _MailboxLink:
    """context_parallel's Link over the mailbox: a send stores a copy, a receive takes the
    oldest message from that neighbour (none yet: the ranks ran out of order)."""

    def __init__(self, group: InProcessRank) -> None:
        if not isinstance(group, InProcessRank):
            raise TypeError(f"in_process_world: expected an InProcessRank group; got "
                            f"{type(group).__name__}")
        self.group = group

    def send(self, state: torch.Tensor, to: int) -> None:
        self.group.sends += 1
        self.group.mailbox[(self.group.rank, to)].append(state.detach().clone())

    def receive(self, like: torch.Tensor, source: int) -> torch.Tensor:
        box = self.group.mailbox[(source, self.group.rank)]
        if not box:
            raise AssertionError(f"in_process_world: rank {self.group.rank} receives from "
                                 f"rank {source}, which has sent nothing yet")
        self.group.receives += 1
        message = box.popleft()
        assert message.shape == like.shape and message.dtype == like.dtype, (
            f"message {list(message.shape)} {message.dtype}, expected {list(like.shape)} "
            f"{like.dtype}")
        return message

    def finish(self) -> None:
        pass


@contextlib.contextmanager
def in_process_world(world: int) -> Iterator[list[InProcessRank]]:
    """The ranks of one world; context parallelism sees them as process groups."""
    mailbox: dict[tuple[int, int], collections.deque] = collections.defaultdict(
        collections.deque)
    ranks = [InProcessRank(r, world, mailbox) for r in range(world)]
    real_link, real_rank_and_size = _function.Link, cp.group_rank_and_size

    def rank_and_size(group: Any) -> tuple[int, int]:
        if isinstance(group, InProcessRank):
            return group.rank, group.world
        return real_rank_and_size(group)

    _function.Link, cp.group_rank_and_size = _MailboxLink, rank_and_size
    try:
        yield ranks
    finally:
        _function.Link, cp.group_rank_and_size = real_link, real_rank_and_size
    left = {pair: len(box) for pair, box in mailbox.items() if box}
    assert not left, f"in_process_world: messages never received: {left}"


def check_world(case: CpCase, world: int, device: str, dtype: torch.dtype,
                bound: float) -> list[dict[str, float]]:
    """Every rank of `world` against the single-process result; the errors per rank."""
    ref = single_process(case, device, dtype)
    with in_process_world(world) as ranks:
        runs = [rank_forward(ref, world, r, ranks[r], device) for r in range(world)]
        for run in reversed(runs):
            rank_backward(ref, run)
    summed = {}
    for name in ("initial_state", "a_log", "dt_bias"):
        parts = [run.params[name].grad for run in runs if run.params[name] is not None]
        if parts:
            summed[name] = torch.stack(parts).sum(0)
    return [compare_rank(ref, run, summed, world, (ranks[run.rank].sends,
                                                   ranks[run.rank].receives), dtype, bound)
            for run in runs]
