// Composite ops: one recorded op that cuDNN sees as several operations (pointwise, matmul,
// reduction, view-only reshape) joined by internal virtual tensors. Used where cuDNN has no
// single descriptor for the op but runs the whole graph as one fused pattern:
//   batchnorm_inference  Y = (input - mean) * inv_variance * scale + bias
//   sdpa_fp8[_backward]  cuDNN's FP8 fused-attention graphs (sdpa_fp8_composite.cc)
//
// Each expansion is written once, against CompositeSink, and replayed three times: when the
// op is recorded (to create its internal tensors, which Python then gives uids like any op
// output: the graph never invents one), at validate() (to lay them out) and when the
// descriptors are built. The replays see the same ports and attributes, so they create the
// same internal tensors in the same order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend_cc/cc/graph_record.h"

namespace cudnn_backend {

bool is_composite(OpKind kind);

struct InternalLayout {
  std::vector<int64_t> dim;
  std::vector<int64_t> stride;  // empty = packed row-major
  int64_t data_type = 0;        // frontend data_type
};

class CompositeSink {
 public:
  virtual ~CompositeSink() = default;
  // Graph tensor index of the expansion's next internal tensor (`<op>::<name>`).
  virtual int internal(const std::string& name, const InternalLayout& layout) = 0;
  // Steps. Modes are cudnnPointwiseMode_t / cudnnReduceTensorOp_t values; `b` < 0 for a
  // unary pointwise. Every step computes in FLOAT.
  virtual void pointwise(int mode, int x, int b, int y) = 0;
  virtual void matmul(int a, int b, int c) = 0;
  virtual void reduction(int mode, int x, int y) = 0;
  virtual void reshape(int x, int y) = 0;
};

// Replays `op`'s expansion into `sink`. `strict` = false only while the op is recorded, when
// inputs made by earlier ops may not have dims yet (layouts are then placeholders that the
// recording sink ignores); otherwise a shape the expansion cannot take raises
// ArgumentValueError.
void expand_composite(const OpRecord& op, const GraphRecord& graph, CompositeSink& sink,
                      bool strict);

// Input ports whose tensor the composite describes with its last two axes swapped: the same
// memory seen as K^T / V^T, as cuDNN's fused-attention patterns read them. Such a tensor must
// be a graph input that nothing else in the graph uses (validate() checks).
std::vector<std::string> transposed_inputs(const OpRecord& op);

// "[4, 64, 1]" for messages.
std::string dims_text(const std::vector<int64_t>& dims);

// Defined in sdpa_fp8_composite.cc.
void expand_sdpa_fp8_forward(const OpRecord& op, const GraphRecord& graph, CompositeSink& sink,
                             bool strict);
void expand_sdpa_fp8_backward(const OpRecord& op, const GraphRecord& graph,
                              CompositeSink& sink, bool strict);

}  // namespace cudnn_backend
