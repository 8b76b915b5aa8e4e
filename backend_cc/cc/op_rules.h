// Cross-argument rules of individual op kinds, checked when an op is recorded (after the
// generic port/attribute checks of the op table). Raises ArgumentValueError for bad calls
// and GraphNotSupported for combinations the cuDNN descriptors cannot express.
#pragma once

#include "backend_cc/cc/graph_record.h"

namespace cudnn_backend {

void check_op_rules(const OpRecord& op, const GraphRecord& graph);

// Why `op` must not reach the loaded cuDNN (`loaded_version`, cudnnGetVersion units): a
// combination that cuDNN accepts but that was seen to fault on a GPU, so a refusal beats a
// poisoned CUDA context. Empty when none applies. Checked when descriptors are built.
std::string known_runtime_fault(const OpRecord& op, int64_t loaded_version);

// Convolution geometry resolved from the recorded attributes for `spatial` dimensions:
// pre/post padding fall back to `padding`, then 0; stride and dilation default to 1.
struct ConvGeometry {
  std::vector<int64_t> pre_padding, post_padding, stride, dilation;
  int64_t mode = 2;  // frontend convolution_mode (CROSS_CORRELATION)
};
ConvGeometry conv_geometry(const OpRecord& op, size_t spatial);

// One axis of a slice resolved against the input extent with Python's slice.indices rules
// (positive steps only); `extent` = number of elements taken.
struct SliceAxis {
  int64_t start = 0, stop = 0, step = 1, extent = 0;
};
// Every axis of `input_dims` (axes past the given slices are taken whole). Raises
// ArgumentValueError for more slices than axes or an empty result.
std::vector<SliceAxis> resolve_slices(const OpRecord& op, const std::vector<int64_t>& input_dims);

// The transpose permutation, checked against the input rank (ArgumentValueError).
std::vector<int64_t> checked_permutation(const OpRecord& op, size_t rank);

// The blocked axis of block_scale_quantize (`axis`, default and -1 = the last).
size_t quantize_axis(const OpRecord& op, size_t rank);

}  // namespace cudnn_backend
