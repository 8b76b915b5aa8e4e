// Composite ops (see composite.h): dispatch, batchnorm_inference, and the ports described
// transposed.
#include "backend_cc/cc/composite.h"

#include <cudnn_graph.h>

#include "backend_cc/cc/enums.h"
#include "backend_cc/cc/errors.h"

namespace cudnn_backend {

namespace {

// Y = (input - mean) * inv_variance * scale + bias: the four pointwise operations cuDNN's
// pointwise fusion runs as one kernel. Intermediates keep the input's layout (the fusion
// engine wants every operand in one packed order) and FLOAT precision.
void expand_batchnorm_inference(const OpRecord& op, const GraphRecord& g, CompositeSink& sink) {
  const TensorRecord& x = g.tensor(op.input("input"));
  const InternalLayout like_x{x.dim, x.stride, data_type::kFloat};
  const int centered = sink.internal("centered", like_x);
  const int normalized = sink.internal("normalized", like_x);
  const int scaled = sink.internal("scaled", like_x);
  sink.pointwise(CUDNN_POINTWISE_SUB, op.input("input"), op.input("mean"), centered);
  sink.pointwise(CUDNN_POINTWISE_MUL, centered, op.input("inv_variance"), normalized);
  sink.pointwise(CUDNN_POINTWISE_MUL, normalized, op.input("scale"), scaled);
  sink.pointwise(CUDNN_POINTWISE_ADD, scaled, op.input("bias"), op.output("Y"));
}

}  // namespace

bool is_composite(OpKind kind) {
  switch (kind) {
    case OpKind::kBatchnormInference:
    case OpKind::kSdpaFp8Forward:
    case OpKind::kSdpaFp8Backward: return true;
    default: return false;
  }
}

void expand_composite(const OpRecord& op, const GraphRecord& graph, CompositeSink& sink,
                      bool strict) {
  switch (op.schema->kind) {
    case OpKind::kBatchnormInference: return expand_batchnorm_inference(op, graph, sink);
    case OpKind::kSdpaFp8Forward: return expand_sdpa_fp8_forward(op, graph, sink, strict);
    case OpKind::kSdpaFp8Backward: return expand_sdpa_fp8_backward(op, graph, sink, strict);
    default:
      throw BackendError("internal: " + std::string(op.schema->method) + " is not a composite");
  }
}

std::vector<std::string> transposed_inputs(const OpRecord& op) {
  switch (op.schema->kind) {
    case OpKind::kSdpaFp8Forward: return {"k"};         // S = Q K^T
    case OpKind::kSdpaFp8Backward: return {"k", "v"};   // S = Q K^T, dP = dO V^T
    default: return {};
  }
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

}  // namespace cudnn_backend
