// Rendering of AttrValue (see attr_value.h).
#include "backend_cc/cc/attr_value.h"

#include <sstream>

namespace cudnn_backend {

std::string attr_to_string(const AttrValue& value) {
  struct Render {
    std::string operator()(std::monostate) const { return "None"; }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const {
      std::ostringstream os;
      os << v;
      return os.str();
    }
    std::string operator()(bool v) const { return v ? "True" : "False"; }
    std::string operator()(const std::vector<int64_t>& v) const {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
      return out + "]";
    }
  };
  return std::visit(Render{}, value);
}

}  // namespace cudnn_backend
