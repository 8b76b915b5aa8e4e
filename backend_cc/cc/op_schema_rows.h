// Helpers the op table's row files share (op_schema.cc, op_schema_sdpa.cc): short
// constructors for ports, outputs and attributes, and the cuDNN versions rows name.
// Internal to the table; everything else reads rows through op_schema.h.
#pragma once

#include <utility>
#include <vector>

#include "backend_cc/cc/op_schema.h"

namespace cudnn_backend::rows {

inline constexpr int64_t kV9_1 = 90100;
inline constexpr int64_t kV9_7 = 90700;
inline constexpr int64_t kV9_13 = 91300;
inline constexpr int64_t kV9_14 = 91400;
inline constexpr int64_t kV9_15 = 91500;
inline constexpr int64_t kV9_17 = 91700;
inline constexpr int64_t kV9_18 = 91800;
inline constexpr int64_t kV9_21 = 92100;
inline constexpr int64_t kV9_22 = 92200;
inline constexpr int64_t kV9_24 = 92400;
inline constexpr int64_t kV9_25 = 92500;

inline PortSpec in(const char* name) { return PortSpec{name, true}; }
inline PortSpec opt(const char* name, int64_t min_version = 0) {
  PortSpec p{name, false};
  p.min_version = min_version;
  return p;
}
inline PortSpec list_in(const char* name, bool required) {
  PortSpec p{name, required};
  p.is_list = true;
  return p;
}
inline PortSpec unsupported_port(const char* name, const char* why) {
  PortSpec p{name, false};
  p.unsupported = why;
  return p;
}

inline OutputSpec out(const char* name, int64_t default_data_type = 0) {
  OutputSpec o{name};
  o.default_data_type = default_data_type;
  return o;
}
inline OutputSpec out_if_training(const char* name) {
  OutputSpec o{name};
  o.presence = Presence::kIfTraining;
  return o;
}
inline OutputSpec out_if_input(const char* name, const char* input) {
  OutputSpec o{name};
  o.presence = Presence::kIfInputGiven;
  o.input = input;
  return o;
}

inline AttrSpec attr(const char* name, AttrType type, bool required = false) {
  return AttrSpec{name, type, required};
}
inline AttrSpec enum_attr(const char* name, EnumKind kind, bool required = false) {
  AttrSpec a{name, AttrType::kEnum, required};
  a.enum_kind = kind;
  return a;
}
// Accepted for name compatibility; any value other than `neutral` is a decline.
inline AttrSpec unsupported_attr(const char* name, AttrType type, AttrValue neutral,
                                 const char* why) {
  AttrSpec a{name, type, false};
  a.neutral = std::move(neutral);
  a.unsupported = why;
  return a;
}
inline AttrSpec unsupported_flag(const char* name, const char* why) {
  return unsupported_attr(name, AttrType::kBool, AttrValue{false}, why);
}
inline AttrSpec unsupported_int(const char* name, const char* why) {
  return unsupported_attr(name, AttrType::kInt, AttrValue{}, why);
}

// Row groups, one per file of the table.
void add_sdpa(std::vector<OpSchema>& t);
void add_sdpa_fp8(std::vector<OpSchema>& t);

}  // namespace cudnn_backend::rows
