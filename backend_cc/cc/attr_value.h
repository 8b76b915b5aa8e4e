// The value of one scalar op attribute as recorded on a backend graph.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <variant>
#include <vector>

namespace cudnn_backend {

// monostate = "not given" (Python None). Enum attributes hold their frontend value as int64.
using AttrValue = std::variant<std::monostate, int64_t, double, bool, std::vector<int64_t>>;

// A missing bound of a Python slice (`slice(None, 4)`) in a kSliceList attribute, which holds
// flat (start, stop, step) triples.
inline constexpr int64_t kSliceNone = std::numeric_limits<int64_t>::min();

inline bool attr_is_set(const AttrValue& value) {
  return !std::holds_alternative<std::monostate>(value);
}

// Human-readable rendering for messages and dumps: "None", "3", "0.5", "True", "[1, 2]".
std::string attr_to_string(const AttrValue& value);

}  // namespace cudnn_backend
