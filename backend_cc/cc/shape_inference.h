// Output dims and strides the backend graph infers for op outputs the caller did not lay
// out. Python pushes only caller-set layouts; everything else is inferred here and can be
// read back after build_operation_graph() (docs/GRAPH_IR.md §2, "user vs inferred").
//
// Dims follow the IR rules of docs/GRAPH_IR.md per op. Strides keep the axis order of the
// op's layout-defining input (so an NHWC image gives an NHWC output), packed; outputs with
// no such input are row-major.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backend_cc/cc/graph_record.h"

namespace cudnn_backend {

// nullopt when the op cannot infer this output (reduction, reshape, conv_wgrad, ...).
std::optional<std::vector<int64_t>> infer_output_dim(const OpRecord& op, const std::string& port,
                                                     const GraphRecord& graph);

std::vector<int64_t> infer_output_stride(const OpRecord& op, const std::string& port,
                                         const std::vector<int64_t>& dim,
                                         const GraphRecord& graph);

// Packed strides for `dim` whose axes are ordered like `reference` (outermost = largest
// reference stride). Ties keep the lower axis outermost.
std::vector<int64_t> strides_like(const std::vector<int64_t>& dim,
                                  const std::vector<int64_t>& reference);

}  // namespace cudnn_backend
