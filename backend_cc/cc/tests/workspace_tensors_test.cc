// Workspace-resident tensors without Python or libcudnn: which tensors may live in the
// workspace, and where the layout puts them (aligned slots, cuDNN's part after them).
#include "backend_cc/cc/errors.h"
#include "backend_cc/cc/graph_record.h"
#include "backend_cc/cc/op_schema.h"
#include "backend_cc/cc/tests/check.h"
#include "backend_cc/cc/workspace_tensors.h"

using namespace cudnn_backend;

namespace {

constexpr int64_t kHalf = 3, kFloat = 1;

GraphRecord make_graph() {
  GraphContext ctx;
  ctx.name = "ws";
  ctx.io_data_type = kHalf;
  return GraphRecord(ctx);
}

int input(GraphRecord& g, int64_t uid, std::vector<int64_t> dim) {
  TensorSpec s;
  s.uid = uid;
  s.dim = std::move(dim);
  return g.add_tensor(s);
}

// x -> identity -> y (workspace) -> identity -> z (workspace, strided) -> identity -> out
struct Chain {
  GraphRecord g = make_graph();
  int x = -1, y = -1, z = -1, out = -1;
};

Chain chain() {
  Chain c;
  const OpSchema& identity = *find_op_schema("identity");
  auto op = [&](int in) {
    OpCall call;
    call.inputs = {{identity.inputs[0].name, in}};
    return c.g.add_op(identity, call, 0)[0];
  };
  c.x = input(c.g, 1, {2, 3, 5});
  c.y = op(c.x);
  c.z = op(c.y);
  c.out = op(c.z);
  c.g.set_uid(c.y, 10);
  c.g.set_uid(c.z, 11);
  c.g.set_uid(c.out, 12);
  c.g.set_is_virtual(c.out, false);
  return c;
}

void only_op_outputs_live_in_the_workspace() {
  Chain c = chain();
  CHECK_THROWS(ArgumentValueError, "only op outputs", c.g.set_in_workspace(c.x, true));
  c.g.set_in_workspace(c.y, true);
  CHECK(!c.g.tensor(c.y).is_virtual);  // materialized, by the graph itself
  c.g.set_is_virtual(c.y, true);
  CHECK_THROWS(ArgumentValueError, "both virtual and workspace-resident", c.g.validate());
}

void slots_are_aligned_and_sized_by_their_strides() {
  Chain c = chain();
  c.g.set_in_workspace(c.y, true);
  c.g.set_data_type(c.y, kFloat);
  c.g.set_in_workspace(c.z, true);
  c.g.set_stride(c.z, {40, 8, 1});  // padded rows: the extent follows the strides
  CHECK_THROWS(StateError, "validated", layout_workspace_tensors(c.g));
  c.g.validate();
  const WorkspaceLayout layout = layout_workspace_tensors(c.g);
  CHECK(layout.slots.size() == 2);
  const WorkspaceSlot& y = layout.slots[0];
  const WorkspaceSlot& z = layout.slots[1];
  CHECK(y.uid == 10 && y.offset == 0 && y.bytes == 30 * 4);
  // z is HALF (io type, non-virtual): last element at 40 + 2*8 + 4 = 60
  CHECK(z.uid == 11 && z.offset == kWorkspaceAlignment && z.bytes == 61 * 2);
  CHECK(layout.bytes == 2 * kWorkspaceAlignment);
  CHECK(layout.find_uid(11) == &layout.slots[1] && layout.find_uid(12) == nullptr);
}

void a_graph_without_them_needs_no_extra_workspace() {
  Chain c = chain();
  c.g.validate();
  const WorkspaceLayout layout = layout_workspace_tensors(c.g);
  CHECK(layout.slots.empty() && layout.bytes == 0);
}

}  // namespace

int main() {
  only_op_outputs_live_in_the_workspace();
  slots_are_aligned_and_sized_by_their_strides();
  a_graph_without_them_needs_no_extra_workspace();
  return 0;
}
