"""`LayoutList`: the list a Tensor hands out as `dim` / `stride` while its graph is mutable.

It is a real `list` (engines may index, slice, compare and concatenate it), but every
in-place edit first calls back into the tensor, so that an edit counts as a caller-set
layout, invalidates a previous validate(), and raises once the graph is frozen (a list
kept from before the freeze stays guarded). After the freeze tensors hand out tuples.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, SupportsIndex


class LayoutList(list):  # type: ignore[type-arg]
    __slots__ = ("_before_edit",)

    def __init__(self, values: Iterable[int], before_edit: Callable[[], None]) -> None:
        super().__init__(values)
        self._before_edit = before_edit

    def __setitem__(self, index: Any, value: Any) -> None:
        self._before_edit()
        super().__setitem__(index, value)

    def __delitem__(self, index: Any) -> None:
        self._before_edit()
        super().__delitem__(index)

    def __iadd__(self, values: Iterable[int]) -> LayoutList:  # type: ignore[override,misc]
        self._before_edit()
        super().__iadd__(values)
        return self

    def __imul__(self, count: SupportsIndex) -> LayoutList:  # type: ignore[override,misc]
        self._before_edit()
        super().__imul__(count)
        return self

    def append(self, value: int) -> None:
        self._before_edit()
        super().append(value)

    def extend(self, values: Iterable[int]) -> None:
        self._before_edit()
        super().extend(values)

    def insert(self, index: SupportsIndex, value: int) -> None:
        self._before_edit()
        super().insert(index, value)

    def pop(self, index: SupportsIndex = -1) -> int:
        self._before_edit()
        return super().pop(index)

    def remove(self, value: int) -> None:
        self._before_edit()
        super().remove(value)

    def clear(self) -> None:
        self._before_edit()
        super().clear()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self._before_edit()
        super().sort(*args, **kwargs)

    def reverse(self) -> None:
        self._before_edit()
        super().reverse()

    def __reduce__(self) -> Any:
        # copies and pickles are plain lists: the callback belongs to one tensor.
        return (list, (list(self),))
