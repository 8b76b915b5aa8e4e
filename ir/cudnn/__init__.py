"""cudnn: a Python-native graph IR with pluggable execution engines.

This package is split over several source roots (ops/, ir/, router/, engines_*/,
backend_cc/, torch_ops/, cli/); extend_path merges them so a Bazel runfiles tree and an
installed wheel import the same way.

`import cudnn` loads only the op schema and the IR: no torch, no engine, no backend.
"""
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

from cudnn._version import __version__  # noqa: E402
from cudnn._pygraph import BackendOptions, pygraph  # noqa: E402
from cudnn.graph_scope import graph  # noqa: E402
from cudnn.graph_types import Tensor  # noqa: E402
from cudnn.lifecycle import GraphState, PlanningData  # noqa: E402
from cudnn.nodes import Node  # noqa: E402
from cudnn.ops.data_types import data_type  # noqa: E402
from cudnn.ops.enums import (FRONTEND_KNOB_TYPE_BASE, attention_implementation,  # noqa: E402
                             behavior_note, build_plan_policy, convolution_mode,
                             cuda_graph_retention, diagonal_alignment, heur_mode, knob_type,
                             moe_grouped_matmul_mode, norm_forward_phase, numerical_note,
                             reduction_mode, reshape_mode, scalar_type, tensor_reordering)
from cudnn.ops.errors import (GraphFrozenError, OpArgumentError, OpTypeError,  # noqa: E402
                              OpValueError, cudnnGraphNotSupportedError)
from cudnn.ops.node_type import NodeType  # noqa: E402

__all__ = [
    "BackendOptions", "FRONTEND_KNOB_TYPE_BASE", "GraphFrozenError", "GraphState", "Node",
    "NodeType", "OpArgumentError", "OpTypeError", "OpValueError", "PlanningData", "Tensor",
    "attention_implementation", "behavior_note", "build_plan_policy", "convolution_mode",
    "cuda_graph_retention", "cudnnGraphNotSupportedError", "data_type", "diagonal_alignment",
    "graph", "heur_mode", "knob_type", "moe_grouped_matmul_mode", "norm_forward_phase",
    "numerical_note", "pygraph", "reduction_mode", "reshape_mode", "scalar_type",
    "tensor_reordering", "__version__",
]
