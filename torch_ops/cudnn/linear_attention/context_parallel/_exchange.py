"""Point-to-point state messages between neighbouring ranks, over torch.distributed.

Only a state that crosses a cut travels, and only between the two ranks of that cut: a
[HO, V, K] tensor (the state, or its gradient) from the tail's rank to the head's rank
forward, and back again in the backward. Messages are torch.distributed isend/irecv on
the caller's process group: NCCL on GPUs (the receive makes the current CUDA stream wait;
the host does not block), gloo on CPUs. Within one call each pair exchanges at most one
message per direction, in the same order on both sides, so every send meets its receive.

`Link` resolves the group's ranks to the global ranks torch.distributed addresses, and
keeps the pending sends so their buffers stay alive until they complete (`finish`).
"""
from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


def group_rank_and_size(group: Any) -> tuple[int, int]:
    """(rank, world size) in `group`; (0, 1) when torch.distributed is not initialized and
    no group is given (a single process runs the plain ops)."""
    if group is None and not (dist.is_available() and dist.is_initialized()):
        return 0, 1
    return dist.get_rank(group), dist.get_world_size(group)


class Link:
    def __init__(self, group: Any) -> None:
        self.group = group
        self._pending: list[tuple[Any, torch.Tensor]] = []

    def _global(self, group_rank: int) -> int:
        if self.group is None or self.group is dist.group.WORLD:
            return group_rank
        return dist.get_global_rank(self.group, group_rank)

    def send(self, state: torch.Tensor, to: int) -> None:
        """Start sending `state` to group rank `to` (completed by finish())."""
        state = state.contiguous()
        work = dist.isend(state, dst=self._global(to), group=self.group)
        self._pending.append((work, state))

    def receive(self, like: torch.Tensor, source: int) -> torch.Tensor:
        """A tensor shaped and typed like `like`, received from group rank `source`."""
        out = torch.empty_like(like, memory_format=torch.contiguous_format)
        dist.irecv(out, src=self._global(source), group=self.group).wait()
        return out

    def finish(self) -> None:
        """Wait for every send started by this link."""
        pending, self._pending = self._pending, []
        for work, _ in pending:
            work.wait()
