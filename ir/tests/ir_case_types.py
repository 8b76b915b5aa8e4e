"""Records shared by the op-case catalogues (ir_*_cases.py)."""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import cudnn


@dataclass
class Built:
    """A builder call ready to make: its arguments and what its outputs must look like.

    `dims` holds every declared output (None = absent); `dtypes` the dtype each present
    output carries right after the call; `assigned` the outputs dimensioned by out_dims.
    """
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    dims: dict[str, tuple[int, ...] | None]
    dtypes: dict[str, Any] = field(default_factory=dict)
    assigned: frozenset[str] = frozenset()


@dataclass(frozen=True)
class OpCase:
    op: str
    id: str
    make: Callable[[cudnn.pygraph, random.Random], Built]
