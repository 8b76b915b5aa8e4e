"""Public enums of the graph API other than `data_type`, with their binding values.

Owns: heur_mode, norm_forward_phase, reduction_mode, reshape_mode, convolution_mode,
moe_grouped_matmul_mode, diagonal_alignment, attention_implementation,
tensor_reordering, scalar_type, build_plan_policy, behavior_note, numerical_note,
cuda_graph_retention, knob_type. Values equal the C++ binding's so that lowering passes
them through unchanged; knob values are a persisted contract (append-only).
"""
from __future__ import annotations

import enum

# Lower-case class names are the classic public spellings (cudnn.heur_mode.A, ...).
# ruff: noqa: N801


class heur_mode(enum.IntEnum):
    A = 0
    B = 1
    FALLBACK = 2
    OPENSOURCE = 3


class norm_forward_phase(enum.IntEnum):
    NOT_SET = 0
    INFERENCE = 1
    TRAINING = 2


class reduction_mode(enum.IntEnum):
    NOT_SET = 0
    ADD = 1
    MUL = 2
    MIN = 3
    MAX = 4
    AMAX = 5
    AVG = 6
    NORM1 = 7
    NORM2 = 8
    MUL_NO_ZEROS = 9


class reshape_mode(enum.IntEnum):
    VIEW_ONLY = 1
    LOGICAL = 2


class convolution_mode(enum.IntEnum):
    CONVOLUTION = 1
    CROSS_CORRELATION = 2


class moe_grouped_matmul_mode(enum.IntEnum):
    NONE = 1
    GATHER = 2
    SCATTER = 3
    COMBINE = 4


class diagonal_alignment(enum.IntEnum):
    TOP_LEFT = 0
    BOTTOM_RIGHT = 1


class attention_implementation(enum.IntEnum):
    AUTO = 0
    COMPOSITE = 1
    UNIFIED = 2


class tensor_reordering(enum.IntEnum):
    NONE = 0
    INT8x32 = 1
    F16x16 = 2
    F8_128x4 = 3


class scalar_type(enum.IntEnum):
    RUNTIME_PARAM = 0
    COMPILE_TIME_CONST = 1


class build_plan_policy(enum.IntEnum):
    HEURISTICS_CHOICE = 0
    ALL = 1


class behavior_note(enum.IntEnum):
    RUNTIME_COMPILATION = 1
    REQUIRES_FILTER_INT8x32_REORDER = 2
    REQUIRES_BIAS_INT8x32_REORDER = 3
    SUPPORTS_CUDA_GRAPH_NATIVE_API = 4
    CUBLASLT_DEPENDENCY = 5


class numerical_note(enum.IntEnum):
    TENSOR_CORE = 1
    DOWN_CONVERT_INPUTS = 2
    REDUCED_PRECISION_REDUCTION = 3
    FFT = 4
    NONDETERMINISTIC = 5
    WINOGRAD = 6
    WINOGRAD_TILE_4x4 = 7
    WINOGRAD_TILE_6x6 = 8
    WINOGRAD_TILE_13x13 = 9
    STRICT_NAN_PROP = 10


class cuda_graph_retention(enum.IntEnum):
    PER_GRAPH = 0
    NONE = 1


#: first value of the frontend-only knob band; values below mirror the backend's knobs.
FRONTEND_KNOB_TYPE_BASE = 1000


class knob_type(enum.IntEnum):
    NOT_SET = 0
    SWIZZLE = 1
    TILE_SIZE = 2
    EDGE = 3
    MULTIPLY = 4
    SPLIT_K_BUF = 5
    TILEK = 6
    STAGES = 7
    REDUCTION_MODE = 8
    SPLIT_K_SLC = 9
    IDX_MODE = 10
    SPECFILT = 11
    KERNEL_CFG = 12
    WORKSPACE = 13
    TILE_CGA_M = 14
    TILE_CGA_N = 15
    BLOCK_SIZE = 16
    OCCUPANCY = 17
    ARRAY_SIZE_PER_THREAD = 18
    SPLIT_COLS = 19
    TILE_ROWS = 20
    TILE_COLS = 21
    LOAD_SIZE = 22
    CTA_COUNT = 23
    STREAM_K = 24
    SPLIT_P_SLC = 25
    TILE_M = 26
    TILE_N = 27
    WARP_SPEC_CFG = 28
    SWAP_AB = 29
    INPUT_TMA_ENABLE = 30
    OUTPUT_TMA_ENABLE = 31
    TILE_CGA = 32
    SCHED_POLICY = 1000
    PACK_GQA = 1001
    SPLIT_KV = 1002
    PIPELINE_ARCH = 1003
    MMA_TILE_M = 1004
    MMA_TILE_N = 1005
    MMA_TILE_K = 1006
    CTA_GROUP = 1007
    WARPS_M = 1008
    WARPS_N = 1009
