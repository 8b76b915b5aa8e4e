"""`LayoutList`: the list a Tensor hands out as `dim` / `stride` while its graph is mutable.

It is a real `list` (engines may index, slice, compare and concatenate it), but every
in-place edit is first applied to a copy, and the copy goes to the tensor's `check`
callback: that validates the values (ints in [0, 2**63), as `set_dim` / `set_stride`
would take them), counts the edit as a caller-set layout, invalidates a previous
validate() and raises once the graph is frozen (a list kept from before the freeze stays
guarded). Only when the callback returns does the list change: a refused edit (a string,
a negative extent, a frozen graph) leaves it as it was. After the freeze tensors hand out
tuples.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, SupportsIndex


class LayoutList(list):  # type: ignore[type-arg]
    __slots__ = ("_check",)

    def __init__(self, values: Iterable[int],
                 check: Callable[[list[int]], Sequence[int]]) -> None:
        super().__init__(values)
        self._check = check

    def _edit(self, change: Callable[[list[Any]], Any]) -> Any:
        """Apply `change` to a copy, have the tensor check it, then take it over."""
        candidate = list(self)
        result = change(candidate)  # IndexError, ValueError (remove) before any change
        accepted = self._check(candidate)
        list.__setitem__(self, slice(None), accepted)
        return result

    def __setitem__(self, index: Any, value: Any) -> None:
        self._edit(lambda c: c.__setitem__(index, value))

    def __delitem__(self, index: Any) -> None:
        self._edit(lambda c: c.__delitem__(index))

    def __iadd__(self, values: Iterable[int]) -> LayoutList:  # type: ignore[override,misc]
        self._edit(lambda c: c.extend(list(values)))
        return self

    def __imul__(self, count: SupportsIndex) -> LayoutList:  # type: ignore[override,misc]
        self._edit(lambda c: c.__imul__(count))
        return self

    def append(self, value: int) -> None:
        self._edit(lambda c: c.append(value))

    def extend(self, values: Iterable[int]) -> None:
        self._edit(lambda c: c.extend(list(values)))

    def insert(self, index: SupportsIndex, value: int) -> None:
        self._edit(lambda c: c.insert(index, value))

    def pop(self, index: SupportsIndex = -1) -> int:
        return self._edit(lambda c: c.pop(index))

    def remove(self, value: int) -> None:
        self._edit(lambda c: c.remove(value))

    def clear(self) -> None:
        self._edit(lambda c: c.clear())

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self._edit(lambda c: c.sort(*args, **kwargs))

    def reverse(self) -> None:
        self._edit(lambda c: c.reverse())

    def __reduce__(self) -> Any:
        # copies and pickles are plain lists: the callback belongs to one tensor.
        return (list, (list(self),))
