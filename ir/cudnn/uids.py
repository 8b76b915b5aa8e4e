"""`UidTable`: the graph owns the whole uid namespace.

Every tensor gets a uid when it is created (auto uids count up from 1, skipping taken
ones). A user uid that lands on an auto-assigned one steals it: the holder is renumbered
to a fresh auto uid. Whenever a tensor's uid changes (the holder's, and the claimant's
own), the `on_renumber(old, new)` hook lets the graph move anything keyed by the old uid
(auto-bindings), so a framework array stays bound to the tensor it was passed for. A
user uid held by another user-assigned tensor is a ValueError. Uids are never reused
within a graph; they are ints in [0, 2**63) (the backend's int64).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cudnn.graph_types import Tensor


class UidTable:
    def __init__(self, on_renumber: Callable[[int, int], None]) -> None:
        self._holders: dict[int, Tensor] = {}
        self._next = 1
        self._on_renumber = on_renumber

    def holder(self, uid: int) -> Tensor | None:
        return self._holders.get(uid)

    def assign_auto(self, tensor: Tensor) -> int:
        uid = self._fresh()
        holders = self._holders
        if holders.get(tensor._uid) is tensor:  # _place, inline: once per tensor
            del holders[tensor._uid]
        holders[uid] = tensor
        object.__setattr__(tensor, "_uid", uid)
        object.__setattr__(tensor, "_uid_assigned", False)
        return uid

    def claim(self, tensor: Tensor, uid: int) -> None:
        """Give `tensor` the user uid `uid` (renumbering an auto holder)."""
        holder = self._holders.get(uid)
        if holder is not None and holder is not tensor:
            if holder.uid_assigned:
                raise ValueError(f"uid {uid} is already user-assigned to tensor '{holder.name}'")
            new = self._fresh()
            self._place(holder, new, user=False)
            self._on_renumber(uid, new)
        old = tensor.uid
        placed = self._holders.get(old) is tensor  # False for a tensor being registered
        self._place(tensor, uid, user=True)
        if placed and old != uid:
            self._on_renumber(old, uid)

    def _place(self, tensor: Tensor, uid: int, user: bool) -> None:
        old = tensor.uid
        if self._holders.get(old) is tensor:
            del self._holders[old]
        self._holders[uid] = tensor
        object.__setattr__(tensor, "_uid", uid)
        object.__setattr__(tensor, "_uid_assigned", user)

    @property
    def next_auto(self) -> int:
        """Where the search for the next auto uid starts (saved and restored by the
        graph's all-or-nothing commits)."""
        return self._next

    @next_auto.setter
    def next_auto(self, value: int) -> None:
        self._next = value

    def forget(self, tensor: Tensor) -> None:
        """Drop `tensor`'s uid (a tensor whose creation is being undone)."""
        if self._holders.get(tensor.uid) is tensor:
            del self._holders[tensor.uid]

    def _fresh(self) -> int:
        while self._next in self._holders:
            self._next += 1
        uid = self._next
        self._next += 1
        return uid

    def __len__(self) -> int:
        return len(self._holders)
