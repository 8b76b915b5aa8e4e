// Per-kind call rules (see op_rules.h).
#include "backend_cc/cc/op_rules.h"

#include <algorithm>
#include <climits>
#include <cstdint>

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

// moe_grouped_matmul_mode values (frontend numbering, docs/GRAPH_IR.md §3).
constexpr int64_t kMoeNone = 1, kMoeGather = 2, kMoeScatter = 3, kMoeCombine = 4;

void check_moe(const OpRecord& op) {
  const AttrValue* m = op.attr("mode");
  const int64_t mode = m == nullptr ? kMoeNone : std::get<int64_t>(*m);
  if (mode == kMoeCombine) {
    throw GraphNotSupported(where(op) + ": mode COMBINE has no cuDNN backend mode (FC2, the "
                                        "routing scores and the sum over experts are served by "
                                        "the frontend's FROST GEMM engine only)");
  }
  const bool routed = mode == kMoeGather || mode == kMoeScatter;
  if (routed && op.input("token_index") < 0) {
    throw ArgumentValueError(where(op) + ": modes GATHER and SCATTER need token_index");
  }
  if (!routed && op.input("token_index") >= 0) {
    throw ArgumentValueError(where(op) + ": token_index is read in modes GATHER and SCATTER "
                                         "only");
  }
  const AttrValue* top_k = op.attr("top_k");
  if (mode == kMoeScatter) {
    if (op.input("token_ks") < 0 || top_k == nullptr || std::get<int64_t>(*top_k) <= 0) {
      throw ArgumentValueError(where(op) + ": mode SCATTER needs token_ks and top_k > 0");
    }
  } else if (op.input("token_ks") >= 0) {
    throw ArgumentValueError(where(op) + ": token_ks is read in mode SCATTER only");
  }
}

// cuDNN 9.19 on an H200 (sm_90) runs a GATHER grouped matmul into an illegal memory access
// (tests/backend/moe_modes_probe.py: top-1 and top-2, with the routing tensors shaped as the
// cuDNN documentation gives them), while mode NONE with the same offsets is right. Newer
// libraries are let through: the same probe tells whether they fixed it.
constexpr int64_t kMoeGatherLastFaulty = 91900;

void check_slice(const OpRecord& op) {
  const AttrValue* v = op.attr("slices");
  if (v == nullptr) return;
  const auto& flat = std::get<std::vector<int64_t>>(*v);
  for (size_t i = 0; i + 2 < flat.size(); i += 3) {
    const int64_t step = flat[i + 2];
    if (step == 0) throw ArgumentValueError(where(op) + ": slice steps must not be zero");
    if (step != kSliceNone && step < 0) {
      throw GraphNotSupported(where(op) + ": slice " + std::to_string(i / 3) + " has step " +
                              std::to_string(step) + "; cuDNN's slice takes positive strides "
                              "only");
    }
  }
}

void check_block_size(const OpRecord& op) {
  const AttrValue* v = op.attr("block_size");
  const std::vector<int64_t> sizes = std::holds_alternative<int64_t>(*v)
                                         ? std::vector<int64_t>{std::get<int64_t>(*v)}
                                         : std::get<std::vector<int64_t>>(*v);
  if (sizes.empty()) throw ArgumentValueError(where(op) + ": block_size must not be empty");
  for (int64_t b : sizes) {
    if (b < 1 || b > INT32_MAX) {
      throw ArgumentValueError(where(op) + ": block sizes must be in [1, 2^31), got " +
                               std::to_string(b));
    }
  }
}

void check_rope(const OpRecord& op) {
  if (const AttrValue* dim = op.attr("rope_dim"); dim != nullptr && std::get<int64_t>(*dim) < 0) {
    throw ArgumentValueError(where(op) + ": rope_dim must be >= 0 (0 = the whole head dim)");
  }
}

void check_sdpa_fp8(const OpRecord& op) {
  // attention_implementation UNIFIED = 2 asks for the native SDPA descriptor, which has no
  // FP8 scales; AUTO and COMPOSITE both mean the composite graph here.
  if (const AttrValue* impl = op.attr("implementation"); impl && std::get<int64_t>(*impl) == 2) {
    throw GraphNotSupported(where(op) + ": implementation=UNIFIED is not supported; FP8 SDPA "
                                        "lowers to the composite fused-attention graph (the "
                                        "native SDPA descriptor has no FP8 scales)");
  }
  // diagonal_alignment only matters with a mask, and the composite graph has none.
}

}  // namespace

std::vector<SliceAxis> resolve_slices(const OpRecord& op, const std::vector<int64_t>& dims) {
  std::vector<int64_t> flat;
  if (const AttrValue* v = op.attr("slices")) flat = std::get<std::vector<int64_t>>(*v);
  if (flat.size() / 3 > dims.size()) {
    throw ArgumentValueError(where(op) + ": " + std::to_string(flat.size() / 3) +
                             " slices for a rank-" + std::to_string(dims.size()) + " input");
  }
  std::vector<SliceAxis> axes;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t n = dims[i];
    SliceAxis a{0, n, 1, n};
    if (3 * i + 2 < flat.size()) {
      // Python's slice.indices for a positive step: bounds default to the ends, negative
      // ones count from the end, and both are clamped to [0, n].
      auto bound = [n](int64_t value, int64_t missing) {
        if (value == kSliceNone) return missing;
        if (value < 0) value += n;
        return std::min(std::max<int64_t>(value, 0), n);
      };
      a.step = flat[3 * i + 2] == kSliceNone ? 1 : flat[3 * i + 2];
      a.start = bound(flat[3 * i], 0);
      a.stop = bound(flat[3 * i + 1], n);
      a.extent = a.stop > a.start ? (a.stop - a.start + a.step - 1) / a.step : 0;
    }
    if (a.extent <= 0) {
      throw ArgumentValueError(where(op) + ": the slice of axis " + std::to_string(i) +
                               " (extent " + std::to_string(n) + ") takes no elements");
    }
    axes.push_back(a);
  }
  return axes;
}

std::vector<int64_t> checked_permutation(const OpRecord& op, size_t rank) {
  const auto& perm = std::get<std::vector<int64_t>>(*op.attr("permutation"));
  std::vector<bool> seen(rank, false);
  bool ok = perm.size() == rank;
  for (int64_t p : perm) {
    if (!ok || p < 0 || p >= static_cast<int64_t>(rank) || seen[p]) {
      ok = false;
      break;
    }
    seen[p] = true;
  }
  if (!ok) {
    std::string text;
    for (int64_t p : perm) text += (text.empty() ? "" : ", ") + std::to_string(p);
    throw ArgumentValueError(where(op) + ": permutation [" + text + "] is not a permutation of "
                             "the " + std::to_string(rank) + " input axes");
  }
  return perm;
}

size_t quantize_axis(const OpRecord& op, size_t rank) {
  const AttrValue* v = op.attr("axis");
  const int64_t axis = v == nullptr ? -1 : std::get<int64_t>(*v);
  if (axis == -1) return rank - 1;
  if (axis < 0 || axis >= static_cast<int64_t>(rank)) {
    throw ArgumentValueError(where(op) + ": axis " + std::to_string(axis) +
                             " is not an axis of the rank-" + std::to_string(rank) +
                             " input (or -1 for the last)");
  }
  return static_cast<size_t>(axis);
}

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
    case OpKind::kMoeGroupedMatmul: check_moe(op); break;
    case OpKind::kSlice: check_slice(op); break;
    case OpKind::kBlockScaleQuantize:
    case OpKind::kBlockScaleDequantize: check_block_size(op); break;
    case OpKind::kRope:
    case OpKind::kRopeBackward: check_rope(op); break;
    case OpKind::kSdpaFp8Forward: check_sdpa_fp8(op); break;
    default: break;
  }
}

std::string known_runtime_fault(const OpRecord& op, int64_t loaded_version) {
  if (op.schema->kind != OpKind::kMoeGroupedMatmul || loaded_version > kMoeGatherLastFaulty) {
    return "";
  }
  const AttrValue* m = op.attr("mode");
  if (m == nullptr || std::get<int64_t>(*m) != kMoeGather) return "";
  return "mode GATHER is refused with cuDNN " + std::to_string(loaded_version) +
         ": cuDNN <= 9.19 ran it into an illegal memory access on sm_90 (H200); gather the "
         "token rows first (index_select) and use mode NONE";
}

}  // namespace cudnn_backend
