"""cudnn.ops: the op schema (one typed OpSpec per op), enums and errors.

Depends on nothing else of ours and imports neither torch nor any GPU library.
"""
from cudnn.ops.data_types import data_type
from cudnn.ops.errors import (GraphFrozenError, OpArgumentError, OpTypeError, OpValueError,
                              cudnnGraphNotSupportedError)
from cudnn.ops.node_type import NodeType
from cudnn.ops.op_spec import OpGroup, OpSpec

__all__ = ["GraphFrozenError", "NodeType", "OpArgumentError", "OpGroup", "OpSpec",
           "OpTypeError", "OpValueError", "cudnnGraphNotSupportedError", "data_type"]
