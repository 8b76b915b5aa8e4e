// The descriptors of a composite op (composite.h): its expansion replayed once more, each
// step becoming a finalized operation descriptor over the tensor descriptors already built
// (internal tensors included). Every step computes in FLOAT.
#include <cudnn_graph.h>

#include "backend_cc/cc/composite.h"
#include "backend_cc/cc/errors.h"
#include "backend_cc/cc/op_descriptors.h"
#include "backend_cc/cc/op_primitives.h"

namespace cudnn_backend {

namespace {

class DescriptorBuilder : public CompositeSink {
 public:
  DescriptorBuilder(const OpRecord& op, const TensorDescriptors& tensors,
                    std::vector<Descriptor>& keepalive, std::vector<Descriptor>& ops)
      : op_(op), t_(tensors), keepalive_(keepalive), ops_(ops), context_(op_context(op)) {}

  int internal(const std::string& name, const InternalLayout&) override {
    if (next_ >= op_.internals.size() || op_.internals[next_].first != name) {
      throw BackendError("internal: " + context_ + " replayed internal tensor '" + name +
                         "' out of the order it was recorded in");
    }
    return op_.internals[next_++].second;
  }

  void pointwise(int mode, int x, int b, int y) override {
    PointwiseSettings settings;
    settings.mode = mode;
    ops_.push_back(pointwise_operation(settings, t_.at(x), b < 0 ? nullptr : &t_.at(b), nullptr,
                                       t_.at(y), keepalive_, step_context()));
  }

  void matmul(int a, int b, int c) override {
    ops_.push_back(matmul_operation(CUDNN_DATA_FLOAT, 0.0, t_.at(a), t_.at(b), t_.at(c),
                                    keepalive_, step_context()));
  }

  void reduction(int mode, int x, int y) override {
    ops_.push_back(reduction_operation(mode, CUDNN_DATA_FLOAT, t_.at(x), t_.at(y), nullptr,
                                       keepalive_, step_context()));
  }

  void reshape(int x, int y) override {
    ops_.push_back(reshape_operation(t_.at(x), t_.at(y), -1, step_context()));
  }

 private:
  std::string step_context() const {
    return context_ + ", step " + std::to_string(ops_.size() - first_);
  }

  const OpRecord& op_;
  const TensorDescriptors& t_;
  std::vector<Descriptor>& keepalive_;
  std::vector<Descriptor>& ops_;
  const std::string context_;
  const size_t first_ = ops_.size();
  size_t next_ = 0;
};

}  // namespace

void build_composite(const GraphRecord& graph, const OpRecord& op,
                     const TensorDescriptors& tensors, std::vector<Descriptor>& keepalive,
                     std::vector<Descriptor>& ops) {
  DescriptorBuilder builder(op, tensors, keepalive, ops);
  expand_composite(op, graph, builder, /*strict=*/true);
}

}  // namespace cudnn_backend
