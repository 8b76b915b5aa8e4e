// The op table (see op_schema.h). Port and attribute names follow docs/GRAPH_IR.md
// sections 1-5 exactly; the cuDNN descriptor each kind lowers to is noted per group.
#include "backend_cc/cc/op_schema.h"

#include <cudnn_graph.h>

#include <algorithm>

#include "backend_cc/cc/op_schema_rows.h"

namespace cudnn_backend {

namespace {

using namespace rows;  // NOLINT: the row constructors read as a table

// --- Pointwise: CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR ---------------------------------

OpSchema pointwise(const char* method, cudnnPointwiseMode_t mode,
                   std::vector<const char*> ports, std::vector<AttrSpec> attrs = {}) {
  OpSchema s{method, OpKind::kPointwise};
  for (const char* p : ports) s.inputs.push_back(in(p));
  s.outputs = {out("OUT_0")};
  s.attrs = std::move(attrs);
  s.pointwise_mode = static_cast<int>(mode);
  return s;
}

void add_pointwise(std::vector<OpSchema>& t) {
  const std::vector<std::pair<const char*, cudnnPointwiseMode_t>> unary = {
      {"abs", CUDNN_POINTWISE_ABS},
      {"ceil", CUDNN_POINTWISE_CEIL},
      {"cos", CUDNN_POINTWISE_COS},
      {"elu", CUDNN_POINTWISE_ELU_FWD},
      {"erf", CUDNN_POINTWISE_ERF},
      {"exp", CUDNN_POINTWISE_EXP},
      {"floor", CUDNN_POINTWISE_FLOOR},
      {"gelu", CUDNN_POINTWISE_GELU_FWD},
      {"gelu_approx_tanh", CUDNN_POINTWISE_GELU_APPROX_TANH_FWD},
      {"identity", CUDNN_POINTWISE_IDENTITY},
      {"log", CUDNN_POINTWISE_LOG},
      {"logical_not", CUDNN_POINTWISE_LOGICAL_NOT},
      {"neg", CUDNN_POINTWISE_NEG},
      {"reciprocal", CUDNN_POINTWISE_RECIPROCAL},
      {"rsqrt", CUDNN_POINTWISE_RSQRT},
      {"sigmoid", CUDNN_POINTWISE_SIGMOID_FWD},
      {"sin", CUDNN_POINTWISE_SIN},
      {"softplus", CUDNN_POINTWISE_SOFTPLUS_FWD},
      {"sqrt", CUDNN_POINTWISE_SQRT},
      {"tan", CUDNN_POINTWISE_TAN},
      {"tanh", CUDNN_POINTWISE_TANH_FWD},
  };
  for (const auto& [name, mode] : unary) t.push_back(pointwise(name, mode, {"input"}));

  const std::vector<std::pair<const char*, cudnnPointwiseMode_t>> binary_ab = {
      {"add", CUDNN_POINTWISE_ADD},
      {"add_square", CUDNN_POINTWISE_ADD_SQUARE},
      {"div", CUDNN_POINTWISE_DIV},
      {"logical_and", CUDNN_POINTWISE_LOGICAL_AND},
      {"logical_or", CUDNN_POINTWISE_LOGICAL_OR},
      {"mul", CUDNN_POINTWISE_MUL},
      {"sub", CUDNN_POINTWISE_SUB},
  };
  for (const auto& [name, mode] : binary_ab) t.push_back(pointwise(name, mode, {"a", "b"}));

  const std::vector<std::pair<const char*, cudnnPointwiseMode_t>> binary_01 = {
      {"max", CUDNN_POINTWISE_MAX},
      {"min", CUDNN_POINTWISE_MIN},
      {"mod", CUDNN_POINTWISE_MOD},
      {"pow", CUDNN_POINTWISE_POW},
  };
  for (const auto& [name, mode] : binary_01) {
    t.push_back(pointwise(name, mode, {"input0", "input1"}));
  }

  const std::vector<std::pair<const char*, cudnnPointwiseMode_t>> compare = {
      {"cmp_eq", CUDNN_POINTWISE_CMP_EQ}, {"cmp_ge", CUDNN_POINTWISE_CMP_GE},
      {"cmp_gt", CUDNN_POINTWISE_CMP_GT}, {"cmp_le", CUDNN_POINTWISE_CMP_LE},
      {"cmp_lt", CUDNN_POINTWISE_CMP_LT}, {"cmp_neq", CUDNN_POINTWISE_CMP_NEQ},
  };
  for (const auto& [name, mode] : compare) {
    t.push_back(pointwise(name, mode, {"input", "comparison"}));
  }

  // bias and scale are the classic spellings of add and mul.
  t.push_back(pointwise("bias", CUDNN_POINTWISE_ADD, {"input", "bias"}));
  t.push_back(pointwise("scale", CUDNN_POINTWISE_MUL, {"input", "scale"}));

  const std::vector<std::pair<const char*, cudnnPointwiseMode_t>> backward = {
      {"elu_backward", CUDNN_POINTWISE_ELU_BWD},
      {"gelu_approx_tanh_backward", CUDNN_POINTWISE_GELU_APPROX_TANH_BWD},
      {"gelu_backward", CUDNN_POINTWISE_GELU_BWD},
      {"sigmoid_backward", CUDNN_POINTWISE_SIGMOID_BWD},
      {"softplus_backward", CUDNN_POINTWISE_SOFTPLUS_BWD},
      {"tanh_backward", CUDNN_POINTWISE_TANH_BWD},
  };
  for (const auto& [name, mode] : backward) {
    t.push_back(pointwise(name, mode, {"loss", "input"}));
  }

  t.push_back(pointwise("binary_select", CUDNN_POINTWISE_BINARY_SELECT,
                        {"input0", "input1", "mask"}));

  // The seven explicit builders with scalar parameters.
  const std::vector<AttrSpec> relu_params = {attr("negative_slope", AttrType::kFloat),
                                             attr("lower_clip", AttrType::kFloat),
                                             attr("upper_clip", AttrType::kFloat)};
  t.push_back(pointwise("relu", CUDNN_POINTWISE_RELU_FWD, {"input"}, relu_params));
  t.push_back(pointwise("leaky_relu", CUDNN_POINTWISE_RELU_FWD, {"input"},
                        {attr("negative_slope", AttrType::kFloat, true)}));
  t.push_back(pointwise("swish", CUDNN_POINTWISE_SWISH_FWD, {"input"},
                        {attr("swish_beta", AttrType::kFloat)}));
  t.push_back(pointwise("gen_index", CUDNN_POINTWISE_GEN_INDEX, {"input"},
                        {attr("axis", AttrType::kInt, true)}));
  t.push_back(pointwise("relu_backward", CUDNN_POINTWISE_RELU_BWD, {"loss", "input"},
                        relu_params));
  t.push_back(pointwise("leaky_relu_backward", CUDNN_POINTWISE_RELU_BWD, {"loss", "input"},
                        {attr("negative_slope", AttrType::kFloat, true)}));
  t.push_back(pointwise("swish_backward", CUDNN_POINTWISE_SWISH_BWD, {"loss", "input"},
                        {attr("swish_beta", AttrType::kFloat)}));
}

// --- Matmul, convolution, reduction -----------------------------------------------------------

void add_matmul_conv_reduction(std::vector<OpSchema>& t) {
  // CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR
  t.push_back(OpSchema{"matmul", OpKind::kMatmul, {in("A"), in("B")}, {out("C")},
                       {attr("padding", AttrType::kFloat)}});

  // CUDNN_BACKEND_OPERATION_CONVOLUTION_{FORWARD,BACKWARD_DATA,BACKWARD_FILTER}_DESCRIPTOR
  const std::vector<AttrSpec> conv_attrs = {
      attr("padding", AttrType::kIntList),  attr("pre_padding", AttrType::kIntList),
      attr("post_padding", AttrType::kIntList), attr("stride", AttrType::kIntList),
      attr("dilation", AttrType::kIntList),
      enum_attr("convolution_mode", EnumKind::kConvolutionMode)};
  t.push_back(OpSchema{"conv_fprop", OpKind::kConvFprop, {in("image"), in("weight")},
                       {out("Y")}, conv_attrs});
  t.push_back(OpSchema{"conv_dgrad", OpKind::kConvDgrad, {in("loss"), in("filter")},
                       {out("DX")}, conv_attrs});
  t.push_back(OpSchema{"conv_wgrad", OpKind::kConvWgrad, {in("image"), in("loss")},
                       {out("DW")}, conv_attrs});

  // CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR; grouped reduction arrived in 9.24.
  t.push_back(OpSchema{"reduction", OpKind::kReduction,
                       {in("input"), opt("group_offset", kV9_24)}, {out("OUT_0")},
                       {enum_attr("mode", EnumKind::kReductionMode, true)}});
}

// --- Normalizations: CUDNN_BACKEND_OPERATION_NORM_{FORWARD,BACKWARD}_DESCRIPTOR ----------------

OpSchema norm(const char* method, OpKind kind, cudnnBackendNormMode_t mode,
              std::vector<PortSpec> inputs, std::vector<OutputSpec> outputs,
              std::vector<AttrSpec> attrs) {
  OpSchema s{method, kind, std::move(inputs), std::move(outputs), std::move(attrs)};
  s.norm_mode = static_cast<int>(mode);
  return s;
}

void add_norms(std::vector<OpSchema>& t) {
  const AttrSpec phase = enum_attr("norm_forward_phase", EnumKind::kNormForwardPhase, true);
  const std::vector<OutputSpec> y_mean_inv = {out("Y"), out_if_training("mean"),
                                              out_if_training("inv_var")};
  t.push_back(norm("layernorm", OpKind::kNormForward, CUDNN_LAYER_NORM,
                   {in("input"), opt("scale"), opt("bias"), in("epsilon")}, y_mean_inv,
                   {phase}));
  t.push_back(norm("rmsnorm", OpKind::kNormForward, CUDNN_RMS_NORM,
                   {in("input"), opt("scale"), opt("bias"), in("epsilon")},
                   {out("Y"), out_if_training("inv_var")}, {phase}));
  t.push_back(norm("instancenorm", OpKind::kNormForward, CUDNN_INSTANCE_NORM,
                   {in("input"), in("scale"), in("bias"), in("epsilon")}, y_mean_inv, {phase}));
  // Batch norm runs only in training through the norm descriptor (cuDNN limitation).
  t.push_back(norm("batchnorm", OpKind::kNormForward, CUDNN_BATCH_NORM,
                   {in("input"), in("scale"), in("bias"), opt("in_running_mean"),
                    opt("in_running_var"), in("epsilon"), opt("momentum"),
                    list_in("peer_stats", false)},
                   {out("Y"), out("mean"), out("inv_var"),
                    out_if_input("next_running_mean", "in_running_mean"),
                    out_if_input("next_running_var", "in_running_var")},
                   {}));

  const std::vector<OutputSpec> grads_if_scale = {out("DX"), out_if_input("DScale", "scale"),
                                                  out_if_input("DBias", "scale")};
  t.push_back(norm("layernorm_backward", OpKind::kNormBackward, CUDNN_LAYER_NORM,
                   {in("grad"), in("input"), opt("scale"), in("mean"), in("inv_variance")},
                   grads_if_scale, {}));
  OutputSpec rms_dbias{"DBias", Presence::kIfInputGivenAndAttrNotFalse, "scale", "has_dbias"};
  t.push_back(norm("rmsnorm_backward", OpKind::kNormBackward, CUDNN_RMS_NORM,
                   {in("grad"), in("input"), opt("scale"), in("inv_variance")},
                   {out("DX"), out_if_input("DScale", "scale"), rms_dbias},
                   {attr("has_dbias", AttrType::kBool, true)}));
  t.push_back(norm("instancenorm_backward", OpKind::kNormBackward, CUDNN_INSTANCE_NORM,
                   {in("grad"), in("input"), in("scale"), opt("mean"), opt("inv_variance")},
                   {out("DX"), out("DScale"), out("DBias")}, {}));
  t.push_back(norm("batchnorm_backward", OpKind::kNormBackward, CUDNN_BATCH_NORM,
                   {in("grad"), in("input"), in("scale"), in("mean"), in("inv_variance"),
                    list_in("peer_stats", false)},
                   {out("DX"), out("DScale"), out("DBias")}, {}));
#if CUDNN_VERSION >= 90700
  OpSchema ada = norm("adalayernorm", OpKind::kNormForward, CUDNN_ADA_LAYER_NORM,
                      {in("input"), in("scale"), opt("bias"), in("epsilon")}, y_mean_inv,
                      {phase});
  OpSchema ada_bwd = norm("adalayernorm_backward", OpKind::kNormBackward, CUDNN_ADA_LAYER_NORM,
                          {in("grad"), in("input"), in("scale"), in("mean"),
                           in("inv_variance")},
                          {out("DX"), out("DScale"), out("DBias")}, {});
#else
  OpSchema ada{"adalayernorm", OpKind::kNormForward,
               {in("input"), in("scale"), opt("bias"), in("epsilon")}, y_mean_inv, {phase}};
  OpSchema ada_bwd{"adalayernorm_backward", OpKind::kNormBackward,
                   {in("grad"), in("input"), in("scale"), in("mean"), in("inv_variance")},
                   {out("DX"), out("DScale"), out("DBias")}, {}};
  ada.missing_from_headers = ada_bwd.missing_from_headers = "CUDNN_ADA_LAYER_NORM (cuDNN 9.7)";
#endif
  ada.min_version = ada_bwd.min_version = kV9_7;
  t.push_back(ada);
  t.push_back(ada_bwd);

  // CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR
  t.push_back(OpSchema{"genstats", OpKind::kGenStats, {in("input")},
                       {out("SUM"), out("SQ_SUM")}, {}});

  // The norm descriptor has no batch-norm inference phase, so it is four pointwise
  // operations: Y = (input - mean) * inv_variance * scale + bias (composite.h).
  t.push_back(OpSchema{"batchnorm_inference", OpKind::kBatchnormInference,
                       {in("input"), in("mean"), in("inv_variance"), in("scale"), in("bias")},
                       {out("Y")}, {}});
}

// Marks a row whose descriptor the build headers lack (`since` in CUDNN_VERSION units).
void needs_headers(OpSchema& s, int64_t since, const char* descriptor) {
  s.min_version = std::max(s.min_version, since);
  if (CUDNN_VERSION < since) s.missing_from_headers = descriptor;
}

// --- Block-scale quantize/dequantize and MoE grouped matmul ---------------------------------------

// Measured on the H200 (cuDNN 9.19, sm_90): no engine takes a block-scale quantize or
// dequantize graph (the runtime-fusion engine wants a matmul in it, the others are built for
// other architectures). Block-scaled (MX) formats are Blackwell's, where cuDNN pairs these
// operations with its block-scaled matmuls.
constexpr const char* kBlockScaleSm =
    "cuDNN runs block-scale (MX) quantize/dequantize on Blackwell only; on sm_90 cuDNN 9.19 "
    "proposes no engine for them";

void add_block_scale_moe(std::vector<OpSchema>& t) {
  // CUDNN_BACKEND_OPERATION_BLOCK_SCALE_QUANTIZE_DESCRIPTOR: the descriptor takes the block
  // size only; `axis` and `transpose` decide the output layouts (shape_inference.cc).
  OpSchema quantize{"block_scale_quantize", OpKind::kBlockScaleQuantize, {in("input")},
                    {out("Y"), out("scale")},
                    {attr("block_size", AttrType::kInt, true), attr("axis", AttrType::kInt),
                     attr("transpose", AttrType::kBool)}};
  needs_headers(quantize, kV9_7, "CUDNN_BACKEND_OPERATION_BLOCK_SCALE_QUANTIZE_DESCRIPTOR (9.7)");
  quantize.min_sm = 100;
  quantize.min_sm_reason = kBlockScaleSm;
  t.push_back(quantize);

  // CUDNN_BACKEND_OPERATION_BLOCK_SCALE_DEQUANTIZE_DESCRIPTOR; negative scales arrived in 9.13.
  AttrSpec negative = attr("is_negative_scale", AttrType::kBool);
  negative.neutral = AttrValue{false};
  negative.min_version = kV9_13;
  OpSchema dequantize{"block_scale_dequantize", OpKind::kBlockScaleDequantize,
                      {in("input"), in("descale")}, {out("OUT_0")},
                      {attr("block_size", AttrType::kIntList, true), negative}};
  needs_headers(dequantize, kV9_7,
                "CUDNN_BACKEND_OPERATION_BLOCK_SCALE_DEQUANTIZE_DESCRIPTOR (9.7)");
  dequantize.min_sm = 100;
  dequantize.min_sm_reason = kBlockScaleSm;
  t.push_back(dequantize);

  // CUDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_DESCRIPTOR: in the 9.15 headers, but cuDNN's
  // own support matrix (frontend docs, "MoE Grouped Matmul") names 9.18 as the first release
  // that runs it. COMBINE has no backend mode, so top_k_scores (read by COMBINE only) declines.
  OpSchema moe{"moe_grouped_matmul", OpKind::kMoeGroupedMatmul,
               {in("token"), in("weight"), in("first_token_offset"), opt("token_index"),
                opt("token_ks"),
                unsupported_port("top_k_scores",
                                 "only mode COMBINE reads it, and cuDNN's backend has no COMBINE "
                                 "mode (the frontend serves it with its FROST GEMM engine)")},
               {out("OUT_0")},
               {enum_attr("mode", EnumKind::kMoeGroupedMatmulMode),
                attr("top_k", AttrType::kInt)}};
  needs_headers(moe, kV9_15, "CUDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_DESCRIPTOR (9.15)");
  moe.min_version = kV9_18;
  t.push_back(moe);

  // CUDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_BWD_DESCRIPTOR: the weight gradient.
  OpSchema moe_bwd{"moe_grouped_matmul_bwd", OpKind::kMoeGroupedMatmulBwd,
                   {in("doutput"), in("token"), in("first_token_offset")}, {out("dweight")}, {}};
  needs_headers(moe_bwd, kV9_22,
                "CUDNN_BACKEND_OPERATION_MOE_GROUPED_MATMUL_BWD_DESCRIPTOR (9.22)");
  t.push_back(moe_bwd);
}

// --- Structural ---------------------------------------------------------------------------------

void add_structural(std::vector<OpSchema>& t) {
  // CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR; an explicit mode arrived in 9.22.
  AttrSpec mode = enum_attr("reshape_mode", EnumKind::kReshapeMode);
  mode.neutral = AttrValue{int64_t{1}};  // VIEW_ONLY, the only behaviour before 9.22
  mode.min_version = kV9_22;
  OpSchema reshape{"reshape", OpKind::kReshape, {in("input")}, {out("OUT_0")}, {mode}};
  reshape.takes_compute_data_type = false;
  t.push_back(reshape);

  // CUDNN_BACKEND_OPERATION_CONCAT_DESCRIPTOR
  OpSchema concat{"concatenate", OpKind::kConcatenate, {list_in("inputs", true)},
                  {out("OUT_0")},
                  {attr("axis", AttrType::kInt, true), attr("in_place_index", AttrType::kInt)}};
  concat.takes_compute_data_type = false;
  t.push_back(concat);

  // CUDNN_BACKEND_OPERATION_SLICE_DESCRIPTOR / _TRANSPOSE_DESCRIPTOR (9.22)
  OpSchema slice{"slice", OpKind::kSlice, {in("input")}, {out("OUT_0")},
                 {attr("slices", AttrType::kSliceList)}};
  needs_headers(slice, kV9_22, "CUDNN_BACKEND_OPERATION_SLICE_DESCRIPTOR (9.22)");
  t.push_back(slice);
  OpSchema transpose{"transpose", OpKind::kTranspose, {in("input")}, {out("OUT_0")},
                     {attr("permutation", AttrType::kIntList, true)}};
  needs_headers(transpose, kV9_22, "CUDNN_BACKEND_OPERATION_TRANSPOSE_DESCRIPTOR (9.22)");
  t.push_back(transpose);

  // CUDNN_BACKEND_OPERATION_ROPE_FWD_DESCRIPTOR (9.24) / _ROPE_BWD_DESCRIPTOR: the backward
  // enumerators are in the 9.24 headers already but marked "@since cuDNN 9.25.0".
  const std::vector<AttrSpec> rope_attrs = {attr("output_scale", AttrType::kFloat),
                                            attr("rope_dim", AttrType::kInt)};
  OpSchema rope{"rope", OpKind::kRope, {in("input"), in("freqs")}, {out("OUT_0")}, rope_attrs};
  needs_headers(rope, kV9_24, "CUDNN_BACKEND_OPERATION_ROPE_FWD_DESCRIPTOR (9.24)");
  t.push_back(rope);
  OpSchema rope_bwd{"rope_backward", OpKind::kRopeBackward, {in("dY"), in("freqs")},
                    {out("OUT_0")}, rope_attrs};
  needs_headers(rope_bwd, kV9_25, "CUDNN_BACKEND_OPERATION_ROPE_BWD_DESCRIPTOR (9.25)");
  t.push_back(rope_bwd);
}

std::vector<OpSchema> build_table() {
  std::vector<OpSchema> t;
  add_pointwise(t);
  add_matmul_conv_reduction(t);
  add_norms(t);
  add_block_scale_moe(t);
  add_structural(t);
  add_sdpa(t);
  add_sdpa_fp8(t);
  return t;
}

}  // namespace

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kPointwise: return "pointwise";
    case OpKind::kMatmul: return "matmul";
    case OpKind::kConvFprop: return "conv_fprop";
    case OpKind::kConvDgrad: return "conv_dgrad";
    case OpKind::kConvWgrad: return "conv_wgrad";
    case OpKind::kReduction: return "reduction";
    case OpKind::kNormForward: return "norm_forward";
    case OpKind::kNormBackward: return "norm_backward";
    case OpKind::kGenStats: return "genstats";
    case OpKind::kReshape: return "reshape";
    case OpKind::kConcatenate: return "concatenate";
    case OpKind::kSdpaForward: return "sdpa_forward";
    case OpKind::kSdpaBackward: return "sdpa_backward";
    case OpKind::kBatchnormInference: return "batchnorm_inference";
    case OpKind::kSdpaFp8Forward: return "sdpa_fp8_forward";
    case OpKind::kSdpaFp8Backward: return "sdpa_fp8_backward";
    case OpKind::kBlockScaleQuantize: return "block_scale_quantize";
    case OpKind::kBlockScaleDequantize: return "block_scale_dequantize";
    case OpKind::kMoeGroupedMatmul: return "moe_grouped_matmul";
    case OpKind::kMoeGroupedMatmulBwd: return "moe_grouped_matmul_bwd";
    case OpKind::kSlice: return "slice";
    case OpKind::kTranspose: return "transpose";
    case OpKind::kRope: return "rope";
    case OpKind::kRopeBackward: return "rope_backward";
    case OpKind::kSdpaMxfp8Forward: return "sdpa_mxfp8_forward";
    case OpKind::kSdpaMxfp8Backward: return "sdpa_mxfp8_backward";
  }
  return "op";
}

const PortSpec* OpSchema::find_input(const std::string& port) const {
  for (const auto& p : inputs) {
    if (port == p.name) return &p;
  }
  return nullptr;
}

const AttrSpec* OpSchema::find_attr(const std::string& name) const {
  for (const auto& a : attrs) {
    if (name == a.name) return &a;
  }
  return nullptr;
}

const OutputSpec* OpSchema::find_output(const std::string& port) const {
  for (const auto& o : outputs) {
    if (port == o.name) return &o;
  }
  return nullptr;
}

const std::vector<OpSchema>& op_schemas() {
  static const std::vector<OpSchema> table = build_table();
  return table;
}

std::string cudnn_version_string(int64_t v) {
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
         std::to_string(v % 100);
}

std::string runtime_decline(const OpSchema& schema, int64_t loaded_version) {
  if (loaded_version == 0) return "";
  const std::string loaded = "; the loaded library is " + cudnn_version_string(loaded_version);
  if (loaded_version < schema.min_version) {
    return std::string(schema.method) + " needs cuDNN >= " +
           cudnn_version_string(schema.min_version) + loaded;
  }
  if (loaded_version < schema.min_runtime_version) {
    return std::string(schema.method) + " needs cuDNN >= " +
           cudnn_version_string(schema.min_runtime_version) + loaded + " (" +
           (schema.runtime_gap != nullptr ? schema.runtime_gap : "it cannot run this op") + ")";
  }
  return "";
}

const OpSchema* find_op_schema(const std::string& method) {
  for (const auto& schema : op_schemas()) {
    if (method == schema.method) return &schema;
  }
  return nullptr;
}

std::string op_signature(const OpSchema& schema) {
  std::string sig = std::string(schema.method) + "(";
  bool first = true;
  auto sep = [&] {
    if (!first) sig += ", ";
    first = false;
  };
  for (const auto& p : schema.inputs) {
    if (!p.required) continue;
    sep();
    sig += p.name;
    if (p.is_list) sig += "=[...]";
  }
  sep();
  sig += "*";
  for (const auto& p : schema.inputs) {
    if (p.required) continue;
    sep();
    sig += std::string(p.name) + "=None";
  }
  for (const auto& a : schema.attrs) {
    sep();
    sig += std::string(a.name) + (a.required ? "" : "=None");
  }
  if (schema.takes_compute_data_type) {
    sep();
    sig += "compute_data_type=None";
  }
  sep();
  sig += "name=''";
  return sig + ")";
}

}  // namespace cudnn_backend
