// SDPA forward/backward through cuDNN's native descriptors:
//   CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR (cuDNN 9.13; block mask 9.14; page tables and
//   padding-mask sequence lengths 9.15) and CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR (9.17).
//
//   O = softmax(padding_mask(block_mask(Q K^T) * scale)) V, Stats = per-row softmax statistics.
//
// Anything else the frontend's sdpa kwargs express (causal/band masks, bias, dropout, ALiBi,
// score modifiers, ...) is declined when the op is recorded (op_schema.cc), so the builders
// here only see what the descriptors can carry. Each attribute is compiled in only when the
// build headers define it; the op table declines ports newer than the headers.
//
// SDPA_BWD, measured against the libraries themselves (no GPU needed for the first point):
// 9.17-9.20 finalize the descriptor but every operation graph holding it fails buildDAG
// (BAD_PARAM), so the op table asks for a loaded 9.21+; 9.21-9.24 build the graph, but their
// SDPA_BWD engines run on sm_100 only ("Unified SDPA bprop currently only supports
// ARCH_10X"). The Python lowering therefore uses this descriptor only on sm_100+ with 9.21+
// and lowers sdpa_backward to the composite fused-attention graph everywhere else
// (cudnn/backend/sdpa_bwd_route.py, sdpa_bwd_composite.py).
#include "backend_cc/cc/errors.h"
#include "backend_cc/cc/op_descriptors.h"

namespace cudnn_backend {

Descriptor build_sdpa_forward(const GraphRecord& /*graph*/, const OpRecord& op,
                              const TensorDescriptors& t) {
#if CUDNN_VERSION >= 91300
  Descriptor d = BACKEND_DESCRIPTOR(CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR);
  d.set_context(op_context(op));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC), t.required_port(op, "q"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC), t.required_port(op, "k"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC), t.required_port(op, "v"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC), t.at(op.output("O")));
  if (op.output("Stats") >= 0) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC), t.at(op.output("Stats")));
  }
  if (const Descriptor* scale = t.port(op, "attn_scale")) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC), *scale);
  }
#if CUDNN_VERSION >= 91400
  if (const Descriptor* mask = t.port(op, "block_mask")) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_FWD_BLOCK_MASK_DESC), *mask);
  }
#endif
#if CUDNN_VERSION >= 91500
  if (const Descriptor* s = t.port(op, "seq_len_q")) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_FWD_SEQ_LEN_QDESC), *s);
  }
  if (const Descriptor* s = t.port(op, "seq_len_kv")) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_FWD_SEQ_LEN_KVDESC), *s);
  }
  if (const Descriptor* p = t.port(op, "paged_attention_k_table")) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_FWD_PAGE_TABLE_KDESC), *p);
  }
  if (const Descriptor* p = t.port(op, "paged_attention_v_table")) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_FWD_PAGE_TABLE_VDESC), *p);
  }
#endif
  d.finalize();
  return d;
#else
  (void)t;
  throw GraphNotSupported(op_context(op) + ": built against cuDNN headers without "
                                           "CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR (9.13)");
#endif
}

Descriptor build_sdpa_backward(const GraphRecord& /*graph*/, const OpRecord& op,
                               const TensorDescriptors& t) {
#if CUDNN_VERSION >= 91700
  Descriptor d = BACKEND_DESCRIPTOR(CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR);
  d.set_context(op_context(op));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_BWD_QDESC), t.required_port(op, "q"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_BWD_KDESC), t.required_port(op, "k"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_BWD_VDESC), t.required_port(op, "v"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_BWD_ODESC), t.required_port(op, "o"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_BWD_DODDESC), t.required_port(op, "dO"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_BWD_STATSDESC), t.required_port(op, "stats"));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_BWD_DQDESC), t.at(op.output("dQ")));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_BWD_DKDESC), t.at(op.output("dK")));
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_BWD_DVDESC), t.at(op.output("dV")));
  if (const Descriptor* scale = t.port(op, "attn_scale")) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_BWD_SCALEDESC), *scale);
  }
  if (const Descriptor* s = t.port(op, "seq_len_q")) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_BWD_SEQ_LEN_QDESC), *s);
  }
  if (const Descriptor* s = t.port(op, "seq_len_kv")) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_SDPA_BWD_SEQ_LEN_KVDESC), *s);
  }
  d.finalize();
  return d;
#else
  (void)t;
  throw GraphNotSupported(op_context(op) + ": built against cuDNN headers without "
                                           "CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR (9.17)");
#endif
}

}  // namespace cudnn_backend
