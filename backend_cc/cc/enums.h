// The frontend enum vocabularies the Python IR speaks, and their cuDNN backend equivalents.
//
// Python passes enum *values* in the frontend numbering of the classic cudnn-frontend
// binding (docs/GRAPH_IR.md §3: data_type FLOAT=1, HALF=3, ...; heur_mode A=0, ...),
// which differs from the cudnn*_t numbering. Each vocabulary is one typed table of
// {frontend value, cuDNN value, name}; nothing is matched by name at run time.
#pragma once

#include <cudnn_graph.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cudnn_backend {

enum class EnumKind {
  kDataType,
  kHeurMode,
  kNormForwardPhase,
  kReductionMode,
  kConvolutionMode,
  kReshapeMode,
  kTensorReordering,
  kDiagonalAlignment,
  kAttentionImplementation,
  kMoeGroupedMatmulMode,
  kBehaviorNote,
  kNumericalNote,
};

struct EnumEntry {
  int64_t frontend;  // value Python passes and receives
  int64_t cudnn;     // cudnn*_t value; -1 when this cuDNN has no equivalent
  const char* name;  // frontend member name, for messages
};

// Python-facing name of the vocabulary ("data_type", "heur_mode", ...).
const char* enum_kind_name(EnumKind kind);
const std::vector<EnumEntry>& enum_entries(EnumKind kind);

// nullptr when `frontend` is not a member of the vocabulary.
const EnumEntry* find_frontend(EnumKind kind, int64_t frontend);
// nullptr when no member maps to `cudnn`.
const EnumEntry* find_cudnn(EnumKind kind, int64_t cudnn);

// "HALF" for data_type 3; "<kind>(<v>)" for unknown values.
std::string enum_value_name(EnumKind kind, int64_t frontend);
// "FLOAT=1, DOUBLE=2, ..." for error messages.
std::string enum_members(EnumKind kind);

// Frontend data_type values, named for readability in C++ code.
namespace data_type {
constexpr int64_t kNotSet = 0;
constexpr int64_t kFloat = 1;
constexpr int64_t kDouble = 2;
constexpr int64_t kHalf = 3;
constexpr int64_t kInt8 = 4;
constexpr int64_t kInt32 = 5;
constexpr int64_t kUint8 = 7;
constexpr int64_t kBfloat16 = 10;
constexpr int64_t kInt64 = 11;
constexpr int64_t kBoolean = 12;
constexpr int64_t kFp8E4m3 = 14;
constexpr int64_t kFp8E5m2 = 15;
constexpr int64_t kFp8E8m0 = 17;
}  // namespace data_type

// cuDNN data type of a frontend data_type; throws GraphNotSupported when this cuDNN has none
// (e.g. FP8_E5M3), ArgumentValueError for values outside the vocabulary.
cudnnDataType_t to_cudnn_data_type(int64_t frontend, const std::string& what);

// Bytes per element of a frontend data_type, or 0 for sub-byte / unknown types.
int64_t data_type_size(int64_t frontend);

}  // namespace cudnn_backend
