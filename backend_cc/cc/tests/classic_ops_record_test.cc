// The recording layer for the classic ops added beside the original kinds: version gates
// with the cuDNN version named, composite internal tensors (uids from the caller, layouts at
// validate()), the inputs composites describe transposed, and the slice / transpose / MoE /
// block-scale argument rules and shapes. No Python, no libcudnn.
#include <algorithm>

#include "backend_cc/cc/errors.h"
#include "backend_cc/cc/graph_record.h"
#include "backend_cc/cc/op_schema.h"
#include "backend_cc/cc/tests/check.h"
#include "backend_cc/cc/op_rules.h"
#include "backend_cc/cc/tests/record_helpers.h"

using namespace cudnn_backend;
using cudnn_backend::testing::call;
using cudnn_backend::testing::schema;

namespace {

constexpr int64_t kHalf = 3, kFloat = 1, kInt32 = 5, kFp8 = 14;
using Dims = std::vector<int64_t>;

GraphRecord make_graph() {
  GraphContext ctx;
  ctx.name = "test";
  ctx.io_data_type = kHalf;
  return GraphRecord(ctx);
}

int tensor(GraphRecord& g, int64_t uid, Dims dim, int64_t data_type = kHalf, Dims stride = {}) {
  TensorSpec s;
  s.uid = uid;
  s.dim = std::move(dim);
  s.stride = std::move(stride);
  s.data_type = data_type;
  return g.add_tensor(s);
}


// Gives every uid-less tensor of the graph one (as the Python lowering does).
void push_uids(GraphRecord& g, int64_t first) {
  for (size_t t = 0; t < g.tensors().size(); ++t) {
    if (!g.tensor(static_cast<int>(t)).uid_assigned) g.set_uid(static_cast<int>(t), first++);
  }
}

AttrValue ints(Dims v) { return AttrValue{std::move(v)}; }

void version_gates_name_the_library() {
  GraphRecord g = make_graph();
  const int x = tensor(g, 1, {4, 8, 16});
  CHECK_THROWS(GraphNotSupported, "slice needs cuDNN >= 9.22.0; the loaded library is 9.19.0",
               g.add_op(schema("slice"), call({{"input", x}}), 91900));
  CHECK_THROWS(GraphNotSupported, "transpose needs cuDNN >= 9.22.0; the loaded library is 9.19.0",
               g.add_op(schema("transpose"), call({{"input", x}}, {{"permutation", ints({0, 2, 1})}}),
                        91900));
  const int f = tensor(g, 2, {8, 1, 1, 16}, kFloat);
  CHECK_THROWS(GraphNotSupported, "rope needs cuDNN >= 9.24.0; the loaded library is 9.19.0",
               g.add_op(schema("rope"), call({{"input", x}, {"freqs", f}}), 91900));
  CHECK_THROWS(GraphNotSupported, "9.25", g.add_op(schema("rope_backward"),
                                                   call({{"dY", x}, {"freqs", f}}), 92400));
  const int off = tensor(g, 3, {4, 1, 1}, kInt32);
  const int w = tensor(g, 4, {4, 16, 8});
  CHECK_THROWS(GraphNotSupported, "moe_grouped_matmul needs cuDNN >= 9.18.0; the loaded library "
                                  "is 9.17.0",
               g.add_op(schema("moe_grouped_matmul"),
                        call({{"token", x}, {"weight", w}, {"first_token_offset", off}}), 91700));
  CHECK_THROWS(GraphNotSupported, "moe_grouped_matmul_bwd needs cuDNN >= 9.22.0",
               g.add_op(schema("moe_grouped_matmul_bwd"),
                        call({{"doutput", x}, {"token", x}, {"first_token_offset", off}}), 91900));
  const int s = tensor(g, 5, {4, 8, 1}, 17);
  CHECK_THROWS(GraphNotSupported, "is_negative_scale needs cuDNN >= 9.13.0",
               g.add_op(schema("block_scale_dequantize"),
                        call({{"input", x}, {"descale", s}},
                             {{"block_size", ints({1, 1, 16})}, {"is_negative_scale", AttrValue{true}}}),
                        91200));
  CHECK_THROWS(GraphNotSupported, "sdpa_mxfp8 needs cuDNN >= 9.21.0; the loaded library is 9.19.0",
               g.add_op(schema("sdpa_mxfp8"), call({}), 91900));
  CHECK_THROWS(GraphNotSupported, "this backend has no MXFP8 lowering",
               g.add_op(schema("sdpa_mxfp8_backward"), call({}), 92400));
  CHECK(g.ops().empty());
  // What the loaded 9.19 on the H200 runs:
  g.add_op(schema("moe_grouped_matmul"), call({{"token", x}, {"weight", w}, {"first_token_offset", off}}),
           91900);
  CHECK(schema("sdpa_fp8").min_sm == 90 && schema("sdpa_mxfp8").min_sm == 100);
  CHECK(schema("block_scale_quantize").min_sm == 100);
}

void composite_internals_get_pushed_uids_and_layouts() {
  GraphRecord g = make_graph();
  const Dims nhwc = {128, 1, 32, 8};
  const int x = tensor(g, 1, {2, 8, 4, 4}, kHalf, nhwc);
  std::vector<int> stats;
  for (int64_t uid = 2; uid <= 5; ++uid) stats.push_back(tensor(g, uid, {1, 8, 1, 1}, kFloat));
  const std::vector<int> y = g.add_op(
      schema("batchnorm_inference"),
      call({{"input", x}, {"mean", stats[0]}, {"inv_variance", stats[1]}, {"scale", stats[2]},
            {"bias", stats[3]}}),
      91900);
  const OpRecord& op = g.ops().back();
  CHECK(op.internals.size() == 3 && op.internals[0].first == "centered");
  CHECK(g.tensor(op.internals[2].second).name == "batchnorm_inference.0::scaled");
  CHECK(g.tensor(op.internals[0].second).is_virtual && !g.tensor(op.internals[0].second).uid_assigned);
  g.set_uid(y[0], 6);
  CHECK_THROWS(StateError, "(internal tensor centered of op 'batchnorm_inference.0') has no uid",
               g.validate());
  push_uids(g, 100);
  g.validate();
  for (const auto& [name, t] : op.internals) {
    CHECK(g.tensor(t).dim == (Dims{2, 8, 4, 4}) && g.tensor(t).stride == nhwc);
    CHECK(g.tensor(t).data_type == kFloat);
  }
  CHECK(g.tensor(y[0]).stride == nhwc);
  const std::vector<int> used = g.used_tensors();
  CHECK(used.size() == 9);  // 5 inputs, Y and the 3 internal tensors
}

std::vector<PortBinding> fp8_forward_ports(GraphRecord& g, int k) {
  const int q = tensor(g, 1, {2, 4, 64, 128}, kFp8);
  const int v = tensor(g, 3, {2, 4, 64, 128}, kFp8);
  std::vector<PortBinding> ports = {{"q", q}, {"k", k}, {"v", v}};
  int64_t uid = 10;
  for (const char* s : {"descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o"}) {
    ports.emplace_back(s, tensor(g, uid++, {1, 1, 1, 1}, kFloat));
  }
  return ports;
}

void fp8_attention_reads_k_transposed_from_a_graph_input() {
  {
    GraphRecord g = make_graph();
    const int k = tensor(g, 2, {2, 4, 64, 128}, kFp8);
    g.add_op(schema("sdpa_fp8"), call(fp8_forward_ports(g, k), {{"generate_stats", AttrValue{true}}}),
             91900);
    CHECK(g.ops().back().internals.size() == 13);  // no attn_scale; Stats is an output
    push_uids(g, 100);
    g.validate();
    CHECK(g.transposed_tensors() == std::set<int>{k});
    const OpRecord& op = g.ops().back();
    CHECK(g.tensor(op.output("O")).dim == (Dims{2, 4, 64, 128}));
    CHECK(g.tensor(op.output("Amax_S")).dim == (Dims{1, 1, 1, 1}));
    CHECK(g.tensor(op.output("Stats")).data_type == kFloat);
    CHECK(g.tensor(op.internals.back().second).dim == (Dims{2, 4, 64, 1}) ||
          g.tensor(op.internals.back().second).dim == (Dims{2, 4, 64, 128}));
  }
  {
    GraphRecord g = make_graph();
    const int k = tensor(g, 2, {2, 4, 64, 128}, kFp8);
    g.add_op(schema("sdpa_fp8"), call(fp8_forward_ports(g, k)), 91900);
    g.add_op(schema("identity"), call({{"input", k}}), 91900);  // K read by another op too
    push_uids(g, 100);
    CHECK_THROWS(GraphNotSupported, "must not be read by any other op", g.validate());
  }
  {
    GraphRecord g = make_graph();
    const int x = tensor(g, 2, {2, 4, 64, 128}, kFp8);
    const int k = g.add_op(schema("identity"), call({{"input", x}}), 91900)[0];
    g.add_op(schema("sdpa_fp8"), call(fp8_forward_ports(g, k)), 91900);
    push_uids(g, 100);
    CHECK_THROWS(GraphNotSupported, "must be a graph input, not an op output", g.validate());
  }
}

AttrValue slices(Dims flat) { return AttrValue{std::move(flat)}; }

void slice_transpose_shapes_and_rules() {
  GraphRecord g = make_graph();
  const int x = tensor(g, 1, {6, 48, 96});
  // [1:5, :, -88::2] in (start, stop, step) triples
  const std::vector<int> y = g.add_op(
      schema("slice"),
      call({{"input", x}}, {{"slices", slices({1, 5, kSliceNone, kSliceNone, kSliceNone,
                                               kSliceNone, -88, kSliceNone, 2})}}),
      92400);
  const std::vector<int> t =
      g.add_op(schema("transpose"), call({{"input", x}}, {{"permutation", ints({2, 0, 1})}}), 92400);
  push_uids(g, 10);
  g.validate();
  CHECK(g.tensor(y[0]).dim == (Dims{4, 48, 44}));
  CHECK(g.tensor(t[0]).dim == (Dims{96, 6, 48}));
  CHECK(g.tensor(t[0]).stride == (Dims{288, 48, 1}));  // a packed, real transpose
  CHECK_THROWS(GraphNotSupported, "positive strides only",
               g.add_op(schema("slice"), call({{"input", x}}, {{"slices", slices({5, 1, -1})}}),
                        92400));
  CHECK_THROWS(ArgumentValueError, "must not be zero",
               g.add_op(schema("slice"), call({{"input", x}}, {{"slices", slices({0, 4, 0})}}),
                        92400));

  GraphRecord bad = make_graph();
  const int z = tensor(bad, 1, {6, 48});
  const int empty = bad.add_op(schema("slice"),
                               call({{"input", z}}, {{"slices", slices({3, 3, kSliceNone})}}), 92400)[0];
  bad.set_uid(empty, 2);
  CHECK_THROWS(ArgumentValueError, "takes no elements", bad.validate());
  GraphRecord perm = make_graph();
  const int w = tensor(perm, 1, {6, 48});
  perm.set_uid(perm.add_op(schema("transpose"), call({{"input", w}}, {{"permutation", ints({0, 0})}}),
                           92400)[0], 2);
  CHECK_THROWS(ArgumentValueError, "is not a permutation of the 2 input axes", perm.validate());
}

void moe_modes_and_block_scale_shapes() {
  GraphRecord g = make_graph();
  const int tok = tensor(g, 1, {1, 96, 64});
  const int w = tensor(g, 2, {4, 64, 32}, kHalf, {2048, 1, 64});
  const int off = tensor(g, 3, {4, 1, 1}, kInt32);
  const int idx = tensor(g, 4, {1, 96, 1}, kInt32);
  auto moe = [&](std::vector<PortBinding> extra, int64_t mode) {
    std::vector<PortBinding> ports = {{"token", tok}, {"weight", w}, {"first_token_offset", off}};
    ports.insert(ports.end(), extra.begin(), extra.end());
    return g.add_op(schema("moe_grouped_matmul"), call(ports, {{"mode", AttrValue{mode}}}), 92400);
  };
  CHECK_THROWS(GraphNotSupported, "COMBINE has no cuDNN backend mode", moe({}, 4));
  CHECK_THROWS(ArgumentValueError, "GATHER and SCATTER need token_index", moe({}, 2));
  CHECK_THROWS(ArgumentValueError, "token_index is read in modes GATHER and SCATTER only",
               moe({{"token_index", idx}}, 1));
  CHECK_THROWS(ArgumentValueError, "SCATTER needs token_ks and top_k > 0",
               moe({{"token_index", idx}}, 3));
  CHECK_THROWS(GraphNotSupported, "only mode COMBINE reads it", moe({{"top_k_scores", idx}}, 1));
  const int out = moe({}, 1)[0];
  const int gathered = moe({{"token_index", idx}}, 2)[0];

  const int x = tensor(g, 5, {64, 256}, kFloat);
  const std::vector<int> q = g.add_op(schema("block_scale_quantize"),
                                      call({{"input", x}}, {{"block_size", AttrValue{int64_t{32}}}}),
                                      92400);
  const std::vector<int> qt = g.add_op(
      schema("block_scale_quantize"),
      call({{"input", x}}, {{"block_size", AttrValue{int64_t{32}}}, {"axis", AttrValue{int64_t{0}}},
                            {"transpose", AttrValue{true}}}),
      92400);
  push_uids(g, 10);
  g.validate();
  CHECK(g.tensor(out).dim == (Dims{1, 96, 32}) && g.tensor(gathered).dim == (Dims{1, 96, 32}));
  CHECK(g.tensor(q[1]).dim == (Dims{64, 8}));
  CHECK(g.tensor(qt[1]).dim == (Dims{2, 256}));
  CHECK(g.tensor(qt[0]).stride == (Dims{1, 64}));  // the blocked axis (0) packed innermost

  // GATHER faulted inside cuDNN 9.19 on an H200: refused up to that library, let through
  // after it; NONE is never refused.
  const auto fault = [&](int64_t version) {
    std::vector<std::string> why;
    for (const OpRecord& op : g.ops()) why.push_back(known_runtime_fault(op, version));
    return why;
  };
  const auto with_919 = fault(91900);
  const auto with_924 = fault(92400);
  CHECK(std::count_if(with_919.begin(), with_919.end(), [](const std::string& w) {
          return w.find("mode GATHER is refused with cuDNN 91900") != std::string::npos;
        }) == 1);
  CHECK(std::all_of(with_924.begin(), with_924.end(), [](const std::string& w) { return w.empty(); }));
}

}  // namespace

int main() {
  version_gates_name_the_library();
  composite_internals_get_pushed_uids_and_layouts();
  fp8_attention_reads_k_transposed_from_a_graph_input();
  slice_transpose_shapes_and_rules();
  moe_modes_and_block_scale_shapes();
  return 0;
}
