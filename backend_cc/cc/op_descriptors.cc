// Tensor and non-SDPA operation descriptors (see op_descriptors.h). Each builder follows the
// attribute list of its descriptor type in cudnn_graph.h.
#include "backend_cc/cc/op_descriptors.h"

#include "backend_cc/cc/composite.h"
#include "backend_cc/cc/enums.h"
#include "backend_cc/cc/errors.h"
#include "backend_cc/cc/op_primitives.h"
#include "backend_cc/cc/op_rules.h"

namespace cudnn_backend {

namespace {

// The classic binding aligns every tensor to 16 bytes; cuDNN needs the alignment to be a
// multiple of the element size.
int64_t byte_alignment(int64_t data_type) { return std::max<int64_t>(16, data_type_size(data_type)); }

// Scalar op parameters go in as DOUBLE for double compute and FLOAT otherwise.
void set_scalar(Descriptor& d, Attr attr, double value, int64_t compute) {
  if (compute == data_type::kDouble) {
    d.set_double(attr, value);
  } else {
    d.set_float(attr, static_cast<float>(value));
  }
}

const double* float_attr(const OpRecord& op, const char* name) {
  const AttrValue* v = op.attr(name);
  return v == nullptr ? nullptr : &std::get<double>(*v);
}

cudnnDataType_t compute_type(const GraphRecord& g, const OpRecord& op) {
  return op_compute_type(g, op);
}

Descriptor pointwise(const GraphRecord& g, const OpRecord& op, const TensorDescriptors& t,
                     std::vector<Descriptor>& keepalive) {
  PointwiseSettings settings;
  settings.mode = op.schema->pointwise_mode;
  settings.math_prec = compute_type(g, op);
  auto maybe = [&](const char* name) -> std::optional<double> {
    const double* v = float_attr(op, name);
    return v == nullptr ? std::nullopt : std::optional<double>(*v);
  };
  settings.lower_clip = maybe("lower_clip");
  settings.upper_clip = maybe("upper_clip");
  settings.negative_slope = maybe("negative_slope");
  settings.swish_beta = maybe("swish_beta");
  if (const AttrValue* axis = op.attr("axis")) settings.axis = std::get<int64_t>(*axis);
  // Ports in table order: x (or dY), b (or X), and binary_select's mask.
  const auto& ports = op.schema->inputs;
  const Descriptor* b = ports.size() > 1 ? &t.required_port(op, ports[1].name) : nullptr;
  const Descriptor* mask = ports.size() > 2 ? &t.required_port(op, ports[2].name) : nullptr;
  return pointwise_operation(settings, t.required_port(op, ports[0].name), b, mask,
                             t.at(op.output("OUT_0")), keepalive, op_context(op));
}

Descriptor matmul(const GraphRecord& g, const OpRecord& op, const TensorDescriptors& t,
                  std::vector<Descriptor>& keepalive) {
  const double* padding = float_attr(op, "padding");
  return matmul_operation(compute_type(g, op), padding == nullptr ? 0.0 : *padding,
                          t.required_port(op, "A"), t.required_port(op, "B"),
                          t.at(op.output("C")), keepalive, op_context(op));
}

Descriptor conv_operation(OpKind kind) {
  switch (kind) {
    case OpKind::kConvFprop:
      return BACKEND_DESCRIPTOR(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    case OpKind::kConvDgrad:
      return BACKEND_DESCRIPTOR(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR);
    default:
      return BACKEND_DESCRIPTOR(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR);
  }
}

Descriptor convolution(const GraphRecord& g, const OpRecord& op, const TensorDescriptors& t,
                       std::vector<Descriptor>& keepalive) {
  const char* layout_port = op.schema->kind == OpKind::kConvDgrad ? "loss" : "image";
  const size_t rank = g.tensor(op.input(layout_port)).dim.size();
  const ConvGeometry geo = conv_geometry(op, rank - 2);
  const EnumEntry* mode = find_frontend(EnumKind::kConvolutionMode, geo.mode);

  Descriptor conv = BACKEND_DESCRIPTOR(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  conv.set_context(op_context(op));
  conv.set_data_type(ATTR(CUDNN_ATTR_CONVOLUTION_COMP_TYPE), compute_type(g, op));
  conv.set_enum(ATTR(CUDNN_ATTR_CONVOLUTION_CONV_MODE), CUDNN_TYPE_CONVOLUTION_MODE,
                static_cast<int>(mode->cudnn));
  conv.set_int64(ATTR(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS), static_cast<int64_t>(rank - 2));
  conv.set_int64s(ATTR(CUDNN_ATTR_CONVOLUTION_DILATIONS), geo.dilation);
  conv.set_int64s(ATTR(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES), geo.stride);
  conv.set_int64s(ATTR(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS), geo.pre_padding);
  conv.set_int64s(ATTR(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS), geo.post_padding);
  conv.finalize();

  const int64_t compute = g.effective_compute_type(op);
  Descriptor d = conv_operation(op.schema->kind);
  d.set_context(op_context(op));
  switch (op.schema->kind) {
    case OpKind::kConvFprop:
      set_scalar(d, ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA), 1.0, compute);
      set_scalar(d, ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA), 0.0, compute);
      d.set_desc(ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC), conv);
      d.set_desc(ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X), t.required_port(op, "image"));
      d.set_desc(ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W), t.required_port(op, "weight"));
      d.set_desc(ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y), t.at(op.output("Y")));
      break;
    case OpKind::kConvDgrad:
      set_scalar(d, ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA), 1.0, compute);
      set_scalar(d, ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA), 0.0, compute);
      d.set_desc(ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC), conv);
      d.set_desc(ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY), t.required_port(op, "loss"));
      d.set_desc(ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W), t.required_port(op, "filter"));
      d.set_desc(ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX), t.at(op.output("DX")));
      break;
    default:  // kConvWgrad
      set_scalar(d, ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA), 1.0, compute);
      set_scalar(d, ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA), 0.0, compute);
      d.set_desc(ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC), conv);
      d.set_desc(ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X), t.required_port(op, "image"));
      d.set_desc(ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY), t.required_port(op, "loss"));
      d.set_desc(ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW), t.at(op.output("DW")));
      break;
  }
  d.finalize();
  keepalive.push_back(std::move(conv));
  return d;
}

Descriptor reduction(const GraphRecord& g, const OpRecord& op, const TensorDescriptors& t,
                     std::vector<Descriptor>& keepalive) {
  const int64_t mode = std::get<int64_t>(*op.attr("mode"));
  return reduction_operation(static_cast<int>(find_frontend(EnumKind::kReductionMode, mode)->cudnn),
                             compute_type(g, op), t.required_port(op, "input"),
                             t.at(op.output("OUT_0")), t.port(op, "group_offset"), keepalive,
                             op_context(op));
}

std::vector<const Descriptor*> peer_stats(const OpRecord& op, const TensorDescriptors& t) {
  std::vector<const Descriptor*> out;
  for (int index : op.list_input("peer_stats")) out.push_back(&t.at(index));
  return out;
}

Descriptor norm_forward(const OpRecord& op, const TensorDescriptors& t) {
  Descriptor d = BACKEND_DESCRIPTOR(CUDNN_BACKEND_OPERATION_NORM_FORWARD_DESCRIPTOR);
  d.set_context(op_context(op));
  d.set_enum(ATTR(CUDNN_ATTR_OPERATION_NORM_FWD_MODE), CUDNN_TYPE_NORM_MODE, op.schema->norm_mode);
  int phase = CUDNN_NORM_FWD_TRAINING;  // batchnorm has no phase argument: training only
  if (const AttrValue* p = op.attr("norm_forward_phase")) {
    phase = static_cast<int>(find_frontend(EnumKind::kNormForwardPhase, std::get<int64_t>(*p))->cudnn);
  }
  d.set_enum(ATTR(CUDNN_ATTR_OPERATION_NORM_FWD_PHASE), CUDNN_TYPE_NORM_FWD_PHASE, phase);
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_NORM_FWD_XDESC), t.required_port(op, "input"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_NORM_FWD_YDESC), t.at(op.output("Y")));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_NORM_FWD_EPSILON_DESC), t.required_port(op, "epsilon"));
  if (const Descriptor* s = t.port(op, "scale")) d.set_desc(ATTR(CUDNN_ATTR_OPERATION_NORM_FWD_SCALE_DESC), *s);
  if (const Descriptor* b = t.port(op, "bias")) d.set_desc(ATTR(CUDNN_ATTR_OPERATION_NORM_FWD_BIAS_DESC), *b);
  if (op.output("mean") >= 0) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_NORM_FWD_MEAN_DESC), t.at(op.output("mean")));
  }
  if (op.output("inv_var") >= 0) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_NORM_FWD_INV_VARIANCE_DESC), t.at(op.output("inv_var")));
  }
  if (const Descriptor* m = t.port(op, "in_running_mean")) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_NORM_FWD_INPUT_RUNNING_MEAN_DESC), *m);
  }
  if (const Descriptor* v = t.port(op, "in_running_var")) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_NORM_FWD_INPUT_RUNNING_VAR_DESC), *v);
  }
  if (op.output("next_running_mean") >= 0) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_NORM_FWD_OUTPUT_RUNNING_MEAN_DESC),
               t.at(op.output("next_running_mean")));
  }
  if (op.output("next_running_var") >= 0) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_NORM_FWD_OUTPUT_RUNNING_VAR_DESC),
               t.at(op.output("next_running_var")));
  }
  if (const Descriptor* momentum = t.port(op, "momentum")) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_NORM_FWD_EXP_AVG_FACTOR_DESC), *momentum);
  }
  if (const auto peers = peer_stats(op, t); !peers.empty()) {
    d.set_descs(ATTR(CUDNN_ATTR_OPERATION_NORM_FWD_PEER_STAT_DESCS), peers);
  }
  d.finalize();
  return d;
}

Descriptor norm_backward(const OpRecord& op, const TensorDescriptors& t) {
  Descriptor d = BACKEND_DESCRIPTOR(CUDNN_BACKEND_OPERATION_NORM_BACKWARD_DESCRIPTOR);
  d.set_context(op_context(op));
  d.set_enum(ATTR(CUDNN_ATTR_OPERATION_NORM_BWD_MODE), CUDNN_TYPE_NORM_MODE, op.schema->norm_mode);
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_NORM_BWD_XDESC), t.required_port(op, "input"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_NORM_BWD_DYDESC), t.required_port(op, "grad"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_NORM_BWD_DXDESC), t.at(op.output("DX")));
  if (const Descriptor* s = t.port(op, "scale")) d.set_desc(ATTR(CUDNN_ATTR_OPERATION_NORM_BWD_SCALE_DESC), *s);
  if (const Descriptor* m = t.port(op, "mean")) d.set_desc(ATTR(CUDNN_ATTR_OPERATION_NORM_BWD_MEAN_DESC), *m);
  if (const Descriptor* v = t.port(op, "inv_variance")) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_NORM_BWD_INV_VARIANCE_DESC), *v);
  }
  if (op.output("DScale") >= 0) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_NORM_BWD_DSCALE_DESC), t.at(op.output("DScale")));
  }
  if (op.output("DBias") >= 0) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_NORM_BWD_DBIAS_DESC), t.at(op.output("DBias")));
  }
  if (const auto peers = peer_stats(op, t); !peers.empty()) {
    d.set_descs(ATTR(CUDNN_ATTR_OPERATION_NORM_BWD_PEER_STAT_DESCS), peers);
  }
  d.finalize();
  return d;
}

Descriptor genstats(const GraphRecord& g, const OpRecord& op, const TensorDescriptors& t) {
  Descriptor d = BACKEND_DESCRIPTOR(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
  d.set_context(op_context(op));
  d.set_enum(ATTR(CUDNN_ATTR_OPERATION_GENSTATS_MODE), CUDNN_TYPE_GENSTATS_MODE,
             CUDNN_GENSTATS_SUM_SQSUM);
  d.set_data_type(ATTR(CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC), compute_type(g, op));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_GENSTATS_XDESC), t.required_port(op, "input"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC), t.at(op.output("SUM")));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC), t.at(op.output("SQ_SUM")));
  d.finalize();
  return d;
}

Descriptor reshape(const OpRecord& op, const TensorDescriptors& t) {
  // Only a non-default mode is sent, so a VIEW_ONLY reshape also runs on cuDNN < 9.22.
  int mode = -1;
  if (const AttrValue* m = op.attr("reshape_mode"); m != nullptr && std::get<int64_t>(*m) != 1) {
    mode = static_cast<int>(find_frontend(EnumKind::kReshapeMode, std::get<int64_t>(*m))->cudnn);
  }
  return reshape_operation(t.required_port(op, "input"), t.at(op.output("OUT_0")), mode,
                           op_context(op));
}

Descriptor concatenate(const OpRecord& op, const TensorDescriptors& t, const GraphRecord& g) {
  std::vector<const Descriptor*> inputs;
  const std::vector<int> indices = op.list_input("inputs");
  for (int index : indices) inputs.push_back(&t.at(index));
  int64_t axis = std::get<int64_t>(*op.attr("axis"));
  if (axis < 0) axis += static_cast<int64_t>(g.tensor(indices.front()).dim.size());
  Descriptor d = BACKEND_DESCRIPTOR(CUDNN_BACKEND_OPERATION_CONCAT_DESCRIPTOR);
  d.set_context(op_context(op));
  d.set_int64(ATTR(CUDNN_ATTR_OPERATION_CONCAT_AXIS), axis);
  d.set_descs(ATTR(CUDNN_ATTR_OPERATION_CONCAT_INPUT_DESCS), inputs);
  if (const AttrValue* in_place = op.attr("in_place_index")) {
    d.set_int64(ATTR(CUDNN_ATTR_OPERATION_CONCAT_INPLACE_INDEX), std::get<int64_t>(*in_place));
  }
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_CONCAT_OUTPUT_DESC), t.at(op.output("OUT_0")));
  d.finalize();
  return d;
}

}  // namespace

cudnnDataType_t op_compute_type(const GraphRecord& graph, const OpRecord& op) {
  return to_cudnn_data_type(graph.effective_compute_type(op), op_context(op) + " compute_data_type");
}

std::string op_context(const OpRecord& op) {
  return "op '" + op.name + "' (" + op.schema->method + ")";
}

void TensorDescriptors::add(int tensor, Descriptor descriptor) {
  by_tensor_.emplace(tensor, std::move(descriptor));
}

const Descriptor& TensorDescriptors::at(int tensor) const {
  const auto it = by_tensor_.find(tensor);
  if (it == by_tensor_.end()) {
    throw BackendError("internal: tensor index " + std::to_string(tensor) +
                       " has no descriptor");
  }
  return it->second;
}

const Descriptor* TensorDescriptors::port(const OpRecord& op, const char* name) const {
  const int t = op.input(name);
  return t < 0 ? nullptr : &at(t);
}

const Descriptor& TensorDescriptors::required_port(const OpRecord& op, const char* name) const {
  const Descriptor* d = port(op, name);
  if (d == nullptr) {
    throw BackendError("internal: " + op_context(op) + " has no tensor for port '" + name + "'");
  }
  return *d;
}

Descriptor build_tensor_descriptor(const GraphRecord& graph, int t, const TensorDescriptors& built,
                                   bool transposed) {
  const TensorRecord& r = graph.tensor(t);
  std::vector<int64_t> dim = r.dim, stride = r.stride;
  if (transposed) {
    std::swap(dim[dim.size() - 1], dim[dim.size() - 2]);
    std::swap(stride[stride.size() - 1], stride[stride.size() - 2]);
  }
  Descriptor d = BACKEND_DESCRIPTOR(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  d.set_context("tensor " + graph.describe_tensor(t));
  d.set_int64(ATTR(CUDNN_ATTR_TENSOR_UNIQUE_ID), r.uid);
  d.set_data_type(ATTR(CUDNN_ATTR_TENSOR_DATA_TYPE),
                  to_cudnn_data_type(r.data_type, "tensor " + graph.describe_tensor(t)));
  d.set_int64(ATTR(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT), byte_alignment(r.data_type));
  d.set_int64s(ATTR(CUDNN_ATTR_TENSOR_DIMENSIONS), dim);
  d.set_int64s(ATTR(CUDNN_ATTR_TENSOR_STRIDES), stride);
  d.set_bool(ATTR(CUDNN_ATTR_TENSOR_IS_VIRTUAL), r.is_virtual);
  if (r.is_pass_by_value) d.set_bool(ATTR(CUDNN_ATTR_TENSOR_IS_BY_VALUE), true);
  if (r.reordering != 0) {
    const EnumEntry* entry = find_frontend(EnumKind::kTensorReordering, r.reordering);
    if (entry == nullptr || entry->cudnn < 0) {
      throw GraphNotSupported("tensor " + graph.describe_tensor(t) + ": reordering " +
                              enum_value_name(EnumKind::kTensorReordering, r.reordering) +
                              " is not available in these cuDNN headers");
    }
    d.set_enum(ATTR(CUDNN_ATTR_TENSOR_REORDERING_MODE), CUDNN_TYPE_TENSOR_REORDERING_MODE,
               static_cast<int>(entry->cudnn));
  }
  if (r.ragged_offset >= 0) {
    d.set_desc(ATTR(CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC), built.at(r.ragged_offset));
  }
  d.finalize();
  return d;
}

namespace {

Descriptor build_single(const GraphRecord& graph, const OpRecord& op,
                        const TensorDescriptors& tensors, std::vector<Descriptor>& keepalive) {
  switch (op.schema->kind) {
    case OpKind::kPointwise: return pointwise(graph, op, tensors, keepalive);
    case OpKind::kMatmul: return matmul(graph, op, tensors, keepalive);
    case OpKind::kConvFprop:
    case OpKind::kConvDgrad:
    case OpKind::kConvWgrad: return convolution(graph, op, tensors, keepalive);
    case OpKind::kReduction: return reduction(graph, op, tensors, keepalive);
    case OpKind::kNormForward: return norm_forward(op, tensors);
    case OpKind::kNormBackward: return norm_backward(op, tensors);
    case OpKind::kGenStats: return genstats(graph, op, tensors);
    case OpKind::kReshape: return reshape(op, tensors);
    case OpKind::kConcatenate: return concatenate(op, tensors, graph);
    case OpKind::kSdpaForward: return build_sdpa_forward(graph, op, tensors);
    case OpKind::kSdpaBackward: return build_sdpa_backward(graph, op, tensors);
    case OpKind::kBlockScaleQuantize: return build_block_scale_quantize(graph, op, tensors);
    case OpKind::kBlockScaleDequantize: return build_block_scale_dequantize(graph, op, tensors);
    case OpKind::kMoeGroupedMatmul: return build_moe_grouped_matmul(graph, op, tensors);
    case OpKind::kMoeGroupedMatmulBwd: return build_moe_grouped_matmul_bwd(graph, op, tensors);
    case OpKind::kSlice: return build_slice(graph, op, tensors);
    case OpKind::kTranspose: return build_transpose(graph, op, tensors);
    case OpKind::kRope:
    case OpKind::kRopeBackward: return build_rope(op, tensors);
    default: break;  // composite kinds, and kinds that never record (no_lowering)
  }
  throw BackendError("internal: " + op_context(op) + " has no descriptor builder");
}

}  // namespace

void build_op_descriptors(const GraphRecord& graph, const OpRecord& op,
                          const TensorDescriptors& tensors, std::vector<Descriptor>& keepalive,
                          std::vector<Descriptor>& ops) {
  if (is_composite(op.schema->kind)) {
    build_composite(graph, op, tensors, keepalive, ops);
    return;
  }
  ops.push_back(build_single(graph, op, tensors, keepalive));
}

}  // namespace cudnn_backend
