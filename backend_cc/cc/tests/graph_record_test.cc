// The recording layer without Python or libcudnn: uid ownership, argument checks,
// conditional outputs, declines, shape inference and freezing.
#include "backend_cc/cc/errors.h"
#include "backend_cc/cc/graph_record.h"
#include "backend_cc/cc/op_schema.h"
#include "backend_cc/cc/tests/check.h"
#include "backend_cc/cc/tests/record_helpers.h"

using namespace cudnn_backend;
using cudnn_backend::testing::call;
using cudnn_backend::testing::schema;

namespace {

constexpr int64_t kHalf = 3, kFloat = 1;

GraphRecord make_graph() {
  GraphContext ctx;
  ctx.name = "test";
  ctx.io_data_type = kHalf;
  return GraphRecord(ctx);
}

int tensor(GraphRecord& g, int64_t uid, std::vector<int64_t> dim, std::vector<int64_t> stride = {}) {
  TensorSpec s;
  s.uid = uid;
  s.dim = std::move(dim);
  s.stride = std::move(stride);
  return g.add_tensor(s);
}


void uid_ownership() {
  GraphRecord g = make_graph();
  const int a = tensor(g, 1, {2, 8, 4});
  const int b = tensor(g, 2, {2, 4, 3});
  const std::vector<int> out = g.add_op(schema("matmul"), call({{"A", a}, {"B", b}}), 0);
  CHECK(out.size() == 1 && !g.tensor(out[0]).uid_assigned && g.tensor(out[0]).is_virtual);
  CHECK_THROWS(StateError, "uid ownership violated", g.validate());
  CHECK_THROWS(ArgumentValueError, "already used by tensor 'tensor_0'", g.set_uid(out[0], 1));
  g.set_uid(out[0], 3);
  g.validate();
  CHECK(g.tensor(out[0]).dim == (std::vector<int64_t>{2, 8, 3}));
  CHECK(g.tensor(out[0]).data_type == kFloat);  // virtual: intermediate default FLOAT
  CHECK(g.find_uid(3) == out[0]);
}

void argument_checks() {
  GraphRecord g = make_graph();
  const int a = tensor(g, 1, {2, 2});
  CHECK_THROWS(ArgumentTypeError, "missing required tensor argument 'B'",
               g.add_op(schema("matmul"), call({{"A", a}}), 0));
  CHECK_THROWS(ArgumentTypeError, "unexpected tensor argument 'C'",
               g.add_op(schema("matmul"), call({{"A", a}, {"B", a}, {"C", a}}), 0));
  CHECK_THROWS(ArgumentTypeError, "missing required argument 'mode'",
               g.add_op(schema("reduction"), call({{"input", a}}), 0));
  CHECK_THROWS(ArgumentValueError, "is not a reduction_mode value",
               g.add_op(schema("reduction"), call({{"input", a}}, {{"mode", AttrValue{int64_t{77}}}}), 0));
  CHECK(g.ops().empty());
}

void conditional_outputs_and_declines() {
  GraphRecord g = make_graph();
  const int q = tensor(g, 1, {1, 2, 16, 8});
  const std::vector<int> inference =
      g.add_op(schema("sdpa"), call({{"q", q}, {"k", q}, {"v", q}}, {{"is_inference", AttrValue{true}}}), 0);
  CHECK(inference[0] >= 0 && inference[1] == -1);
  const std::vector<int> training = g.add_op(
      schema("sdpa"), call({{"q", q}, {"k", q}, {"v", q}}, {{"generate_stats", AttrValue{true}}}), 0);
  CHECK(training[1] >= 0);
  CHECK_THROWS(GraphNotSupported, "use_causal_mask=True is not supported",
               g.add_op(schema("sdpa"), call({{"q", q}, {"k", q}, {"v", q}},
                                             {{"use_causal_mask", AttrValue{true}}}), 0));
  // A library older than the descriptor declines the op before recording it.
  CHECK_THROWS(GraphNotSupported, "needs cuDNN >= 9.17.0; the loaded library is 9.13.0",
               g.add_op(schema("sdpa_backward"),
                        call({{"q", q}, {"k", q}, {"v", q}, {"o", q}, {"dO", q}, {"stats", q}}), 91300));
  // 9.17-9.20 know the descriptor but cannot build a graph with it: declined, with why.
  CHECK_THROWS(GraphNotSupported, "needs cuDNN >= 9.21.0; the loaded library is 9.19.0 (cuDNN 9.17-9.20",
               g.add_op(schema("sdpa_backward"),
                        call({{"q", q}, {"k", q}, {"v", q}, {"o", q}, {"dO", q}, {"stats", q}}), 91900));
  const std::vector<int> grads = g.add_op(
      schema("sdpa_backward"), call({{"q", q}, {"k", q}, {"v", q}, {"o", q}, {"dO", q}, {"stats", q}}),
      92100);
  CHECK(grads.size() == 3 && grads[2] >= 0);
  CHECK(runtime_decline(schema("sdpa_backward"), 0).empty());  // nothing loaded: decided later
  CHECK(runtime_decline(schema("sdpa_backward"), 92400).empty());
  CHECK(runtime_decline(schema("matmul"), 90000).empty());
  CHECK(g.ops().size() == 3);
  CHECK(g.ops()[1].name == "sdpa.1" && g.ops()[2].name == "sdpa_backward.0");
}

void shapes_and_layouts() {
  GraphRecord g = make_graph();
  const int x = tensor(g, 1, {2, 8, 6, 6}, {288, 1, 48, 8});  // NHWC
  const int w = tensor(g, 2, {4, 8, 3, 3}, {72, 1, 24, 8});
  const std::vector<int> y = g.add_op(
      schema("conv_fprop"),
      call({{"image", x}, {"weight", w}}, {{"padding", AttrValue{std::vector<int64_t>{1, 1}}},
                                           {"stride", AttrValue{std::vector<int64_t>{2, 2}}}}),
      0);
  g.set_uid(y[0], 3);
  g.validate();
  CHECK(g.tensor(y[0]).dim == (std::vector<int64_t>{2, 4, 3, 3}));
  CHECK(g.tensor(y[0]).stride == (std::vector<int64_t>{36, 1, 12, 4}));
  CHECK(!g.tensor(y[0]).dim_assigned);
}

void freezing() {
  GraphRecord g = make_graph();
  const int a = tensor(g, 1, {4});
  g.freeze();
  CHECK_THROWS(StateError, "frozen", g.set_dim(a, {8}));
  CHECK_THROWS(StateError, "frozen", tensor(g, 2, {4}));
  g.set_uid(a, 1);  // same value: no mutation, allowed
}

}  // namespace

int main() {
  uid_ownership();
  argument_checks();
  conditional_outputs_and_declines();
  shapes_and_layouts();
  freezing();
  return 0;
}
