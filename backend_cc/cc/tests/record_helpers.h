// Helpers the recording-layer tests share: an op call from its ports and attributes, and a
// row of the op table by method name.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "backend_cc/cc/graph_record.h"
#include "backend_cc/cc/op_schema.h"
#include "backend_cc/cc/tests/check.h"

namespace cudnn_backend::testing {

inline OpCall call(std::vector<PortBinding> inputs,
                   std::vector<std::pair<std::string, AttrValue>> attrs = {}) {
  OpCall c;
  c.inputs = std::move(inputs);
  c.attrs = std::move(attrs);
  return c;
}

inline const OpSchema& schema(const char* method) {
  const OpSchema* s = find_op_schema(method);
  CHECK(s != nullptr);
  return *s;
}

}  // namespace cudnn_backend::testing
