"""`cudnn.graph(...)`: the classic context manager that yields a fresh graph.

    with cudnn.graph(handle) as (g, tensors):
        ...
It yields `(pygraph, [])` with io HALF, intermediate and compute FLOAT unless given;
the list is the caller's (classic code collects its tensors there). Nothing happens on
exit: building, planning and executing are explicit calls.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from cudnn._pygraph import pygraph
from cudnn.ops.data_types import data_type


@contextmanager
def graph(handle: Any, name: str = "cudnn_graph", io_data_type: Any = data_type.HALF,
          intermediate_data_type: Any = data_type.FLOAT,
          compute_data_type: Any = data_type.FLOAT,
          **graph_kwargs: Any) -> Iterator[tuple[pygraph, list[Any]]]:
    yield (pygraph(name=name, io_data_type=io_data_type,
                   intermediate_data_type=intermediate_data_type,
                   compute_data_type=compute_data_type, handle=handle, **graph_kwargs), [])
