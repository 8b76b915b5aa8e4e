// sdpa_fp8 / sdpa_fp8_backward as composite graphs (composite.h): the operation graphs
// cuDNN's FP8 fused-attention engines recognise on Hopper and newer. Q, K, V (and O, dO in
// the backward) are FP8 with one FLOAT scale per tensor ("descale" multiplies a product back
// to real units, "scale" maps a real value into its FP8 range); everything in between is
// FLOAT except the probabilities P and the gradient dS, which the pattern narrows to FP8
// before the matmuls that read them.
//
// Forward, with S_ij in real units and Stats the row logsumexp:
//   S     = Q K^T * attn_scale * descale_q * descale_k            [b, h_q, s_q, s_kv]
//   Stats = rowmax(S) + log(rowsum(exp(S - rowmax(S))))           [b, h_q, s_q, 1]
//   P     = exp(S - rowmax) / rowsum;  Amax_S = max|P|
//   O     = (fp8(P * scale_s) V) * descale_s * descale_v * scale_o;  Amax_O = max|O / scale_o|
// Backward, from the forward's Stats:
//   D   = rowsum(dO * O) * descale_dO * descale_o
//   P   = exp(S - Stats);  dV = (fp8(P * scale_s)^T dO) * descale_s * descale_dO * scale_dV
//   dS  = ((dO V^T) * descale_dO * descale_v - D) * P * attn_scale;  amax_dP = max|dS|
//   dQ  = (fp8(dS * scale_dP) K) * descale_dP * descale_k * scale_dQ
//   dK  = (fp8(dS * scale_dP)^T Q) * descale_dP * descale_q * scale_dK
// Each amax_* is taken before its scale. With fewer K/V heads than query heads (h_q a
// multiple of h_k and h_v), dK and dV are formed per query head and summed over each group.
//
// The shape of the graph is dictated by the pattern: K (and V in the backward) enter
// transposed, [b, h, d, s_kv] over their own memory (composite.h, transposed_inputs), the
// backward reads K back through a view-only reshape, and P^T / dS^T are view-only reshapes
// of the FP8 P and dS.
#include <cudnn_graph.h>

#include "backend_cc/cc/composite.h"
#include "backend_cc/cc/enums.h"
#include "backend_cc/cc/errors.h"

namespace cudnn_backend {

namespace {

using Dims = std::vector<int64_t>;
constexpr int64_t kFloat = data_type::kFloat;

struct AttnShape {
  int64_t b, h_q, s_q, d_qk, h_k, s_kv, h_v, d_v;

  Dims scores() const { return {b, h_q, s_q, s_kv}; }
  Dims rows() const { return {b, h_q, s_q, 1}; }
  // [b, h_q, s_kv, s_q] over a packed [b, h_q, s_q, s_kv] buffer.
  InternalLayout scores_transposed(int64_t data_type) const {
    return {{b, h_q, s_kv, s_q}, {h_q * s_q * s_kv, s_q * s_kv, 1, s_kv}, data_type};
  }
};

std::string where(const OpRecord& op) {
  return std::string(op.schema->method) + " '" + op.name + "'";
}

// Rank-4 dims of `port`; before validate() an op output may have none yet (placeholder).
Dims dims4(const OpRecord& op, const GraphRecord& g, const char* port, bool strict) {
  const Dims& d = g.tensor(op.input(port)).dim;
  if (d.size() == 4) return d;
  if (strict) {
    throw ArgumentValueError(where(op) + ": " + port + " must have rank 4 [b, h, s, d], got " +
                             dims_text(d));
  }
  return {1, 1, 1, 1};
}

AttnShape attn_shape(const OpRecord& op, const GraphRecord& g, bool strict) {
  const Dims q = dims4(op, g, "q", strict);
  const Dims k = dims4(op, g, "k", strict);
  const Dims v = dims4(op, g, "v", strict);
  const AttnShape s{q[0], q[1], q[2], q[3], k[1], k[2], v[1], v[3]};
  if (strict) {
    if (k[0] != s.b || v[0] != s.b || k[3] != s.d_qk || v[2] != s.s_kv) {
      throw ArgumentValueError(where(op) + ": q " + dims_text(q) + ", k " + dims_text(k) +
                               " and v " + dims_text(v) + " do not form [b, h, s, d] attention "
                               "inputs (equal batch, equal q/k head dims, equal k/v lengths)");
    }
    if (s.h_k <= 0 || s.h_v <= 0 || s.h_q % s.h_k != 0 || s.h_q % s.h_v != 0) {
      throw ArgumentValueError(where(op) + ": the query heads (" + std::to_string(s.h_q) +
                               ") must be a multiple of the key and value heads");
    }
  }
  return s;
}

void expect_dims(const OpRecord& op, const GraphRecord& g, const char* port, const Dims& want) {
  const Dims& got = g.tensor(op.input(port)).dim;
  if (got != want) {
    throw ArgumentValueError(where(op) + ": " + port + " must have dims " + dims_text(want) +
                             ", got " + dims_text(got));
  }
}

// Steps over a sink, with FLOAT intermediates named after the operand they apply.
class Chain {
 public:
  explicit Chain(CompositeSink& sink) : sink_(sink) {}

  int tensor(const std::string& name, const Dims& dims, int64_t data_type = kFloat) {
    return sink_.internal(name, InternalLayout{dims, {}, data_type});
  }
  int mul(int x, int b, const std::string& name, const Dims& dims) {
    const int y = tensor(name, dims);
    sink_.pointwise(CUDNN_POINTWISE_MUL, x, b, y);
    return y;
  }
  CompositeSink& sink() { return sink_; }

 private:
  CompositeSink& sink_;
};

// C = (A B [summed over head groups]) * descale_a * descale_b * scale_c and
// amax_c = max|C / scale_c|: the FP8 matmul block of the patterns.
void fp8_matmul(Chain& c, const std::string& name, int a, int b, int descale_a, int descale_b,
                int scale_c, int out, int amax_out, Dims dims, int64_t out_heads) {
  const int acc = c.tensor(name + "_acc", dims);
  c.sink().matmul(a, b, acc);
  int last = acc;
  if (out_heads != dims[1]) {
    dims[1] = out_heads;
    last = c.tensor(name + "_group_sum", dims);
    c.sink().reduction(CUDNN_REDUCE_TENSOR_ADD, acc, last);
  }
  last = c.mul(last, descale_a, name + "_descale_a", dims);
  last = c.mul(last, descale_b, name + "_descale_b", dims);
  c.sink().pointwise(CUDNN_POINTWISE_MUL, last, scale_c, out);
  c.sink().reduction(CUDNN_REDUCE_TENSOR_AMAX, last, amax_out);
}

// S = Q K^T [* attn_scale] * descale_q * descale_k in real units; K is described as K^T.
int scaled_scores(Chain& c, const OpRecord& op, const Dims& scores) {
  const auto in = [&](const char* port) { return op.input(port); };
  const int product = c.tensor("S", scores);
  c.sink().matmul(in("q"), in("k"), product);
  int logits = product;
  if (in("attn_scale") >= 0) logits = c.mul(logits, in("attn_scale"), "S_scaled", scores);
  logits = c.mul(logits, in("descale_q"), "S_descale_q", scores);
  return c.mul(logits, in("descale_k"), "S_descale_k", scores);
}

}  // namespace

void expand_sdpa_fp8_forward(const OpRecord& op, const GraphRecord& g, CompositeSink& sink,
                             bool strict) {
  const AttnShape s = attn_shape(op, g, strict);
  const auto in = [&](const char* port) { return op.input(port); };
  Chain c(sink);
  const Dims scores = s.scores(), rows = s.rows();

  const int logits = scaled_scores(c, op, scores);

  // Softmax with its statistics, as the pattern spells it (max, sub, exp, sum, log, add, div).
  const int row_max = c.tensor("row_max", rows);
  sink.reduction(CUDNN_REDUCE_TENSOR_MAX, logits, row_max);
  const int shifted = c.tensor("S_shifted", scores);
  sink.pointwise(CUDNN_POINTWISE_SUB, logits, row_max, shifted);
  const int exps = c.tensor("exp_S", scores);
  sink.pointwise(CUDNN_POINTWISE_EXP, shifted, -1, exps);
  const int row_sum = c.tensor("row_sum", rows);
  sink.reduction(CUDNN_REDUCE_TENSOR_ADD, exps, row_sum);
  const int log_sum = c.tensor("log_row_sum", rows);
  sink.pointwise(CUDNN_POINTWISE_LOG, row_sum, -1, log_sum);
  int stats = op.output("Stats");
  if (stats < 0) stats = c.tensor("stats", rows);  // inference: computed, kept virtual
  sink.pointwise(CUDNN_POINTWISE_ADD, row_max, log_sum, stats);
  const int probs = c.tensor("P", scores);
  sink.pointwise(CUDNN_POINTWISE_DIV, exps, row_sum, probs);
  sink.reduction(CUDNN_REDUCE_TENSOR_AMAX, probs, op.output("Amax_S"));

  // O = fp8(P * scale_s) V, descaled and scaled into O's FP8 range.
  const int probs_fp8 = c.tensor("P_fp8", scores, g.tensor(in("q")).data_type);
  sink.pointwise(CUDNN_POINTWISE_MUL, probs, in("scale_s"), probs_fp8);
  fp8_matmul(c, "O", probs_fp8, in("v"), in("descale_s"), in("descale_v"), in("scale_o"),
             op.output("O"), op.output("Amax_O"), {s.b, s.h_q, s.s_q, s.d_v}, s.h_q);
}

void expand_sdpa_fp8_backward(const OpRecord& op, const GraphRecord& g, CompositeSink& sink,
                              bool strict) {
  const AttnShape s = attn_shape(op, g, strict);
  const auto in = [&](const char* port) { return op.input(port); };
  if (strict) {
    expect_dims(op, g, "o", {s.b, s.h_q, s.s_q, s.d_v});
    expect_dims(op, g, "dO", {s.b, s.h_q, s.s_q, s.d_v});
    expect_dims(op, g, "stats", s.rows());
  }
  Chain c(sink);
  const Dims scores = s.scores(), rows = s.rows();
  const int64_t p_type = g.tensor(in("q")).data_type;
  const int64_t ds_type = g.tensor(in("dO")).data_type;

  // D = rowsum(dO * O), descaled: the softmax-gradient row term.
  const int do_o = c.tensor("dO_O", {s.b, s.h_q, s.s_q, s.d_v});
  sink.pointwise(CUDNN_POINTWISE_MUL, in("dO"), in("o"), do_o);
  const int row_sum = c.tensor("row_sum_dO_O", rows);
  sink.reduction(CUDNN_REDUCE_TENSOR_ADD, do_o, row_sum);
  const int d_rows = c.mul(c.mul(row_sum, in("descale_dO"), "D_descale_dO", rows),
                           in("descale_o"), "D", rows);

  // P recomputed from the forward's statistics; dV = P^T dO.
  const int logits = scaled_scores(c, op, scores);
  const int shifted = c.tensor("S_shifted", scores);
  sink.pointwise(CUDNN_POINTWISE_SUB, logits, in("stats"), shifted);
  const int probs = c.tensor("P", scores);
  sink.pointwise(CUDNN_POINTWISE_EXP, shifted, -1, probs);
  const int probs_fp8 = c.tensor("P_fp8", scores, p_type);
  sink.pointwise(CUDNN_POINTWISE_MUL, probs, in("scale_s"), probs_fp8);
  const int probs_t = sink.internal("P_T", s.scores_transposed(p_type));
  sink.reshape(probs_fp8, probs_t);
  fp8_matmul(c, "dV", probs_t, in("dO"), in("descale_s"), in("descale_dO"), in("scale_dV"),
             op.output("dV"), op.output("amax_dV"), {s.b, s.h_q, s.s_kv, s.d_v}, s.h_v);

  // dS = (dO V^T - D) * P * attn_scale, narrowed to FP8 after its amax.
  const int dp = c.tensor("dP", scores);
  sink.matmul(in("dO"), in("v"), dp);  // v is described as V^T
  int grad = c.mul(dp, in("descale_dO"), "dP_descale_dO", scores);
  grad = c.mul(grad, in("descale_v"), "dP_descale_v", scores);
  const int centered = c.tensor("dP_centered", scores);
  sink.pointwise(CUDNN_POINTWISE_SUB, grad, d_rows, centered);
  grad = c.mul(centered, probs, "dS", scores);
  if (in("attn_scale") >= 0) grad = c.mul(grad, in("attn_scale"), "dS_scaled", scores);
  sink.reduction(CUDNN_REDUCE_TENSOR_AMAX, grad, op.output("amax_dP"));
  const int ds_fp8 = c.tensor("dS_fp8", scores, ds_type);
  sink.pointwise(CUDNN_POINTWISE_MUL, grad, in("scale_dP"), ds_fp8);

  // dQ = dS K, with K read back from K^T by a view.
  const TensorRecord& k = g.tensor(in("k"));
  const int k_view = sink.internal("K", InternalLayout{k.dim, k.stride, k.data_type});
  sink.reshape(in("k"), k_view);
  fp8_matmul(c, "dQ", ds_fp8, k_view, in("descale_dP"), in("descale_k"), in("scale_dQ"),
             op.output("dQ"), op.output("amax_dQ"), {s.b, s.h_q, s.s_q, s.d_qk}, s.h_q);

  // dK = dS^T Q.
  const int ds_t = sink.internal("dS_T", s.scores_transposed(ds_type));
  sink.reshape(ds_fp8, ds_t);
  fp8_matmul(c, "dK", ds_t, in("q"), in("descale_dP"), in("descale_q"), in("scale_dK"),
             op.output("dK"), op.output("amax_dK"), {s.b, s.h_q, s.s_kv, s.d_qk}, s.h_k);
}

}  // namespace cudnn_backend
