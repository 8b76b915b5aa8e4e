// Operation descriptors from operands (see op_primitives.h); attribute names follow each
// descriptor type's list in cudnn_graph.h.
#include "backend_cc/cc/op_primitives.h"

namespace cudnn_backend {

namespace {

bool is_backward_pointwise(int mode) {
  switch (mode) {
    case CUDNN_POINTWISE_RELU_BWD:
    case CUDNN_POINTWISE_TANH_BWD:
    case CUDNN_POINTWISE_SIGMOID_BWD:
    case CUDNN_POINTWISE_ELU_BWD:
    case CUDNN_POINTWISE_GELU_BWD:
    case CUDNN_POINTWISE_SOFTPLUS_BWD:
    case CUDNN_POINTWISE_SWISH_BWD:
    case CUDNN_POINTWISE_GELU_APPROX_TANH_BWD: return true;
    default: return false;
  }
}

// Scalar op parameters go in as DOUBLE for double math and FLOAT otherwise.
void set_scalar(Descriptor& d, Attr attr, double value, cudnnDataType_t prec) {
  if (prec == CUDNN_DATA_DOUBLE) {
    d.set_double(attr, value);
  } else {
    d.set_float(attr, static_cast<float>(value));
  }
}

}  // namespace

Descriptor pointwise_operation(const PointwiseSettings& s, const Descriptor& x,
                               const Descriptor* b, const Descriptor* t, const Descriptor& y,
                               std::vector<Descriptor>& keepalive, const std::string& context) {
  Descriptor pw = BACKEND_DESCRIPTOR(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  pw.set_context(context);
  pw.set_enum(ATTR(CUDNN_ATTR_POINTWISE_MODE), CUDNN_TYPE_POINTWISE_MODE, s.mode);
  pw.set_data_type(ATTR(CUDNN_ATTR_POINTWISE_MATH_PREC), s.math_prec);
  if (s.lower_clip) set_scalar(pw, ATTR(CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP), *s.lower_clip, s.math_prec);
  if (s.upper_clip) set_scalar(pw, ATTR(CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP), *s.upper_clip, s.math_prec);
  if (s.negative_slope) {
    set_scalar(pw, ATTR(CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE), *s.negative_slope, s.math_prec);
  }
  if (s.swish_beta) set_scalar(pw, ATTR(CUDNN_ATTR_POINTWISE_SWISH_BETA), *s.swish_beta, s.math_prec);
  if (s.axis) pw.set_int64(ATTR(CUDNN_ATTR_POINTWISE_AXIS), *s.axis);
  pw.finalize();

  Descriptor d = BACKEND_DESCRIPTOR(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  d.set_context(context);
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR), pw);
  if (is_backward_pointwise(s.mode)) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_POINTWISE_DYDESC), x);
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_POINTWISE_XDESC), *b);
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_POINTWISE_DXDESC), y);
  } else {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_POINTWISE_XDESC), x);
    if (b != nullptr) d.set_desc(ATTR(CUDNN_ATTR_OPERATION_POINTWISE_BDESC), *b);
    if (t != nullptr) d.set_desc(ATTR(CUDNN_ATTR_OPERATION_POINTWISE_TDESC), *t);  // select mask
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_POINTWISE_YDESC), y);
  }
  d.finalize();
  keepalive.push_back(std::move(pw));
  return d;
}

Descriptor matmul_operation(cudnnDataType_t comp_type, double padding, const Descriptor& a,
                            const Descriptor& b, const Descriptor& c,
                            std::vector<Descriptor>& keepalive, const std::string& context) {
  Descriptor mm = BACKEND_DESCRIPTOR(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  mm.set_context(context);
  mm.set_data_type(ATTR(CUDNN_ATTR_MATMUL_COMP_TYPE), comp_type);
  if (padding != 0.0) mm.set_double(ATTR(CUDNN_ATTR_MATMUL_PADDING_VALUE), padding);
  mm.finalize();

  Descriptor d = BACKEND_DESCRIPTOR(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  d.set_context(context);
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_MATMUL_ADESC), a);
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_MATMUL_BDESC), b);
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_MATMUL_CDESC), c);
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_MATMUL_DESC), mm);
  d.finalize();
  keepalive.push_back(std::move(mm));
  return d;
}

Descriptor reduction_operation(int mode, cudnnDataType_t comp_type, const Descriptor& x,
                               const Descriptor& y, const Descriptor* group_offset,
                               std::vector<Descriptor>& keepalive, const std::string& context) {
  Descriptor red = BACKEND_DESCRIPTOR(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  red.set_context(context);
  red.set_enum(ATTR(CUDNN_ATTR_REDUCTION_OPERATOR), CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, mode);
  red.set_data_type(ATTR(CUDNN_ATTR_REDUCTION_COMP_TYPE), comp_type);
  red.finalize();

  Descriptor d = BACKEND_DESCRIPTOR(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  d.set_context(context);
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_REDUCTION_XDESC), x);
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_REDUCTION_YDESC), y);
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_REDUCTION_DESC), red);
#if CUDNN_VERSION >= 92400
  if (group_offset != nullptr) {
    d.set_desc(ATTR(CUDNN_ATTR_OPERATION_REDUCTION_GROUP_OFFSET_DESC), *group_offset);
  }
#else
  (void)group_offset;  // the op table declines group_offset with these headers
#endif
  d.finalize();
  keepalive.push_back(std::move(red));
  return d;
}

Descriptor reshape_operation(const Descriptor& x, const Descriptor& y, int mode,
                             const std::string& context) {
  Descriptor d = BACKEND_DESCRIPTOR(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
  d.set_context(context);
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_RESHAPE_XDESC), x);
  d.set_desc(ATTR(CUDNN_ATTR_OPERATION_RESHAPE_YDESC), y);
#if CUDNN_VERSION >= 92200
  if (mode >= 0) d.set_enum(ATTR(CUDNN_ATTR_OPERATION_RESHAPE_MODE), CUDNN_TYPE_RESHAPE_MODE, mode);
#else
  (void)mode;  // before 9.22 a reshape is always a view (enums.cc)
#endif
  d.finalize();
  return d;
}

}  // namespace cudnn_backend
