"""The launch lane: a cached op call that goes from its arguments to the kernel launch.

A cached call already knows everything the graph API and the engine re-derive per execute:
its graph cache key (_op_factory.cache_key) fixes every tensor's dims, strides, dtype and
device, and the plan is built. When the plan offers a `DirectLaunch` (engine contract,
`CompiledPlan.direct_launch`) at the entry's first call, the cached graph keeps it as a
lane: per call it allocates the results, checks the one property the key leaves open
(each input's address modulo 16, which decides the kernel's alignment assumptions) and
the current device, and launches on torch's current stream. Any other call, or a failed
check, takes the graph's executor path, which checks everything. The lane is part of its
cache entry: same key, same lifetime, nothing to invalidate on its own.

Why: each layer of the executor path (variant pack, workspace and uid checks, stream
object, the engine's layout check) costs 1-8 us of Python, and a cached call is all
layers and no work (the target is 20 us of host time per call on the H200 host).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from cudnn.engines.base import DirectLaunch


class LaunchLane:
    """One cached graph's direct launch, bound to the op's argument and result positions."""

    __slots__ = ("device", "index", "results", "kept", "workspace_size", "alignment",
                 "sources", "launch", "by_address", "_current", "_stream")

    def __init__(self, device: torch.device, results: Sequence[tuple[tuple[int, ...],
                 torch.dtype]], droppable: Sequence[int], workspace_size: int,
                 direct: DirectLaunch, position_of: dict[int, tuple[bool, int]]) -> None:
        self.device = device
        self.results = tuple(results)
        #: the results when the caller drops what it may: empty droppable ones are None
        #: (a CUDA torch.empty costs ~3 us on the H200 host, even for zero elements).
        launched = {position for is_result, position in
                    (position_of[uid] for uid in direct.uids) if is_result}
        self.kept = tuple(None if i in droppable and i not in launched and
                          math.prod(dims) == 0 else (dims, dtype)
                          for i, (dims, dtype) in enumerate(self.results))
        self.workspace_size = workspace_size
        #: address % 16 per buffer of the launch (results: 0, see make_lane).
        self.alignment = list(direct.alignment)
        #: (is a result, position) per buffer of the launch, in its order.
        self.sources = tuple(position_of[uid] for uid in direct.uids)
        self.launch = direct.launch
        self.by_address = direct.takes_addresses
        cuda = device.type == "cuda"
        self.index = device.index if cuda else None
        self._current: Callable[[], int] | None = torch._C._cuda_getDevice if cuda else None
        self._stream: Callable[[int], int] | None = (torch._C._cuda_getCurrentRawStream
                                                     if cuda else None)

    def __call__(self, values: Sequence[Any], drop_unused: bool = False
                 ) -> tuple[torch.Tensor | None, ...] | None:
        """Run the call; None when this lane cannot take it (the caller falls back).
        With `drop_unused`, empty droppable results come back as None."""
        index = self.index
        if index is not None and self._current() != index:
            return None  # the executor path switches devices
        device = self.device
        if drop_unused:
            results = tuple([None if spec is None else
                             torch.empty(spec[0], dtype=spec[1], device=device)
                             for spec in self.kept])
        else:
            results = tuple([torch.empty(dims, dtype=dtype, device=device)
                             for dims, dtype in self.results])
        buffers = [results[position] if is_result else values[position]
                   for is_result, position in self.sources]
        addresses = [buffer.data_ptr() for buffer in buffers]
        if [address & 15 for address in addresses] != self.alignment:
            return None  # laid out as the lane's plan was not: the checked path decides
        workspace = (torch.empty(self.workspace_size, dtype=torch.uint8, device=device)
                     if self.workspace_size else None)
        self.launch(addresses if self.by_address else buffers, workspace,
                    self._stream(index) if index is not None else 0)
        return results


def make_lane(device: torch.device, results: Sequence[tuple[tuple[int, ...], torch.dtype]],
              droppable: Sequence[int], workspace_size: int, direct: DirectLaunch | None,
              input_uids: Sequence[tuple[int, int]], output_uids: Sequence[tuple[int, int]]
              ) -> LaunchLane | None:
    """A lane from the plan's DirectLaunch and the graph's (position, uid) bindings; None
    when the plan offers none or names a buffer the op does not bind."""
    if direct is None:
        return None
    position_of = {uid: (False, position) for position, uid in input_uids}
    position_of.update({uid: (True, position) for position, uid in output_uids})
    if any(uid not in position_of for uid in direct.uids):
        return None
    # results come fresh from torch's allocator (512-byte aligned): a plan bound to other
    # result addresses would need a check per call
    if any(position_of[uid][0] and align for uid, align in zip(direct.uids, direct.alignment)):
        return None
    return LaunchLane(device, results, droppable, workspace_size, direct, position_of)
