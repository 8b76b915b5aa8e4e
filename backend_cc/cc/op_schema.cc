// The op table (see op_schema.h). Port and attribute names follow spec/op_surface.md
// sections 1-5 exactly; the cuDNN descriptor each kind lowers to is noted per group.
#include "backend_cc/cc/op_schema.h"

#include <cudnn_graph.h>

namespace cudnn_backend {

namespace {

constexpr int64_t kV9_7 = 90700;
constexpr int64_t kV9_13 = 91300;
constexpr int64_t kV9_14 = 91400;
constexpr int64_t kV9_15 = 91500;
constexpr int64_t kV9_17 = 91700;
constexpr int64_t kV9_21 = 92100;
constexpr int64_t kV9_22 = 92200;
constexpr int64_t kV9_24 = 92400;

// Why an SDPA feature is a decline: the native descriptors (cuDNN 9.13+/9.17+) carry only
// Q/K/V/O/Stats, a scale, a padding mask (sequence lengths), a block mask and page tables.
constexpr const char* kSdpaNoAttribute =
    "the native cuDNN SDPA descriptor has no attribute for it (only q/k/v/o/stats, "
    "attn_scale, padding-mask sequence lengths, block_mask and page tables are native)";

PortSpec in(const char* name) { return PortSpec{name, true}; }
PortSpec opt(const char* name, int64_t min_version = 0) {
  PortSpec p{name, false};
  p.min_version = min_version;
  return p;
}
PortSpec list_in(const char* name, bool required) {
  PortSpec p{name, required};
  p.is_list = true;
  return p;
}
PortSpec unsupported_port(const char* name, const char* why) {
  PortSpec p{name, false};
  p.unsupported = why;
  return p;
}

OutputSpec out(const char* name) { return OutputSpec{name}; }
OutputSpec out_if_training(const char* name) {
  OutputSpec o{name};
  o.presence = Presence::kIfTraining;
  return o;
}
OutputSpec out_if_input(const char* name, const char* input) {
  OutputSpec o{name};
  o.presence = Presence::kIfInputGiven;
  o.input = input;
  return o;
}

AttrSpec attr(const char* name, AttrType type, bool required = false) {
  return AttrSpec{name, type, required};
}
AttrSpec enum_attr(const char* name, EnumKind kind, bool required = false) {
  AttrSpec a{name, AttrType::kEnum, required};
  a.enum_kind = kind;
  return a;
}
// Accepted for name compatibility; any value other than `neutral` is a decline.
AttrSpec unsupported_attr(const char* name, AttrType type, AttrValue neutral, const char* why) {
  AttrSpec a{name, type, false};
  a.neutral = std::move(neutral);
  a.unsupported = why;
  return a;
}
AttrSpec unsupported_flag(const char* name) {
  return unsupported_attr(name, AttrType::kBool, AttrValue{false}, kSdpaNoAttribute);
}
AttrSpec unsupported_int(const char* name) {
  return unsupported_attr(name, AttrType::kInt, AttrValue{}, kSdpaNoAttribute);
}

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
}

// --- SDPA: CUDNN_BACKEND_OPERATION_SDPA_{FWD,BWD}_DESCRIPTOR --------------------------------------

void add_sdpa(std::vector<OpSchema>& t) {
  OpSchema fwd{"sdpa", OpKind::kSdpaForward};
  fwd.inputs = {in("q"),
                in("k"),
                in("v"),
                opt("attn_scale"),
                unsupported_port("bias", kSdpaNoAttribute),
                opt("block_mask", kV9_14),
                opt("seq_len_q", kV9_15),
                opt("seq_len_kv", kV9_15),
                unsupported_port("cu_seq_len_q", kSdpaNoAttribute),
                unsupported_port("cu_seq_len_kv", kSdpaNoAttribute),
                opt("paged_attention_k_table", kV9_15),
                opt("paged_attention_v_table", kV9_15),
                unsupported_port("sink_token", kSdpaNoAttribute),
                unsupported_port("rng_dump", kSdpaNoAttribute),
                unsupported_port("score_max", kSdpaNoAttribute),
                unsupported_port("score_sum_exp", kSdpaNoAttribute)};
  OutputSpec stats{"Stats", Presence::kIfSdpaStats};
  stats.default_data_type = data_type::kFloat;
  fwd.outputs = {out("O"), stats};
  fwd.attrs = {attr("is_inference", AttrType::kBool),
               attr("generate_stats", AttrType::kBool),
               unsupported_flag("stats_use_log2"),
               enum_attr("implementation", EnumKind::kAttentionImplementation),
               unsupported_flag("unfuse_fma"),
               unsupported_flag("use_alibi_mask"),
               unsupported_flag("use_causal_mask"),
               unsupported_flag("use_causal_mask_bottom_right"),
               attr("use_padding_mask", AttrType::kBool),
               unsupported_int("sliding_window_length"),
               enum_attr("diagonal_alignment", EnumKind::kDiagonalAlignment),
               unsupported_int("diagonal_band_left_bound"),
               unsupported_int("diagonal_band_right_bound"),
               unsupported_int("max_total_seq_len_q"),
               unsupported_int("max_total_seq_len_kv"),
               unsupported_attr("dropout", AttrType::kOpaque, AttrValue{}, kSdpaNoAttribute),
               attr("paged_attention_max_seq_len_kv", AttrType::kInt),
               unsupported_attr("score_mod", AttrType::kOpaque, AttrValue{}, kSdpaNoAttribute)};
  fwd.min_version = kV9_13;
#if CUDNN_VERSION < 91300
  fwd.missing_from_headers = "CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR (cuDNN 9.13)";
#endif
  t.push_back(fwd);

  OpSchema bwd{"sdpa_backward", OpKind::kSdpaBackward};
  bwd.inputs = {in("q"),
                in("k"),
                in("v"),
                in("o"),
                in("dO"),
                in("stats"),
                opt("attn_scale"),
                unsupported_port("bias", kSdpaNoAttribute),
                unsupported_port("dBias", kSdpaNoAttribute),
                opt("seq_len_q"),
                opt("seq_len_kv"),
                unsupported_port("sink_token", kSdpaNoAttribute),
                unsupported_port("dSink_token", kSdpaNoAttribute),
                unsupported_port("rng_dump", kSdpaNoAttribute)};
  bwd.outputs = {out("dQ"), out("dK"), out("dV")};
  bwd.attrs = {unsupported_flag("use_alibi_mask"),
               unsupported_flag("use_causal_mask"),
               unsupported_flag("use_causal_mask_bottom_right"),
               attr("use_padding_mask", AttrType::kBool),
               unsupported_int("sliding_window_length"),
               enum_attr("diagonal_alignment", EnumKind::kDiagonalAlignment),
               unsupported_int("diagonal_band_left_bound"),
               unsupported_int("diagonal_band_right_bound"),
               unsupported_int("max_total_seq_len_q"),
               unsupported_int("max_total_seq_len_kv"),
               unsupported_attr("dropout", AttrType::kOpaque, AttrValue{}, kSdpaNoAttribute),
               unsupported_attr("score_mod_bprop", AttrType::kOpaque, AttrValue{},
                                kSdpaNoAttribute),
               unsupported_flag("use_deterministic_algorithm")};
  bwd.min_version = kV9_17;
  // Measured (9.17.0, 9.18.0, 9.19.0, 9.20.0 vs 9.21.0-9.24.0, no GPU needed): the older
  // libraries finalize this descriptor but refuse any operation graph holding it.
  bwd.min_runtime_version = kV9_21;
  bwd.runtime_gap =
      "cuDNN 9.17-9.20 finalize the SDPA_BWD descriptor but cannot build an operation graph "
      "that contains it: cudnnBackendFinalize(OPERATIONGRAPH) fails with BAD_PARAM in "
      "buildDAG";
#if CUDNN_VERSION < 91700
  bwd.missing_from_headers = "CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR (cuDNN 9.17)";
#endif
  t.push_back(bwd);
}

std::vector<OpSchema> build_table() {
  std::vector<OpSchema> t;
  add_pointwise(t);
  add_matmul_conv_reduction(t);
  add_norms(t);
  add_structural(t);
  add_sdpa(t);
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
