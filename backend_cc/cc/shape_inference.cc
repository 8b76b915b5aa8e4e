// Output shape inference (see shape_inference.h).
#include "backend_cc/cc/shape_inference.h"

#include <algorithm>
#include <numeric>

#include "backend_cc/cc/errors.h"
#include "backend_cc/cc/op_rules.h"

namespace cudnn_backend {

namespace {

using Dims = std::vector<int64_t>;

std::string where(const OpRecord& op) {
  return std::string(op.schema->method) + " '" + op.name + "'";
}

const Dims* dims_of(const OpRecord& op, const char* port, const GraphRecord& g) {
  const int t = op.input(port);
  if (t < 0) return nullptr;
  const Dims& d = g.tensor(t).dim;
  return d.empty() ? nullptr : &d;
}

// Numpy broadcast over equal ranks; throws when two extents differ and neither is 1.
std::optional<Dims> broadcast(const OpRecord& op, const GraphRecord& g) {
  Dims out;
  size_t rank = 0;
  for (const auto& [port, t] : op.inputs) {
    const Dims& d = g.tensor(t).dim;
    if (d.empty()) return std::nullopt;
    // cuDNN pointwise descriptors reject inputs of different ranks (the IR's right-aligned
    // broadcast allows them): the lowering must pad with leading 1s.
    if (rank != 0 && d.size() != rank) {
      throw GraphNotSupported(where(op) + ": input '" + port + "' has rank " +
                              std::to_string(d.size()) + " but an earlier input has rank " +
                              std::to_string(rank) +
                              "; cuDNN pointwise ops need equal ranks (pad with leading 1s)");
    }
    rank = d.size();
    if (d.size() > out.size()) out.insert(out.begin(), d.size() - out.size(), 1);
    const size_t offset = out.size() - d.size();
    for (size_t i = 0; i < d.size(); ++i) {
      int64_t& o = out[offset + i];
      if (o == d[i] || d[i] == 1) continue;
      if (o == 1) {
        o = d[i];
        continue;
      }
      throw ArgumentValueError(where(op) + ": input '" + port + "' extent " +
                               std::to_string(d[i]) + " at axis " + std::to_string(offset + i) +
                               " does not broadcast against " + std::to_string(o));
    }
  }
  return out;
}

std::optional<Dims> matmul_dims(const OpRecord& op, const GraphRecord& g) {
  const Dims* a = dims_of(op, "A", g);
  const Dims* b = dims_of(op, "B", g);
  if (a == nullptr || b == nullptr) return std::nullopt;
  if (a->size() < 2 || b->size() < 2) {
    throw ArgumentValueError(where(op) + ": A and B must have rank >= 2");
  }
  if (a->back() != (*b)[b->size() - 2]) {
    throw ArgumentValueError(where(op) + ": A[-1]=" + std::to_string(a->back()) +
                             " does not match B[-2]=" + std::to_string((*b)[b->size() - 2]));
  }
  const size_t rank = std::max(a->size(), b->size());
  Dims out(rank, 1);
  for (size_t i = 0; i + 2 < rank; ++i) {
    const int64_t ea = i + a->size() >= rank ? (*a)[i + a->size() - rank] : 1;
    const int64_t eb = i + b->size() >= rank ? (*b)[i + b->size() - rank] : 1;
    if (ea != eb && ea != 1 && eb != 1) {
      throw ArgumentValueError(where(op) + ": batch extents " + std::to_string(ea) + " and " +
                               std::to_string(eb) + " do not broadcast");
    }
    out[i] = std::max(ea, eb);
  }
  out[rank - 2] = (*a)[a->size() - 2];
  out[rank - 1] = b->back();
  return out;
}

std::optional<Dims> conv_fprop_dims(const OpRecord& op, const GraphRecord& g) {
  const Dims* x = dims_of(op, "image", g);
  const Dims* w = dims_of(op, "weight", g);
  if (x == nullptr || w == nullptr) return std::nullopt;
  if (x->size() < 3 || x->size() != w->size()) {
    throw ArgumentValueError(where(op) + ": image and weight must have the same rank >= 3");
  }
  const size_t spatial = x->size() - 2;
  const ConvGeometry geo = conv_geometry(op, spatial);
  Dims y = {(*x)[0], (*w)[0]};
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t span = ((*w)[i + 2] - 1) * geo.dilation[i] + 1;
    const int64_t o =
        ((*x)[i + 2] + geo.pre_padding[i] + geo.post_padding[i] - span) / geo.stride[i] + 1;
    if (o <= 0) {
      throw ArgumentValueError(where(op) + ": output extent at spatial axis " +
                               std::to_string(i) + " would be " + std::to_string(o));
    }
    y.push_back(o);
  }
  return y;
}

std::optional<Dims> conv_dgrad_dims(const OpRecord& op, const GraphRecord& g) {
  const Dims* dy = dims_of(op, "loss", g);
  const Dims* w = dims_of(op, "filter", g);
  if (dy == nullptr || w == nullptr) return std::nullopt;
  if (dy->size() < 3 || dy->size() != w->size()) {
    throw ArgumentValueError(where(op) + ": loss and filter must have the same rank >= 3");
  }
  const size_t spatial = dy->size() - 2;
  const ConvGeometry geo = conv_geometry(op, spatial);
  // With stride > 1 several input extents map to the same output; this picks the smallest.
  Dims dx = {(*dy)[0], (*w)[1]};
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t v = ((*dy)[i + 2] - 1) * geo.stride[i] + ((*w)[i + 2] - 1) * geo.dilation[i] +
                      1 - geo.pre_padding[i] - geo.post_padding[i];
    if (v <= 0) return std::nullopt;
    dx.push_back(v);
  }
  return dx;
}

// Statistics of a norm: axes in `keep` keep the input extent, the rest become 1.
Dims keep_axes(const Dims& input, const std::vector<size_t>& keep) {
  Dims out(input.size(), 1);
  for (size_t axis : keep) {
    if (axis < input.size()) out[axis] = input[axis];
  }
  return out;
}

// rms/layer norm rule: axes where scale's extent is 1 are kept, the normalized axes become 1;
// with no scale only axis 0 is kept. `first` axes below it are always kept (adaptive LN).
Dims stats_from_scale(const Dims& input, const Dims* scale, size_t first) {
  Dims out(input.size(), 1);
  for (size_t i = 0; i < input.size(); ++i) {
    if (i < first) {
      out[i] = input[i];
    } else if (scale == nullptr) {
      out[i] = i == 0 ? input[i] : 1;
    } else if (i < scale->size() && (*scale)[i] == 1) {
      out[i] = input[i];
    }
  }
  return out;
}

std::optional<Dims> norm_forward_dims(const OpRecord& op, const std::string& port,
                                      const GraphRecord& g) {
  const Dims* x = dims_of(op, "input", g);
  if (x == nullptr) return std::nullopt;
  if (port == "Y") return *x;
  switch (op.schema->norm_mode) {
    case CUDNN_BATCH_NORM: return keep_axes(*x, {1});
    case CUDNN_INSTANCE_NORM: return keep_axes(*x, {0, 1});
    default: break;
  }
  // layernorm: a caller-dimensioned sibling statistic wins, so mean and inv_var agree.
  for (const char* sibling : {"mean", "inv_var"}) {
    const int t = op.output(sibling);
    if (port != sibling && t >= 0 && g.tensor(t).dim_assigned) return g.tensor(t).dim;
  }
#if CUDNN_VERSION >= 90700
  const size_t first = op.schema->norm_mode == CUDNN_ADA_LAYER_NORM ? 1 : 0;
#else
  const size_t first = 0;
#endif
  return stats_from_scale(*x, dims_of(op, "scale", g), first);
}

std::optional<Dims> norm_backward_dims(const OpRecord& op, const std::string& port,
                                       const GraphRecord& g) {
  const Dims* like = port == "DX" ? dims_of(op, "input", g) : dims_of(op, "scale", g);
  if (like == nullptr) return std::nullopt;
  return *like;
}

std::optional<Dims> concatenate_dims(const OpRecord& op, const GraphRecord& g) {
  const std::vector<int> inputs = op.list_input("inputs");
  int64_t axis = std::get<int64_t>(*op.attr("axis"));
  Dims out;
  for (int t : inputs) {
    const Dims& d = g.tensor(t).dim;
    if (d.empty()) return std::nullopt;
    if (out.empty()) {
      out = d;
      if (axis < 0) axis += static_cast<int64_t>(d.size());
      if (axis < 0 || axis >= static_cast<int64_t>(d.size())) {
        throw ArgumentValueError(where(op) + ": axis is out of range for rank " +
                                 std::to_string(d.size()));
      }
      continue;
    }
    if (d.size() != out.size()) {
      throw ArgumentValueError(where(op) + ": every input must have the same rank");
    }
    for (size_t i = 0; i < d.size(); ++i) {
      if (static_cast<int64_t>(i) == axis) {
        out[i] += d[i];
      } else if (d[i] != out[i]) {
        throw ArgumentValueError(where(op) + ": inputs differ at axis " + std::to_string(i) +
                                 ", which is not the concatenation axis");
      }
    }
  }
  return out;
}

std::optional<Dims> sdpa_forward_dims(const OpRecord& op, const std::string& port,
                                      const GraphRecord& g) {
  const Dims* q = dims_of(op, "q", g);
  const Dims* v = dims_of(op, "v", g);
  if (q == nullptr || v == nullptr) return std::nullopt;
  Dims out = *q;
  out.back() = port == "O" ? v->back() : 1;
  return out;
}

std::optional<Dims> like_port(const OpRecord& op, const char* port, const GraphRecord& g) {
  const Dims* d = dims_of(op, port, g);
  if (d == nullptr) return std::nullopt;
  return *d;
}

std::optional<Dims> block_scale_dims(const OpRecord& op, const std::string& port,
                                     const GraphRecord& g) {
  const Dims* x = dims_of(op, "input", g);
  if (x == nullptr) return std::nullopt;
  if (port == "Y") return *x;
  Dims scale = *x;
  const size_t axis = quantize_axis(op, x->size());
  const int64_t block = std::get<int64_t>(*op.attr("block_size"));
  scale[axis] = (scale[axis] + block - 1) / block;
  return scale;
}

std::optional<Dims> moe_dims(const OpRecord& op, const GraphRecord& g) {
  // moe_grouped_matmul_mode GATHER = 2: one output row per routed token (token_index).
  const AttrValue* mode = op.attr("mode");
  const bool gather = mode != nullptr && std::get<int64_t>(*mode) == 2;
  const Dims* rows = dims_of(op, gather ? "token_index" : "token", g);
  const Dims* weight = dims_of(op, "weight", g);
  if (rows == nullptr || weight == nullptr || rows->size() < 2) return std::nullopt;
  return Dims{1, (*rows)[rows->size() - 2], weight->back()};
}

std::optional<Dims> moe_bwd_dims(const OpRecord& op, const GraphRecord& g) {
  const Dims* offsets = dims_of(op, "first_token_offset", g);
  const Dims* token = dims_of(op, "token", g);
  const Dims* dout = dims_of(op, "doutput", g);
  if (offsets == nullptr || token == nullptr || dout == nullptr) return std::nullopt;
  return Dims{offsets->front(), token->back(), dout->back()};
}

std::optional<Dims> slice_dims(const OpRecord& op, const GraphRecord& g) {
  const Dims* x = dims_of(op, "input", g);
  if (x == nullptr) return std::nullopt;
  Dims out;
  for (const SliceAxis& a : resolve_slices(op, *x)) out.push_back(a.extent);
  return out;
}

std::optional<Dims> transpose_dims(const OpRecord& op, const GraphRecord& g) {
  const Dims* x = dims_of(op, "input", g);
  if (x == nullptr) return std::nullopt;
  Dims out;
  for (int64_t axis : checked_permutation(op, x->size())) out.push_back((*x)[axis]);
  return out;
}

bool is_amax(const std::string& port) {
  return port.rfind("Amax_", 0) == 0 || port.rfind("amax_", 0) == 0;
}

std::optional<Dims> sdpa_fp8_dims(const OpRecord& op, const std::string& port,
                                  const GraphRecord& g) {
  if (is_amax(port)) return Dims{1, 1, 1, 1};
  if (op.schema->kind == OpKind::kSdpaFp8Forward) return sdpa_forward_dims(op, port, g);
  return like_port(op, port == "dQ" ? "q" : port == "dK" ? "k" : "v", g);
}

// Strides of block_scale_quantize's outputs with transpose=True: the blocked axis packed
// innermost, the other axes in the input's order.
std::vector<int64_t> blocked_axis_innermost(const OpRecord& op, const Dims& dim,
                                            const GraphRecord& g) {
  const Dims& x_stride = g.tensor(op.input("input")).stride;
  const size_t axis = quantize_axis(op, dim.size());
  Dims reference = x_stride.size() == dim.size() ? x_stride : strides_like(dim, {});
  // Order the other axes like the input, then put the blocked one below all of them.
  Dims order = reference;
  order[axis] = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i != axis) order[i] = reference[i] + 1;
  }
  return strides_like(dim, order);
}

// The input whose axis order an output inherits, or -1 for row-major.
int layout_source(const OpRecord& op, const std::string& port, const Dims& dim,
                  const GraphRecord& g) {
  switch (op.schema->kind) {
    case OpKind::kPointwise:
      for (const auto& binding : op.inputs) {
        if (g.tensor(binding.second).dim == dim) return binding.second;
      }
      return -1;
    case OpKind::kConvFprop:
    case OpKind::kConvWgrad: return op.input("image");
    case OpKind::kConvDgrad: return op.input("loss");
    case OpKind::kNormForward: return port == "Y" ? op.input("input") : -1;
    case OpKind::kNormBackward: return port == "DX" ? op.input("input") : op.input("scale");
    case OpKind::kReduction: return op.input("input");
    case OpKind::kConcatenate: {
      const std::vector<int> inputs = op.list_input("inputs");
      return inputs.empty() ? -1 : inputs.front();
    }
    case OpKind::kSdpaForward: return port == "O" ? op.input("q") : -1;
    case OpKind::kSdpaBackward:
      if (port == "dQ") return op.input("q");
      if (port == "dK") return op.input("k");
      return op.input("v");
    case OpKind::kSdpaFp8Forward: return port == "O" ? op.input("q") : -1;
    case OpKind::kSdpaFp8Backward:
      if (is_amax(port)) return -1;
      if (port == "dQ") return op.input("q");
      if (port == "dK") return op.input("k");
      return op.input("v");
    case OpKind::kBatchnormInference:
    case OpKind::kBlockScaleQuantize:
    case OpKind::kBlockScaleDequantize:
    case OpKind::kSlice:
    case OpKind::kRope: return op.input("input");
    case OpKind::kRopeBackward: return op.input("dY");
    default: return -1;  // MoE and transpose outputs are packed row-major
  }
}

}  // namespace

std::vector<int64_t> strides_like(const std::vector<int64_t>& dim,
                                  const std::vector<int64_t>& reference) {
  std::vector<size_t> order(dim.size());
  std::iota(order.begin(), order.end(), 0);
  if (reference.size() == dim.size()) {
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return reference[a] > reference[b]; });
  }
  std::vector<int64_t> stride(dim.size(), 1);
  int64_t running = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    stride[*it] = running;
    running *= dim[*it];
  }
  return stride;
}

std::optional<std::vector<int64_t>> infer_output_dim(const OpRecord& op, const std::string& port,
                                                     const GraphRecord& g) {
  switch (op.schema->kind) {
    case OpKind::kPointwise: return broadcast(op, g);
    case OpKind::kMatmul: return matmul_dims(op, g);
    case OpKind::kConvFprop: return conv_fprop_dims(op, g);
    case OpKind::kConvDgrad: return conv_dgrad_dims(op, g);
    case OpKind::kNormForward: return norm_forward_dims(op, port, g);
    case OpKind::kNormBackward: return norm_backward_dims(op, port, g);
    case OpKind::kGenStats: {
      const Dims* x = dims_of(op, "input", g);
      if (x == nullptr) return std::nullopt;
      return keep_axes(*x, {1});
    }
    case OpKind::kConcatenate: return concatenate_dims(op, g);
    case OpKind::kSdpaForward: return sdpa_forward_dims(op, port, g);
    case OpKind::kSdpaBackward: {
      const char* like = port == "dQ" ? "q" : port == "dK" ? "k" : "v";
      const Dims* d = dims_of(op, like, g);
      if (d == nullptr) return std::nullopt;
      return *d;
    }
    case OpKind::kBatchnormInference:
    case OpKind::kBlockScaleDequantize:
    case OpKind::kRope: return like_port(op, "input", g);
    case OpKind::kRopeBackward: return like_port(op, "dY", g);
    case OpKind::kBlockScaleQuantize: return block_scale_dims(op, port, g);
    case OpKind::kMoeGroupedMatmul: return moe_dims(op, g);
    case OpKind::kMoeGroupedMatmulBwd: return moe_bwd_dims(op, g);
    case OpKind::kSlice: return slice_dims(op, g);
    case OpKind::kTranspose: return transpose_dims(op, g);
    case OpKind::kSdpaFp8Forward:
    case OpKind::kSdpaFp8Backward: return sdpa_fp8_dims(op, port, g);
    case OpKind::kSdpaMxfp8Forward:
    case OpKind::kSdpaMxfp8Backward:  // never recorded (OpSchema::no_lowering)
    case OpKind::kConvWgrad:
    case OpKind::kReduction:
    case OpKind::kReshape: return std::nullopt;  // the caller must set these (`push` ops)
  }
  return std::nullopt;
}

std::vector<int64_t> infer_output_stride(const OpRecord& op, const std::string& port,
                                         const std::vector<int64_t>& dim,
                                         const GraphRecord& g) {
  if (op.schema->kind == OpKind::kBlockScaleQuantize) {
    const AttrValue* transpose = op.attr("transpose");
    if (transpose != nullptr && std::get<bool>(*transpose)) {
      return blocked_axis_innermost(op, dim, g);
    }
  }
  const int source = layout_source(op, port, dim, g);
  if (source < 0) return strides_like(dim, {});
  return strides_like(dim, g.tensor(source).stride);
}

}  // namespace cudnn_backend
