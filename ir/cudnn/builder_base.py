"""Base of the generated builder mixins: the argument aliases and the `_add_op` hook.

The `builders_*` modules are generated from the OpSpecs by `cudnn.builder_codegen` and
checked in, so every builder is an ordinary method with an explicit signature that grep,
IDEs and type checkers see. Each method hands its arguments (`locals()`) to `_add_op`
(`op_builder.add_op`).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Union

from cudnn.op_builder import add_op

#: an IR Tensor of the graph or a framework array (torch / numpy / any DLPack producer with
#: a shape), which is described into a tensor and remembered as an auto-binding.
TensorArg = Union["Tensor", Any]  # noqa: F821 - the forward reference is documentation
#: a cudnn.data_type, a torch dtype, or None (graph default).
DTypeArg = Any
#: dims of the first declared output, or {output port: dims}.
OutDims = Union[Sequence[int], Mapping[str, Sequence[int]], None]


class BuilderBase:
    __slots__ = ()

    #: `self._add_op(spec, args)` is `add_op(self, spec, args)` (no wrapper frame: a
    #: graph calls it once per node).
    _add_op = add_op
