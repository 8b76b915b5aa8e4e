// The record's side of composite ops (composite.h): creating their internal tensors when the
// op is recorded, laying them out at validate(), and the inputs they describe transposed.
#include <cudnn_graph.h>

#include "backend_cc/cc/composite.h"
#include "backend_cc/cc/errors.h"
#include "backend_cc/cc/graph_record.h"
#include "backend_cc/cc/shape_inference.h"

namespace cudnn_backend {

namespace {

// Ignores the steps: recording and layout only care about internal tensors.
class TensorsOnly : public CompositeSink {
 public:
  void pointwise(int, int, int, int) override {}
  void matmul(int, int, int) override {}
  void reduction(int, int, int) override {}
  void reshape(int, int) override {}
};

// When the op is recorded: one virtual, uid-less tensor per internal (Python pushes uids).
class Creator : public TensorsOnly {
 public:
  Creator(OpRecord& op, int op_index, std::vector<TensorRecord>& tensors)
      : op_(op), op_index_(op_index), tensors_(tensors) {}

  int internal(const std::string& name, const InternalLayout&) override {
    TensorRecord r;
    r.name = op_.name + "::" + name;
    r.is_virtual = true;
    r.internal = true;
    r.producer = op_index_;
    r.producer_port = name;
    tensors_.push_back(std::move(r));
    const int t = static_cast<int>(tensors_.size()) - 1;
    op_.internals.emplace_back(name, t);
    return t;
  }

 private:
  OpRecord& op_;
  int op_index_;
  std::vector<TensorRecord>& tensors_;
};

// At validate(): the n-th internal gets the n-th layout of the replay.
class LayoutWriter : public TensorsOnly {
 public:
  LayoutWriter(const OpRecord& op, std::vector<TensorRecord>& tensors)
      : op_(op), tensors_(tensors) {}

  int internal(const std::string& name, const InternalLayout& layout) override {
    if (next_ >= op_.internals.size() || op_.internals[next_].first != name) {
      throw BackendError("internal: op '" + op_.name + "' replayed internal tensor '" + name +
                         "' out of the order it was recorded in");
    }
    const int t = op_.internals[next_++].second;
    TensorRecord& r = tensors_[t];
    r.dim = layout.dim;
    r.stride = layout.stride.empty() ? strides_like(layout.dim, {}) : layout.stride;
    r.data_type = layout.data_type;
    r.data_type_assigned = layout.data_type != 0;
    return t;
  }

  void finish() const {
    if (next_ != op_.internals.size()) {
      throw BackendError("internal: op '" + op_.name + "' replayed fewer internal tensors than "
                         "it recorded");
    }
  }

 private:
  const OpRecord& op_;
  std::vector<TensorRecord>& tensors_;
  size_t next_ = 0;
};

}  // namespace

void GraphRecord::create_internals(OpRecord& op) {
  Creator creator(op, static_cast<int>(ops_.size()), tensors_);
  expand_composite(op, *this, creator, /*strict=*/false);
}

void GraphRecord::layout_internals() {
  for (const OpRecord& op : ops_) {
    if (!is_composite(op.schema->kind)) continue;
    LayoutWriter writer(op, tensors_);
    expand_composite(op, *this, writer, /*strict=*/true);
    writer.finish();
  }
}

std::set<int> GraphRecord::transposed_tensors() const {
  std::set<int> out;
  for (const OpRecord& op : ops_) {
    for (const std::string& port : transposed_inputs(op)) out.insert(op.input(port));
  }
  return out;
}

void GraphRecord::check_transposed_inputs() const {
  std::map<int, int> uses;  // tensor -> number of op ports reading it
  for (const OpRecord& op : ops_) {
    for (const auto& binding : op.inputs) ++uses[binding.second];
  }
  for (const OpRecord& op : ops_) {
    for (const std::string& port : transposed_inputs(op)) {
      const int t = op.input(port);
      const std::string where = std::string(op.schema->method) + " '" + op.name + "': " + port +
                                " (tensor " + describe_tensor(t) + ")";
      const std::string why = " cuDNN's fused-attention pattern reads it transposed, which "
                              "this backend describes over the tensor's own memory";
      if (tensors_[t].producer >= 0) {
        throw GraphNotSupported(where + " must be a graph input, not an op output:" + why);
      }
      if (uses[t] > 1) {
        throw GraphNotSupported(where + " must not be read by any other op or port:" + why);
      }
    }
  }
}

}  // namespace cudnn_backend
