// Finalized operation descriptors built from their operand descriptors: the pointwise,
// matmul, reduction and reshape operations that both the recorded op kinds
// (op_descriptors.cc) and the steps of composite ops (composite_descriptors.cc) lower to.
// Each appends the auxiliary descriptor it needs (pointwise/matmul/reduction settings) to
// `keepalive`, which must outlive the returned operation.
#pragma once

#include <cudnn_graph.h>

#include <optional>
#include <string>
#include <vector>

#include "backend_cc/cc/descriptor.h"

namespace cudnn_backend {

struct PointwiseSettings {
  int mode = CUDNN_POINTWISE_IDENTITY;  // cudnnPointwiseMode_t
  cudnnDataType_t math_prec = CUDNN_DATA_FLOAT;
  std::optional<double> lower_clip, upper_clip, negative_slope, swish_beta;
  std::optional<int64_t> axis;
};

// Forward modes: y = mode(x[, b[, t]]). Backward modes (RELU_BWD, ...): `x` is dY, `b` is X
// and `y` is dX.
Descriptor pointwise_operation(const PointwiseSettings& settings, const Descriptor& x,
                               const Descriptor* b, const Descriptor* t, const Descriptor& y,
                               std::vector<Descriptor>& keepalive, const std::string& context);

Descriptor matmul_operation(cudnnDataType_t comp_type, double padding, const Descriptor& a,
                            const Descriptor& b, const Descriptor& c,
                            std::vector<Descriptor>& keepalive, const std::string& context);

// `mode` is a cudnnReduceTensorOp_t; `group_offset` (grouped reduction, 9.24) may be null.
Descriptor reduction_operation(int mode, cudnnDataType_t comp_type, const Descriptor& x,
                               const Descriptor& y, const Descriptor* group_offset,
                               std::vector<Descriptor>& keepalive, const std::string& context);

// `mode` is a cudnnReshapeMode_t (9.22 headers) or -1 to leave the default (a view).
Descriptor reshape_operation(const Descriptor& x, const Descriptor& y, int mode,
                             const std::string& context);

}  // namespace cudnn_backend
