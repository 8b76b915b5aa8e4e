// Per-kind call rules (see op_rules.h).
#include "backend_cc/cc/op_rules.h"

#include "backend_cc/cc/errors.h"

namespace cudnn_backend {

namespace {

std::string where(const OpRecord& op) {
  return std::string(op.schema->method) + " '" + op.name + "'";
}

bool flag(const OpRecord& op, const char* name) {
  const AttrValue* v = op.attr(name);
  return v != nullptr && std::get<bool>(*v);
}

void check_conv(const OpRecord& op) {
  const bool symmetric = op.attr("padding") != nullptr;
  if (symmetric && (op.attr("pre_padding") != nullptr || op.attr("post_padding") != nullptr)) {
    throw ArgumentValueError(where(op) +
                             ": give either padding or pre_padding/post_padding, not both");
  }
}

void check_norm_forward(const OpRecord& op) {
  const AttrValue* phase = op.attr("norm_forward_phase");
  if (phase != nullptr && std::get<int64_t>(*phase) == 0) {
    throw ArgumentValueError(where(op) + ": norm_forward_phase must be INFERENCE or TRAINING, "
                                         "not NOT_SET");
  }
}

void check_reduction(const OpRecord& op) {
  if (std::get<int64_t>(*op.attr("mode")) == 0) {
    throw ArgumentValueError(where(op) + ": mode must be a reduction_mode other than NOT_SET");
  }
}

void check_concatenate(const OpRecord& op) {
  const size_t n = op.list_input("inputs").size();
  if (const AttrValue* index = op.attr("in_place_index")) {
    const int64_t i = std::get<int64_t>(*index);
    if (i < 0 || static_cast<size_t>(i) >= n) {
      throw ArgumentValueError(where(op) + ": in_place_index " + std::to_string(i) +
                               " is not an index into the " + std::to_string(n) + " inputs");
    }
  }
}

// The native SDPA descriptors turn the padding mask on exactly when both sequence-length
// tensors are attached, so use_padding_mask and the tensors must agree.
void check_sdpa_padding(const OpRecord& op) {
  const bool padding = flag(op, "use_padding_mask");
  const bool q = op.input("seq_len_q") >= 0;
  const bool kv = op.input("seq_len_kv") >= 0;
  if (padding && !(q && kv)) {
    throw ArgumentValueError(where(op) +
                             ": use_padding_mask=True needs both seq_len_q and seq_len_kv");
  }
  if (!padding && q) {
    throw GraphNotSupported(where(op) + ": seq_len_q without use_padding_mask=True has no "
                                        "native SDPA equivalent");
  }
  if (!padding && kv && op.input("paged_attention_k_table") < 0 &&
      op.input("paged_attention_v_table") < 0) {
    throw GraphNotSupported(where(op) + ": seq_len_kv without use_padding_mask=True or page "
                                        "tables has no native SDPA equivalent");
  }
}

void check_sdpa_forward(const OpRecord& op) {
  if (const AttrValue* impl = op.attr("implementation")) {
    // attention_implementation COMPOSITE = 1: the decomposed matmul/softmax/matmul graph.
    if (std::get<int64_t>(*impl) == 1) {
      throw GraphNotSupported(where(op) + ": implementation=COMPOSITE is not supported; this "
                                          "backend lowers sdpa to the native SDPA descriptor "
                                          "only (AUTO or UNIFIED)");
    }
  }
  check_sdpa_padding(op);
  const bool paged = op.input("paged_attention_k_table") >= 0 ||
                     op.input("paged_attention_v_table") >= 0;
  if (paged && op.input("seq_len_kv") < 0) {
    throw ArgumentValueError(where(op) + ": paged attention needs seq_len_kv");
  }
  if (!paged && op.attr("paged_attention_max_seq_len_kv") != nullptr) {
    throw ArgumentValueError(where(op) +
                             ": paged_attention_max_seq_len_kv is only valid with page tables");
  }
}

}  // namespace

ConvGeometry conv_geometry(const OpRecord& op, size_t spatial) {
  auto list = [&](const char* name) -> const std::vector<int64_t>* {
    const AttrValue* v = op.attr(name);
    return v == nullptr ? nullptr : &std::get<std::vector<int64_t>>(*v);
  };
  auto resolve = [&](const char* name, const std::vector<int64_t>* fallback,
                     int64_t default_value) {
    const std::vector<int64_t>* given = list(name);
    if (given == nullptr) given = fallback;
    if (given == nullptr || given->empty()) return std::vector<int64_t>(spatial, default_value);
    if (given->size() != spatial) {
      throw ArgumentValueError(where(op) + ": " + name + " has " +
                               std::to_string(given->size()) + " entries but the convolution has " +
                               std::to_string(spatial) + " spatial dimensions");
    }
    return *given;
  };
  ConvGeometry g;
  const std::vector<int64_t>* padding = list("padding");
  g.pre_padding = resolve("pre_padding", padding, 0);
  g.post_padding = resolve("post_padding", padding, 0);
  g.stride = resolve("stride", nullptr, 1);
  g.dilation = resolve("dilation", nullptr, 1);
  if (const AttrValue* mode = op.attr("convolution_mode")) g.mode = std::get<int64_t>(*mode);
  return g;
}

void check_op_rules(const OpRecord& op, const GraphRecord& /*graph*/) {
  switch (op.schema->kind) {
    case OpKind::kConvFprop:
    case OpKind::kConvDgrad:
    case OpKind::kConvWgrad: check_conv(op); break;
    case OpKind::kNormForward: check_norm_forward(op); break;
    case OpKind::kReduction: check_reduction(op); break;
    case OpKind::kConcatenate: check_concatenate(op); break;
    case OpKind::kSdpaForward: check_sdpa_forward(op); break;
    case OpKind::kSdpaBackward: check_sdpa_padding(op); break;
    default: break;
  }
}

}  // namespace cudnn_backend
