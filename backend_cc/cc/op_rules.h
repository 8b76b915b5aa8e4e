// Cross-argument rules of individual op kinds, checked when an op is recorded (after the
// generic port/attribute checks of the op table). Raises ArgumentValueError for bad calls
// and GraphNotSupported for combinations the cuDNN descriptors cannot express.
#pragma once

#include "backend_cc/cc/graph_record.h"

namespace cudnn_backend {

void check_op_rules(const OpRecord& op, const GraphRecord& graph);

// Convolution geometry resolved from the recorded attributes for `spatial` dimensions:
// pre/post padding fall back to `padding`, then 0; stride and dilation default to 1.
struct ConvGeometry {
  std::vector<int64_t> pre_padding, post_padding, stride, dilation;
  int64_t mode = 2;  // frontend convolution_mode (CROSS_CORRELATION)
};
ConvGeometry conv_geometry(const OpRecord& op, size_t spatial);

}  // namespace cudnn_backend
