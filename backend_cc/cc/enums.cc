// Frontend <-> cuDNN enum tables (see enums.h). Frontend values follow
// docs/GRAPH_IR.md §3; cuDNN values are the cudnn_graph.h enumerators.
#include "backend_cc/cc/enums.h"

#include "backend_cc/cc/errors.h"

namespace cudnn_backend {

namespace {

const std::vector<EnumEntry>& data_types() {
  static const std::vector<EnumEntry> table = {
      {0, -1, "NOT_SET"},
      {1, CUDNN_DATA_FLOAT, "FLOAT"},
      {2, CUDNN_DATA_DOUBLE, "DOUBLE"},
      {3, CUDNN_DATA_HALF, "HALF"},
      {4, CUDNN_DATA_INT8, "INT8"},
      {5, CUDNN_DATA_INT32, "INT32"},
      {6, CUDNN_DATA_INT8x4, "INT8x4"},
      {7, CUDNN_DATA_UINT8, "UINT8"},
      {8, CUDNN_DATA_UINT8x4, "UINT8x4"},
      {9, CUDNN_DATA_INT8x32, "INT8x32"},
      {10, CUDNN_DATA_BFLOAT16, "BFLOAT16"},
      {11, CUDNN_DATA_INT64, "INT64"},
      {12, CUDNN_DATA_BOOLEAN, "BOOLEAN"},
      {14, CUDNN_DATA_FP8_E4M3, "FP8_E4M3"},
      {15, CUDNN_DATA_FP8_E5M2, "FP8_E5M2"},
      {16, CUDNN_DATA_FAST_FLOAT_FOR_FP8, "FAST_FLOAT_FOR_FP8"},
#if CUDNN_VERSION >= 90700
      {17, CUDNN_DATA_FP8_E8M0, "FP8_E8M0"},
#else
      {17, -1, "FP8_E8M0"},
#endif
      // The classic binding lists FP8_E5M3; no cuDNN 9 release has a backend type for it.
      {18, -1, "FP8_E5M3"},
#if CUDNN_VERSION >= 90700
      {19, CUDNN_DATA_FP4_E2M1, "FP4_E2M1"},
#else
      {19, -1, "FP4_E2M1"},
#endif
#if CUDNN_VERSION >= 91100
      {20, CUDNN_DATA_INT4, "INT4"},
#else
      {20, -1, "INT4"},
#endif
  };
  return table;
}

const std::vector<EnumEntry>& heur_modes() {
  // OPENSOURCE is the frontend's "let the backend pick" entry: cuDNN has no such heuristic.
  static const std::vector<EnumEntry> table = {
      {0, CUDNN_HEUR_MODE_A, "A"},
      {1, CUDNN_HEUR_MODE_B, "B"},
      {2, CUDNN_HEUR_MODE_FALLBACK, "FALLBACK"},
      {3, -1, "OPENSOURCE"},
  };
  return table;
}

const std::vector<EnumEntry>& norm_phases() {
  static const std::vector<EnumEntry> table = {
      {0, -1, "NOT_SET"},
      {1, CUDNN_NORM_FWD_INFERENCE, "INFERENCE"},
      {2, CUDNN_NORM_FWD_TRAINING, "TRAINING"},
  };
  return table;
}

const std::vector<EnumEntry>& reduction_modes() {
  static const std::vector<EnumEntry> table = {
      {0, -1, "NOT_SET"},
      {1, CUDNN_REDUCE_TENSOR_ADD, "ADD"},
      {2, CUDNN_REDUCE_TENSOR_MUL, "MUL"},
      {3, CUDNN_REDUCE_TENSOR_MIN, "MIN"},
      {4, CUDNN_REDUCE_TENSOR_MAX, "MAX"},
      {5, CUDNN_REDUCE_TENSOR_AMAX, "AMAX"},
      {6, CUDNN_REDUCE_TENSOR_AVG, "AVG"},
      {7, CUDNN_REDUCE_TENSOR_NORM1, "NORM1"},
      {8, CUDNN_REDUCE_TENSOR_NORM2, "NORM2"},
      {9, CUDNN_REDUCE_TENSOR_MUL_NO_ZEROS, "MUL_NO_ZEROS"},
  };
  return table;
}

const std::vector<EnumEntry>& convolution_modes() {
  static const std::vector<EnumEntry> table = {
      {1, CUDNN_CONVOLUTION, "CONVOLUTION"},
      {2, CUDNN_CROSS_CORRELATION, "CROSS_CORRELATION"},
  };
  return table;
}

const std::vector<EnumEntry>& reshape_modes() {
#if CUDNN_VERSION >= 92200
  static const std::vector<EnumEntry> table = {
      {1, CUDNN_RESHAPE_VIEW_ONLY, "VIEW_ONLY"},
      {2, CUDNN_RESHAPE_LOGICAL, "LOGICAL"},
  };
#else
  // Before 9.22 a reshape is always a view; LOGICAL has no backend spelling.
  static const std::vector<EnumEntry> table = {
      {1, 0, "VIEW_ONLY"},
      {2, -1, "LOGICAL"},
  };
#endif
  return table;
}

const std::vector<EnumEntry>& tensor_reorderings() {
  static const std::vector<EnumEntry> table = {
      {0, CUDNN_TENSOR_REORDERING_NONE, "NONE"},
      {1, CUDNN_TENSOR_REORDERING_INT8x32, "INT8x32"},
      {2, CUDNN_TENSOR_REORDERING_F16x16, "F16x16"},
#if CUDNN_VERSION >= 90700
      {3, CUDNN_TENSOR_REORDERING_F8_128x4, "F8_128x4"},
#else
      {3, -1, "F8_128x4"},
#endif
  };
  return table;
}

const std::vector<EnumEntry>& diagonal_alignments() {
  // Only the frontend knows these (band masks); the native SDPA descriptors have no field.
  static const std::vector<EnumEntry> table = {
      {0, -1, "TOP_LEFT"},
      {1, -1, "BOTTOM_RIGHT"},
  };
  return table;
}

const std::vector<EnumEntry>& attention_implementations() {
  static const std::vector<EnumEntry> table = {
      {0, -1, "AUTO"},
      {1, -1, "COMPOSITE"},
      {2, -1, "UNIFIED"},
  };
  return table;
}

const std::vector<EnumEntry>& moe_grouped_matmul_modes() {
  // COMBINE (FC2, routing scores and the sum over experts) has no backend mode: the frontend
  // serves it with its FROST GEMM engine only.
#if CUDNN_VERSION >= 91500
  static const std::vector<EnumEntry> table = {
      {1, CUDNN_MOE_GROUPED_MATMUL_MODE_NONE, "NONE"},
      {2, CUDNN_MOE_GROUPED_MATMUL_MODE_GATHER, "GATHER"},
      {3, CUDNN_MOE_GROUPED_MATMUL_MODE_SCATTER, "SCATTER"},
      {4, -1, "COMBINE"},
  };
#else
  static const std::vector<EnumEntry> table = {
      {1, -1, "NONE"}, {2, -1, "GATHER"}, {3, -1, "SCATTER"}, {4, -1, "COMBINE"}};
#endif
  return table;
}

const std::vector<EnumEntry>& behavior_notes() {
  static const std::vector<EnumEntry> table = {
      {1, CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION, "RUNTIME_COMPILATION"},
      {2, CUDNN_BEHAVIOR_NOTE_REQUIRES_FILTER_INT8x32_REORDER, "REQUIRES_FILTER_INT8x32_REORDER"},
      {3, CUDNN_BEHAVIOR_NOTE_REQUIRES_BIAS_INT8x32_REORDER, "REQUIRES_BIAS_INT8x32_REORDER"},
#if CUDNN_VERSION >= 90500
      {4, CUDNN_BEHAVIOR_NOTE_SUPPORTS_CUDA_GRAPH_NATIVE_API, "SUPPORTS_CUDA_GRAPH_NATIVE_API"},
#endif
#if CUDNN_VERSION >= 91500
      {5, CUDNN_BEHAVIOR_NOTE_CUBLASLT_DEPENDENCY, "CUBLASLT_DEPENDENCY"},
#endif
  };
  return table;
}

const std::vector<EnumEntry>& numerical_notes() {
  static const std::vector<EnumEntry> table = {
      {1, CUDNN_NUMERICAL_NOTE_TENSOR_CORE, "TENSOR_CORE"},
      {2, CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS, "DOWN_CONVERT_INPUTS"},
      {3, CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION, "REDUCED_PRECISION_REDUCTION"},
      {4, CUDNN_NUMERICAL_NOTE_FFT, "FFT"},
      {5, CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC, "NONDETERMINISTIC"},
      {6, CUDNN_NUMERICAL_NOTE_WINOGRAD, "WINOGRAD"},
      {7, CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4, "WINOGRAD_TILE_4x4"},
      {8, CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6, "WINOGRAD_TILE_6x6"},
      {9, CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13, "WINOGRAD_TILE_13x13"},
      {10, CUDNN_NUMERICAL_NOTE_STRICT_NAN_PROP, "STRICT_NAN_PROP"},
  };
  return table;
}

}  // namespace

const char* enum_kind_name(EnumKind kind) {
  switch (kind) {
    case EnumKind::kDataType: return "data_type";
    case EnumKind::kHeurMode: return "heur_mode";
    case EnumKind::kNormForwardPhase: return "norm_forward_phase";
    case EnumKind::kReductionMode: return "reduction_mode";
    case EnumKind::kConvolutionMode: return "convolution_mode";
    case EnumKind::kReshapeMode: return "reshape_mode";
    case EnumKind::kTensorReordering: return "tensor_reordering";
    case EnumKind::kDiagonalAlignment: return "diagonal_alignment";
    case EnumKind::kAttentionImplementation: return "attention_implementation";
    case EnumKind::kMoeGroupedMatmulMode: return "moe_grouped_matmul_mode";
    case EnumKind::kBehaviorNote: return "behavior_note";
    case EnumKind::kNumericalNote: return "numerical_note";
  }
  return "enum";
}

const std::vector<EnumEntry>& enum_entries(EnumKind kind) {
  switch (kind) {
    case EnumKind::kDataType: return data_types();
    case EnumKind::kHeurMode: return heur_modes();
    case EnumKind::kNormForwardPhase: return norm_phases();
    case EnumKind::kReductionMode: return reduction_modes();
    case EnumKind::kConvolutionMode: return convolution_modes();
    case EnumKind::kReshapeMode: return reshape_modes();
    case EnumKind::kTensorReordering: return tensor_reorderings();
    case EnumKind::kDiagonalAlignment: return diagonal_alignments();
    case EnumKind::kAttentionImplementation: return attention_implementations();
    case EnumKind::kMoeGroupedMatmulMode: return moe_grouped_matmul_modes();
    case EnumKind::kBehaviorNote: return behavior_notes();
    case EnumKind::kNumericalNote: return numerical_notes();
  }
  return data_types();
}

const EnumEntry* find_frontend(EnumKind kind, int64_t frontend) {
  for (const auto& entry : enum_entries(kind)) {
    if (entry.frontend == frontend) return &entry;
  }
  return nullptr;
}

const EnumEntry* find_cudnn(EnumKind kind, int64_t cudnn) {
  for (const auto& entry : enum_entries(kind)) {
    if (entry.cudnn == cudnn) return &entry;
  }
  return nullptr;
}

std::string enum_value_name(EnumKind kind, int64_t frontend) {
  if (const EnumEntry* entry = find_frontend(kind, frontend)) return entry->name;
  return std::string(enum_kind_name(kind)) + "(" + std::to_string(frontend) + ")";
}

std::string enum_members(EnumKind kind) {
  std::string out;
  for (const auto& entry : enum_entries(kind)) {
    if (!out.empty()) out += ", ";
    out += std::string(entry.name) + "=" + std::to_string(entry.frontend);
  }
  return out;
}

cudnnDataType_t to_cudnn_data_type(int64_t frontend, const std::string& what) {
  const EnumEntry* entry = find_frontend(EnumKind::kDataType, frontend);
  if (entry == nullptr) {
    throw ArgumentValueError(what + ": " + std::to_string(frontend) +
                             " is not a data_type value (" + enum_members(EnumKind::kDataType) +
                             ")");
  }
  if (entry->cudnn < 0) {
    throw GraphNotSupported(what + ": data_type " + entry->name +
                            " has no cuDNN backend equivalent in the cuDNN headers this "
                            "extension was built against (" +
                            std::to_string(CUDNN_VERSION) + ")");
  }
  return static_cast<cudnnDataType_t>(entry->cudnn);
}

int64_t data_type_size(int64_t frontend) {
  switch (frontend) {
    case data_type::kDouble:
    case data_type::kInt64: return 8;
    case data_type::kFloat:
    case data_type::kInt32:
    case 6:   // INT8x4
    case 8:   // UINT8x4
      return 4;
    case data_type::kHalf:
    case data_type::kBfloat16: return 2;
    case data_type::kInt8:
    case data_type::kUint8:
    case data_type::kBoolean:
    case 14:  // FP8_E4M3
    case 15:  // FP8_E5M2
    case 17:  // FP8_E8M0
      return 1;
    case 9:   // INT8x32
      return 32;
    default: return 0;
  }
}

}  // namespace cudnn_backend
