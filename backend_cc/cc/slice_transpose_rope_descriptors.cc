// Slice, transpose and RoPE through their native descriptors:
//   CUDNN_BACKEND_OPERATION_SLICE_DESCRIPTOR, _TRANSPOSE_DESCRIPTOR (cuDNN 9.22),
//   CUDNN_BACKEND_OPERATION_ROPE_FWD_DESCRIPTOR (9.24) and _ROPE_BWD_DESCRIPTOR (9.25).
// RoPE rotates the trailing `rope_dim` entries of the head dim by the angles in `freqs`
// ([S, 1, 1, D], non-interleaved halves) and multiplies everything by `output_scale`.
// As in quantize_moe_descriptors.cc, a builder whose descriptor the headers lack is only
// reachable through a bug: the op table declines those ops first.
#include <cudnn_graph.h>

#include "backend_cc/cc/errors.h"
#include "backend_cc/cc/op_descriptors.h"
#include "backend_cc/cc/op_rules.h"

namespace cudnn_backend {

namespace {

[[maybe_unused]] [[noreturn]] void missing(const OpRecord& op) {
  throw BackendError("internal: " + op_context(op) + " reached a descriptor these cuDNN "
                     "headers lack; the op table should have declined it");
}

}  // namespace

Descriptor build_slice(const GraphRecord& g, const OpRecord& op, const TensorDescriptors& t) {
#if CUDNN_VERSION >= 92200
  std::vector<int64_t> starts, limits, strides;
  for (const SliceAxis& a : resolve_slices(op, g.tensor(op.input("input")).dim)) {
    starts.push_back(a.start);
    limits.push_back(a.stop);
    strides.push_back(a.step);
  }
  Descriptor d = BACKEND_DESCRIPTOR(CUDNN_BACKEND_OPERATION_SLICE_DESCRIPTOR);
  d.set_context(op_context(op));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SLICE_XDESC), t.required_port(op, "input"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SLICE_YDESC), t.at(op.output("OUT_0")));
  d.set_int64s(ATTR(CUDNN_ATTR_OPERATION_SLICE_START_INDICES), starts);
  d.set_int64s(ATTR(CUDNN_ATTR_OPERATION_SLICE_LIMIT_INDICES), limits);
  d.set_int64s(ATTR(CUDNN_ATTR_OPERATION_SLICE_STRIDES), strides);
  d.finalize();
  return d;
#else
  (void)g;
  (void)t;
  missing(op);
#endif
}

Descriptor build_transpose(const GraphRecord& g, const OpRecord& op,
                           const TensorDescriptors& t) {
#if CUDNN_VERSION >= 92200
  const size_t rank = g.tensor(op.input("input")).dim.size();
  Descriptor d = BACKEND_DESCRIPTOR(CUDNN_BACKEND_OPERATION_TRANSPOSE_DESCRIPTOR);
  d.set_context(op_context(op));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_TRANSPOSE_XDESC), t.required_port(op, "input"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_TRANSPOSE_YDESC), t.at(op.output("OUT_0")));
  d.set_int64s(ATTR(CUDNN_ATTR_OPERATION_TRANSPOSE_PERMUTATION), checked_permutation(op, rank));
  d.finalize();
  return d;
#else
  (void)g;
  (void)t;
  missing(op);
#endif
}

Descriptor build_rope(const OpRecord& op, const TensorDescriptors& t) {
#if CUDNN_VERSION >= 92400
  // The forward and backward descriptors take the same attributes under their own names.
  // The backward enumerators are in the 9.24 headers but marked 9.25: the op table gates
  // rope_backward on 9.25, so only a 9.25+ build and library reach that branch.
  struct Names {
    cudnnBackendDescriptorType_t type;
    const char* type_name;
    Attr in, freqs, out, scale, dim;
    const char* in_port;
  };
  const Names n = op.schema->kind == OpKind::kRope
      ? Names{CUDNN_BACKEND_OPERATION_ROPE_FWD_DESCRIPTOR, "CUDNN_BACKEND_OPERATION_ROPE_FWD_DESCRIPTOR",
              ATTR(CUDNN_ATTR_OPERATION_ROPE_FWD_XDESC), ATTR(CUDNN_ATTR_OPERATION_ROPE_FWD_FREQSDESC),
              ATTR(CUDNN_ATTR_OPERATION_ROPE_FWD_YDESC), ATTR(CUDNN_ATTR_OPERATION_ROPE_FWD_OUTPUT_SCALE),
              ATTR(CUDNN_ATTR_OPERATION_ROPE_FWD_ROPE_DIM), "input"}
      : Names{CUDNN_BACKEND_OPERATION_ROPE_BWD_DESCRIPTOR, "CUDNN_BACKEND_OPERATION_ROPE_BWD_DESCRIPTOR",
              ATTR(CUDNN_ATTR_OPERATION_ROPE_BWD_DYDESC), ATTR(CUDNN_ATTR_OPERATION_ROPE_BWD_FREQSDESC),
              ATTR(CUDNN_ATTR_OPERATION_ROPE_BWD_DXDESC), ATTR(CUDNN_ATTR_OPERATION_ROPE_BWD_OUTPUT_SCALE),
              ATTR(CUDNN_ATTR_OPERATION_ROPE_BWD_ROPE_DIM), "dY"};
  const AttrValue* scale = op.attr("output_scale");
  const AttrValue* rope_dim = op.attr("rope_dim");
  Descriptor d(n.type, n.type_name);
  d.set_context(op_context(op));
  d.set_desc(n.in, t.required_port(op, n.in_port));
  d.set_desc(n.freqs, t.required_port(op, "freqs"));
  d.set_desc(n.out, t.at(op.output("OUT_0")));
  d.set_float(n.scale, scale == nullptr ? 1.0f : static_cast<float>(std::get<double>(*scale)));
  d.set_int64(n.dim, rope_dim == nullptr ? 0 : std::get<int64_t>(*rope_dim));  // 0 = whole head
  d.finalize();
  return d;
#else
  (void)t;
  missing(op);
#endif
}

}  // namespace cudnn_backend
