// The typed table of every op the backend graph records: its method name, ports, outputs and
// attributes, spelled exactly as the Python IR's ports and attributes (docs/GRAPH_IR.md).
//
// One row per Python method. The pybind layer generates one method per row and parses its
// arguments against the row; the record layer validates calls against it; materialization
// switches on `kind`. Ports or attributes the cuDNN backend cannot express are still listed
// (so the names stay identical to the IR), marked with the reason giving them is a decline.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend_cc/cc/attr_value.h"
#include "backend_cc/cc/enums.h"

namespace cudnn_backend {

enum class OpKind {
  kPointwise,
  kMatmul,
  kConvFprop,
  kConvDgrad,
  kConvWgrad,
  kReduction,
  kNormForward,
  kNormBackward,
  kGenStats,
  kReshape,
  kConcatenate,
  kSdpaForward,
  kSdpaBackward,
  // Composite kinds: one recorded op, several cuDNN operations joined by internal tensors
  // (composite.h).
  kBatchnormInference,
  kSdpaFp8Forward,
  kSdpaFp8Backward,
  kBlockScaleQuantize,
  kBlockScaleDequantize,
  kMoeGroupedMatmul,
  kMoeGroupedMatmulBwd,
  kSlice,
  kTranspose,
  kRope,
  kRopeBackward,
  // Recorded for their names only: every call declines (OpSchema::no_lowering).
  kSdpaMxfp8Forward,
  kSdpaMxfp8Backward,
};

const char* op_kind_name(OpKind kind);

struct PortSpec {
  const char* name;
  bool required = true;
  bool is_list = false;                // recorded as <name>_0, <name>_1, ...
  const char* unsupported = nullptr;   // giving this port declines with this reason
  int64_t min_version = 0;             // cuDNN version (CUDNN_VERSION units) that expresses it
};

enum class Presence {
  kAlways,
  kIfTraining,              // norm forward statistics: phase != INFERENCE
  kIfInputGiven,            // `input` port was given
  kIfInputGivenAndAttrNotFalse,  // `input` given and `attr` is not False (unset counts True)
  kIfSdpaStats,             // generate_stats truthy, or is_inference given and False
};

struct OutputSpec {
  const char* name;
  Presence presence = Presence::kAlways;
  const char* input = nullptr;
  const char* attr = nullptr;
  int64_t default_data_type = 0;  // used when the caller leaves the dtype unset (0 = graph rule)
};

enum class AttrType {
  kInt,
  kFloat,
  kBool,
  kIntList,
  kEnum,
  kOpaque,  // a Python value the backend cannot carry (callable, dropout tuple): None only
  // Python slice objects, stored flat as (start, stop, step) triples with kSliceNone for a
  // missing bound (attr_value.h); resolved against the input dims at validate().
  kSliceList,
};

struct AttrSpec {
  const char* name;
  AttrType type;
  bool required = false;
  EnumKind enum_kind = EnumKind::kDataType;  // kEnum only
  const char* unsupported = nullptr;  // a value other than `neutral` declines with this reason
  AttrValue neutral;                  // value that means the same as "not given"
  int64_t min_version = 0;
};

struct OpSchema {
  const char* method;
  OpKind kind;
  std::vector<PortSpec> inputs;
  std::vector<OutputSpec> outputs;
  std::vector<AttrSpec> attrs;
  bool takes_compute_data_type = true;
  int64_t min_version = 0;      // runtime cuDNN version the descriptor needs
  const char* missing_from_headers = nullptr;  // set when the build headers lack the descriptor
  // Older libraries that accept the descriptor but cannot use it: the loaded cuDNN must be at
  // least this new (0: no extra rule), and `runtime_gap` says what fails below it.
  int64_t min_runtime_version = 0;
  const char* runtime_gap = nullptr;
  // Why every call declines: no cuDNN lowering exists in this backend (checked after the
  // version gates, so an old library is named first).
  const char* no_lowering = nullptr;
  // Compute capability (major * 10 + minor) the op's engines need; 0 = any. The backend
  // graph has no device to ask when an op is recorded, so the Python lowering compares it
  // with the handle's device (cudnn/backend/lowering.py) and declines below it.
  int min_sm = 0;
  const char* min_sm_reason = nullptr;
  int pointwise_mode = -1;      // cudnnPointwiseMode_t for kPointwise
  int norm_mode = -1;           // cudnnBackendNormMode_t for kNormForward/kNormBackward

  const PortSpec* find_input(const std::string& port) const;
  const AttrSpec* find_attr(const std::string& attr) const;
  const OutputSpec* find_output(const std::string& port) const;
};

const std::vector<OpSchema>& op_schemas();

// "9.21.0" for 92100 (CUDNN_VERSION units).
std::string cudnn_version_string(int64_t version);

// Why `schema` cannot run on the loaded library `loaded_version` (min_version and
// min_runtime_version); empty when it can or when no library is loaded (0).
std::string runtime_decline(const OpSchema& schema, int64_t loaded_version);
const OpSchema* find_op_schema(const std::string& method);

// "matmul(A, B, *, padding=None, compute_data_type=None, name='')": the first docstring line.
std::string op_signature(const OpSchema& schema);

}  // namespace cudnn_backend
