// Block-scale quantize/dequantize and MoE grouped matmul through their native descriptors:
//   CUDNN_BACKEND_OPERATION_BLOCK_SCALE_{QUANTIZE,DEQUANTIZE}_DESCRIPTOR (cuDNN 9.7; the
//   dequantize NEG_SCALE attribute 9.13), CUDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_DESCRIPTOR
//   (9.15 headers) and its _BWD_ weight-gradient descriptor (9.22).
// Each builder compiles only where the build headers define its descriptor; elsewhere the op
// table has already declined the op (OpSchema::missing_from_headers), so reaching the #else
// branch is a bug.
#include <cudnn_graph.h>

#include "backend_cc/cc/enums.h"
#include "backend_cc/cc/errors.h"
#include "backend_cc/cc/op_descriptors.h"

namespace cudnn_backend {

namespace {

[[maybe_unused]] [[noreturn]] void missing(const OpRecord& op) {
  throw BackendError("internal: " + op_context(op) + " reached a descriptor these cuDNN "
                     "headers lack; the op table should have declined it");
}

std::vector<int32_t> block_sizes(const OpRecord& op) {
  const AttrValue& v = *op.attr("block_size");
  if (const auto* one = std::get_if<int64_t>(&v)) return {static_cast<int32_t>(*one)};
  std::vector<int32_t> out;
  for (int64_t b : std::get<std::vector<int64_t>>(v)) out.push_back(static_cast<int32_t>(b));
  return out;
}

}  // namespace

Descriptor build_block_scale_quantize(const GraphRecord& g, const OpRecord& op,
                                      const TensorDescriptors& t) {
#if CUDNN_VERSION >= 90700
  Descriptor d = BACKEND_DESCRIPTOR(CUDNN_BACKEND_OPERATION_BLOCK_SCALE_QUANTIZE_DESCRIPTOR);
  d.set_context(op_context(op));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_XDESC), t.required_port(op, "input"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_YDESC), t.at(op.output("Y")));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_SCALE_DESC), t.at(op.output("scale")));
  d.set_data_type(ATTR(CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_MATH_PREC), op_compute_type(g, op));
  d.set_int32s(ATTR(CUDNN_ATTR_OPERATION_BLOCK_SCALE_QUANTIZE_BLOCK_SIZE), block_sizes(op));
  d.finalize();
  return d;
#else
  missing(op);
#endif
}

Descriptor build_block_scale_dequantize(const GraphRecord& g, const OpRecord& op,
                                        const TensorDescriptors& t) {
#if CUDNN_VERSION >= 90700
  Descriptor d = BACKEND_DESCRIPTOR(CUDNN_BACKEND_OPERATION_BLOCK_SCALE_DEQUANTIZE_DESCRIPTOR);
  d.set_context(op_context(op));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_XDESC), t.required_port(op, "input"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_SCALE_DESC),
             t.required_port(op, "descale"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_YDESC), t.at(op.output("OUT_0")));
  d.set_data_type(ATTR(CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_MATH_PREC),
                  op_compute_type(g, op));
  d.set_int32s(ATTR(CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_BLOCK_SIZE), block_sizes(op));
#if CUDNN_VERSION >= 91300
  // Sent only when asked for, so that libraries older than the attribute still take the op
  // (the op table declines is_negative_scale=True below 9.13).
  if (const AttrValue* neg = op.attr("is_negative_scale"); neg != nullptr && std::get<bool>(*neg)) {
    d.set_bool(ATTR(CUDNN_ATTR_OPERATION_BLOCK_SCALE_DEQUANTIZE_NEG_SCALE), true);
  }
#endif
  d.finalize();
  return d;
#else
  missing(op);
#endif
}

Descriptor build_moe_grouped_matmul(const GraphRecord& g, const OpRecord& op,
                                    const TensorDescriptors& t) {
#if CUDNN_VERSION >= 91500
  const AttrValue* mode_attr = op.attr("mode");
  const int64_t mode = mode_attr == nullptr ? 1 : std::get<int64_t>(*mode_attr);  // NONE = 1
  Descriptor d = BACKEND_DESCRIPTOR(CUDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_DESCRIPTOR);
  d.set_context(op_context(op));
  d.set_enum(ATTR(CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_MODE), CUDNN_TYPE_MOE_GROUPED_MATMUL_MODE,
             static_cast<int>(find_frontend(EnumKind::kMoeGroupedMatmulMode, mode)->cudnn));
  d.set_data_type(ATTR(CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_MATH_PREC), op_compute_type(g, op));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_TOKEN_DESC), t.required_port(op, "token"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_WEIGHT_DESC),
             t.required_port(op, "weight"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_FIRST_TOKEN_OFFSET_DESC),
             t.required_port(op, "first_token_offset"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_OUTPUT_DESC), t.at(op.output("OUT_0")));
  // op_rules.cc made sure the routing tensors come exactly with the modes that read them.
  if (const Descriptor* index = t.port(op, "token_index")) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_TOKEN_INDEX_DESC), *index);
  }
  if (const Descriptor* ks = t.port(op, "token_ks")) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_TOKEN_KS_DESC), *ks);
    const int32_t top_k = static_cast<int32_t>(std::get<int64_t>(*op.attr("top_k")));
    d.set_int32s(ATTR(CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_TOP_K), {top_k});
  }
  d.finalize();
  return d;
#else
  missing(op);
#endif
}

Descriptor build_moe_grouped_matmul_bwd(const GraphRecord& g, const OpRecord& op,
                                        const TensorDescriptors& t) {
#if CUDNN_VERSION >= 92200
  Descriptor d = BACKEND_DESCRIPTOR(CUDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_BWD_DESCRIPTOR);
  d.set_context(op_context(op));
  d.set_data_type(ATTR(CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_BWD_MATH_PREC),
                  op_compute_type(g, op));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_BWD_DOUTPUT_DESC),
             t.required_port(op, "doutput"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_BWD_TOKEN_DESC),
             t.required_port(op, "token"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_BWD_FIRST_TOKEN_OFFSET_DESC),
             t.required_port(op, "first_token_offset"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_MOE_GROUPED_MATMUL_BWD_DWEIGHT_DESC),
             t.at(op.output("dweight")));
  d.finalize();
  return d;
#else
  missing(op);
#endif
}

}  // namespace cudnn_backend
