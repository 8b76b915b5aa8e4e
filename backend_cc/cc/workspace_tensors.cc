// Workspace-resident tensor layout (see workspace_tensors.h).
#include "backend_cc/cc/workspace_tensors.h"

#include "backend_cc/cc/enums.h"
#include "backend_cc/cc/errors.h"

namespace cudnn_backend {

namespace {

int64_t align_up(int64_t n) {
  return (n + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

}  // namespace

const WorkspaceSlot* WorkspaceLayout::find_uid(int64_t uid) const {
  for (const WorkspaceSlot& s : slots) {
    if (s.uid == uid) return &s;
  }
  return nullptr;
}

int64_t tensor_extent_bytes(const TensorRecord& r) {
  int64_t last = 0;  // offset of the highest addressed element, in elements
  for (size_t i = 0; i < r.dim.size(); ++i) last += (r.dim[i] - 1) * r.stride[i];
  const int64_t element = data_type_size(r.data_type);
  if (element <= 0) {
    throw ArgumentValueError("tensor '" + r.name + "': data type " +
                             enum_value_name(EnumKind::kDataType, r.data_type) +
                             " has no byte size, so it cannot live in the workspace");
  }
  return (last + 1) * element;
}

WorkspaceLayout layout_workspace_tensors(const GraphRecord& g) {
  if (!g.validated()) {
    throw StateError("workspace layout: the graph must be validated first (validate())");
  }
  WorkspaceLayout layout;
  for (int t : g.used_tensors()) {
    const TensorRecord& r = g.tensor(t);
    if (!r.in_workspace) continue;
    WorkspaceSlot slot;
    slot.tensor = t;
    slot.uid = r.uid;
    slot.offset = layout.bytes;
    slot.bytes = tensor_extent_bytes(r);
    layout.bytes = align_up(layout.bytes + slot.bytes);
    layout.slots.push_back(slot);
  }
  return layout;
}

}  // namespace cudnn_backend
