// Materialization of a recorded graph into finalized cuDNN backend descriptors: one tensor
// descriptor per tensor an op touches, then one operation descriptor per recorded op.
// Requires a loaded libcudnn. SDPA lives in sdpa_descriptors.cc.
#pragma once

#include <map>
#include <vector>

#include "backend_cc/cc/descriptor.h"
#include "backend_cc/cc/graph_record.h"

namespace cudnn_backend {

// Finalized tensor descriptors of a graph, addressed by tensor index.
class TensorDescriptors {
 public:
  void add(int tensor, Descriptor descriptor);
  const Descriptor& at(int tensor) const;
  // nullptr when the op did not bind the port.
  const Descriptor* port(const OpRecord& op, const char* name) const;
  const Descriptor& required_port(const OpRecord& op, const char* name) const;

 private:
  std::map<int, Descriptor> by_tensor_;
};

// Builds the finalized descriptor of tensor `t` (its ragged offset must already be in
// `built`).
Descriptor build_tensor_descriptor(const GraphRecord& graph, int t, const TensorDescriptors& built);

// Builds the finalized operation descriptor of `op`. Auxiliary descriptors the operation
// refers to (pointwise/matmul/convolution/reduction settings) are appended to `keepalive`,
// which must outlive the returned descriptor.
Descriptor build_op_descriptor(const GraphRecord& graph, const OpRecord& op,
                               const TensorDescriptors& tensors,
                               std::vector<Descriptor>& keepalive);

// Defined in sdpa_descriptors.cc.
Descriptor build_sdpa_forward(const GraphRecord& graph, const OpRecord& op,
                              const TensorDescriptors& tensors);
Descriptor build_sdpa_backward(const GraphRecord& graph, const OpRecord& op,
                               const TensorDescriptors& tensors);

// "op 'matmul.0' (matmul)", the context string attached to an op's descriptors.
std::string op_context(const OpRecord& op);

}  // namespace cudnn_backend
