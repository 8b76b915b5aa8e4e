// The SDPA rows of the op table (see op_schema.h): sdpa / sdpa_backward through cuDNN's
// native SDPA_{FWD,BWD} descriptors, sdpa_fp8 / sdpa_fp8_backward as composite
// fused-attention graphs (composite.h), and the MXFP8 variants, whose names the backend
// keeps but never lowers. Keyword names follow docs/GRAPH_IR.md §1 exactly.
#include <cudnn_graph.h>

#include <initializer_list>
#include <iterator>

#include "backend_cc/cc/op_schema_rows.h"

namespace cudnn_backend::rows {

namespace {

// Why an SDPA feature is a decline: the native descriptors (cuDNN 9.13+/9.17+) carry only
// Q/K/V/O/Stats, a scale, a padding mask (sequence lengths), a block mask and page tables.
constexpr const char* kSdpaNoAttribute =
    "the native cuDNN SDPA descriptor has no attribute for it (only q/k/v/o/stats, "
    "attn_scale, padding-mask sequence lengths, block_mask and page tables are native)";

// Why an FP8 SDPA feature is a decline: the composite graph carries q/k/v, the per-tensor
// FP8 scales, attn_scale and the softmax statistics, nothing else.
constexpr const char* kFp8NoFeature =
    "the FP8 fused-attention graph this backend builds has no masks, bias, dropout, variable "
    "sequence lengths, paged K/V, sinks or softmax side outputs (it carries q/k/v, the "
    "per-tensor FP8 scales, attn_scale and the softmax statistics)";

constexpr const char* kHopperFp8 =
    "cuDNN's FP8 fused-attention engines run on Hopper (sm_90) and newer";
constexpr const char* kBlackwellMxfp8 =
    "MXFP8 attention runs on cuDNN's Blackwell (sm_100+) engines only";
constexpr const char* kMxfp8NoLowering =
    "this backend has no MXFP8 lowering (cuDNN expresses it as block-scale dequantize "
    "operations inside the fused-attention graph, which only Blackwell's engines run; it is "
    "not written yet)";

std::vector<PortSpec> unsupported_ports(std::initializer_list<const char*> names,
                                        const char* why) {
  std::vector<PortSpec> out;
  for (const char* n : names) out.push_back(unsupported_port(n, why));
  return out;
}

std::vector<AttrSpec> unsupported_flags(std::initializer_list<const char*> names,
                                        const char* why) {
  std::vector<AttrSpec> out;
  for (const char* n : names) out.push_back(unsupported_flag(n, why));
  return out;
}

std::vector<AttrSpec> unsupported_ints(std::initializer_list<const char*> names,
                                       const char* why) {
  std::vector<AttrSpec> out;
  for (const char* n : names) out.push_back(unsupported_int(n, why));
  return out;
}

AttrSpec unsupported_opaque(const char* name, const char* why) {
  return unsupported_attr(name, AttrType::kOpaque, AttrValue{}, why);
}

template <typename T>
void append(std::vector<T>& to, std::vector<T> more) {
  to.insert(to.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
}

OutputSpec sdpa_stats() {
  OutputSpec stats{"Stats", Presence::kIfSdpaStats};
  stats.default_data_type = data_type::kFloat;
  return stats;
}

// Names only: every call declines (no_lowering), after the version and SM gates.
OpSchema named_only(const char* method, OpKind kind) {
  OpSchema s{method, kind};
  s.min_version = kV9_21;
  s.min_sm = 100;
  s.min_sm_reason = kBlackwellMxfp8;
  s.no_lowering = kMxfp8NoLowering;
  return s;
}

}  // namespace

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
               unsupported_flag("stats_use_log2", kSdpaNoAttribute),
               enum_attr("implementation", EnumKind::kAttentionImplementation),
               unsupported_flag("unfuse_fma", kSdpaNoAttribute),
               unsupported_flag("use_alibi_mask", kSdpaNoAttribute),
               unsupported_flag("use_causal_mask", kSdpaNoAttribute),
               unsupported_flag("use_causal_mask_bottom_right", kSdpaNoAttribute),
               attr("use_padding_mask", AttrType::kBool),
               unsupported_int("sliding_window_length", kSdpaNoAttribute),
               enum_attr("diagonal_alignment", EnumKind::kDiagonalAlignment),
               unsupported_int("diagonal_band_left_bound", kSdpaNoAttribute),
               unsupported_int("diagonal_band_right_bound", kSdpaNoAttribute),
               unsupported_int("max_total_seq_len_q", kSdpaNoAttribute),
               unsupported_int("max_total_seq_len_kv", kSdpaNoAttribute),
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
  bwd.attrs = {unsupported_flag("use_alibi_mask", kSdpaNoAttribute),
               unsupported_flag("use_causal_mask", kSdpaNoAttribute),
               unsupported_flag("use_causal_mask_bottom_right", kSdpaNoAttribute),
               attr("use_padding_mask", AttrType::kBool),
               unsupported_int("sliding_window_length", kSdpaNoAttribute),
               enum_attr("diagonal_alignment", EnumKind::kDiagonalAlignment),
               unsupported_int("diagonal_band_left_bound", kSdpaNoAttribute),
               unsupported_int("diagonal_band_right_bound", kSdpaNoAttribute),
               unsupported_int("max_total_seq_len_q", kSdpaNoAttribute),
               unsupported_int("max_total_seq_len_kv", kSdpaNoAttribute),
               unsupported_attr("dropout", AttrType::kOpaque, AttrValue{}, kSdpaNoAttribute),
               unsupported_attr("score_mod_bprop", AttrType::kOpaque, AttrValue{},
                                kSdpaNoAttribute),
               unsupported_flag("use_deterministic_algorithm", kSdpaNoAttribute)};
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


// sdpa_fp8 / sdpa_fp8_backward: the FP8 fused-attention graphs of composite.h (per-tensor
// scales, FP8 P and dP); sdpa_mxfp8 / sdpa_mxfp8_backward: names only.
void add_sdpa_fp8(std::vector<OpSchema>& t) {
  OpSchema fwd{"sdpa_fp8", OpKind::kSdpaFp8Forward};
  fwd.inputs = {in("q"),         in("k"),         in("v"),         in("descale_q"),
                in("descale_k"), in("descale_v"), in("descale_s"), in("scale_s"),
                in("scale_o"),   opt("attn_scale")};
  append(fwd.inputs, unsupported_ports({"bias", "seq_len_q", "seq_len_kv", "cu_seq_len_q",
                                        "cu_seq_len_kv", "rng_dump", "paged_attention_k_table",
                                        "paged_attention_v_table", "score_max", "score_sum_exp",
                                        "sink_token"},
                                       kFp8NoFeature));
  fwd.outputs = {out("O"), sdpa_stats(), out("Amax_S", data_type::kFloat),
                 out("Amax_O", data_type::kFloat)};
  fwd.attrs = {attr("is_inference", AttrType::kBool), attr("generate_stats", AttrType::kBool),
               enum_attr("implementation", EnumKind::kAttentionImplementation),
               enum_attr("diagonal_alignment", EnumKind::kDiagonalAlignment),
               unsupported_opaque("dropout", kFp8NoFeature),
               unsupported_opaque("fn", kFp8NoFeature)};
  append(fwd.attrs, unsupported_flags({"stats_use_log2", "unfuse_fma", "use_alibi_mask",
                                       "use_causal_mask", "use_causal_mask_bottom_right",
                                       "use_padding_mask"},
                                      kFp8NoFeature));
  append(fwd.attrs, unsupported_ints({"sliding_window", "left_bound", "right_bound",
                                      "max_total_seq_len_q", "max_total_seq_len_kv",
                                      "paged_attention_max_seq_len_kv"},
                                     kFp8NoFeature));
  // The graph pattern of cuDNN's FP8 fused attention exists since 9.1.
  fwd.min_version = kV9_1;
  fwd.min_sm = 90;
  fwd.min_sm_reason = kHopperFp8;
  t.push_back(fwd);

  OpSchema bwd{"sdpa_fp8_backward", OpKind::kSdpaFp8Backward};
  for (const char* port : {"q", "k", "v", "o", "dO", "stats", "descale_q", "descale_k",
                           "descale_v", "descale_o", "descale_dO", "descale_s", "descale_dP",
                           "scale_s", "scale_dQ", "scale_dK", "scale_dV", "scale_dP"}) {
    bwd.inputs.push_back(in(port));
  }
  bwd.inputs.push_back(opt("attn_scale"));
  append(bwd.inputs, unsupported_ports({"seq_len_q", "seq_len_kv", "sink_token", "dSink_token"},
                                       kFp8NoFeature));
  bwd.outputs = {out("dQ"), out("dK"), out("dV")};
  for (const char* amax : {"amax_dQ", "amax_dK", "amax_dV", "amax_dP"}) {
    bwd.outputs.push_back(out(amax, data_type::kFloat));
  }
  bwd.attrs = {enum_attr("diagonal_alignment", EnumKind::kDiagonalAlignment),
               unsupported_opaque("dropout", kFp8NoFeature)};
  append(bwd.attrs, unsupported_flags({"use_deterministic_algorithm", "use_causal_mask",
                                       "use_causal_mask_bottom_right", "use_padding_mask"},
                                      kFp8NoFeature));
  append(bwd.attrs, unsupported_ints({"left_bound", "right_bound", "max_total_seq_len_q",
                                      "max_total_seq_len_kv"},
                                     kFp8NoFeature));
  bwd.min_version = kV9_1;
  bwd.min_sm = 90;
  bwd.min_sm_reason = kHopperFp8;
  t.push_back(bwd);

  OpSchema mx = named_only("sdpa_mxfp8", OpKind::kSdpaMxfp8Forward);
  for (const char* port : {"q", "k", "v", "descale_q", "descale_k", "descale_v"}) {
    mx.inputs.push_back(in(port));
  }
  for (const char* port : {"attn_scale", "seq_len_q", "seq_len_kv", "cu_seq_len_q",
                           "cu_seq_len_kv", "paged_attention_k_table",
                           "paged_attention_v_table", "sink_token"}) {
    mx.inputs.push_back(opt(port));
  }
  mx.outputs = {out("O"), sdpa_stats(), out("Amax_O", data_type::kFloat)};
  mx.attrs = {attr("generate_stats", AttrType::kBool, true),
              enum_attr("implementation", EnumKind::kAttentionImplementation),
              enum_attr("diagonal_alignment", EnumKind::kDiagonalAlignment)};
  for (const char* flag : {"unfuse_fma", "use_causal_mask", "use_causal_mask_bottom_right",
                           "use_padding_mask"}) {
    mx.attrs.push_back(attr(flag, AttrType::kBool));
  }
  for (const char* value : {"diagonal_band_left_bound", "diagonal_band_right_bound",
                            "max_total_seq_len_q", "max_total_seq_len_kv",
                            "paged_attention_max_seq_len_kv"}) {
    mx.attrs.push_back(attr(value, AttrType::kInt));
  }
  t.push_back(mx);

  OpSchema mx_bwd = named_only("sdpa_mxfp8_backward", OpKind::kSdpaMxfp8Backward);
  for (const char* port : {"q", "q_T", "k", "k_T", "v", "o_f16", "dO_f16", "dO", "dO_T",
                           "stats", "descale_q", "descale_q_T", "descale_k", "descale_k_T",
                           "descale_v", "descale_dO", "descale_dO_T"}) {
    mx_bwd.inputs.push_back(in(port));
  }
  for (const char* port : {"attn_scale", "seq_len_q", "seq_len_kv", "sink_token",
                           "dSink_token"}) {
    mx_bwd.inputs.push_back(opt(port));
  }
  mx_bwd.outputs = {out("dQ"), out("dK"), out("dV")};
  for (const char* amax : {"amax_dQ", "amax_dK", "amax_dV"}) {
    mx_bwd.outputs.push_back(out(amax, data_type::kFloat));
  }
  mx_bwd.attrs = {enum_attr("diagonal_alignment", EnumKind::kDiagonalAlignment),
                  unsupported_opaque("dropout", kMxfp8NoLowering)};
  for (const char* flag : {"use_deterministic_algorithm", "use_causal_mask",
                           "use_causal_mask_bottom_right", "use_padding_mask"}) {
    mx_bwd.attrs.push_back(attr(flag, AttrType::kBool));
  }
  for (const char* value : {"left_bound", "right_bound", "max_total_seq_len_q",
                            "max_total_seq_len_kv"}) {
    mx_bwd.attrs.push_back(attr(value, AttrType::kInt));
  }
  t.push_back(mx_bwd);
}

}  // namespace cudnn_backend::rows
