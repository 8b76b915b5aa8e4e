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
// `built`). `transposed`: described with its last two axes swapped, the same memory seen
// transposed (the K^T / V^T inputs of composite ops, composite.h).
Descriptor build_tensor_descriptor(const GraphRecord& graph, int t, const TensorDescriptors& built,
                                   bool transposed = false);

// Appends the finalized operation descriptor(s) of `op` to `ops`: one, or one per step of a
// composite op. Auxiliary descriptors the operations refer to (pointwise/matmul/convolution/
// reduction settings) are appended to `keepalive`, which must outlive them.
void build_op_descriptors(const GraphRecord& graph, const OpRecord& op,
                          const TensorDescriptors& tensors, std::vector<Descriptor>& keepalive,
                          std::vector<Descriptor>& ops);

// Defined in composite_descriptors.cc: the steps of a composite op.
void build_composite(const GraphRecord& graph, const OpRecord& op,
                     const TensorDescriptors& tensors, std::vector<Descriptor>& keepalive,
                     std::vector<Descriptor>& ops);

// Defined in quantize_moe_descriptors.cc.
Descriptor build_block_scale_quantize(const GraphRecord& graph, const OpRecord& op,
                                      const TensorDescriptors& tensors);
Descriptor build_block_scale_dequantize(const GraphRecord& graph, const OpRecord& op,
                                        const TensorDescriptors& tensors);
Descriptor build_moe_grouped_matmul(const GraphRecord& graph, const OpRecord& op,
                                    const TensorDescriptors& tensors);
Descriptor build_moe_grouped_matmul_bwd(const GraphRecord& graph, const OpRecord& op,
                                        const TensorDescriptors& tensors);

// Defined in slice_transpose_rope_descriptors.cc.
Descriptor build_slice(const GraphRecord& graph, const OpRecord& op,
                       const TensorDescriptors& tensors);
Descriptor build_transpose(const GraphRecord& graph, const OpRecord& op,
                           const TensorDescriptors& tensors);
Descriptor build_rope(const OpRecord& op, const TensorDescriptors& tensors);

// The compute type of `op` as a cuDNN data type (its own, else the graph's, else FLOAT).
cudnnDataType_t op_compute_type(const GraphRecord& graph, const OpRecord& op);

// Defined in sdpa_descriptors.cc.
Descriptor build_sdpa_forward(const GraphRecord& graph, const OpRecord& op,
                              const TensorDescriptors& tensors);
Descriptor build_sdpa_backward(const GraphRecord& graph, const OpRecord& op,
                               const TensorDescriptors& tensors);

// "op 'matmul.0' (matmul)", the context string attached to an op's descriptors.
std::string op_context(const OpRecord& op);

}  // namespace cudnn_backend
