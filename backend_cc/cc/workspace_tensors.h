// Workspace-resident tensors: intermediates a lowering must materialize (cuDNN reads them
// back through the variant pack) although they are neither graph inputs nor outputs. The
// graph lays them out at the front of the execute workspace; cuDNN's own workspace follows.
//
//   workspace: [ tensor 0 | pad | tensor 1 | pad | ... | cuDNN plan workspace ]
//
// Each slot starts at a multiple of kWorkspaceAlignment, and so does cuDNN's part, so the
// workspace a caller allocates is `bytes` plus the plan's own size, at the caller's
// alignment. The layout depends on the record only (dims, strides, data types), never on
// the plan, so every plan of one graph shares it.
#pragma once

#include <cstdint>
#include <vector>

#include "backend_cc/cc/graph_record.h"

namespace cudnn_backend {

constexpr int64_t kWorkspaceAlignment = 256;

struct WorkspaceSlot {
  int tensor = -1;  // index in the record
  int64_t uid = 0;
  int64_t offset = 0;  // bytes from the start of the workspace
  int64_t bytes = 0;   // the tensor's extent (highest addressed element + 1) in bytes
};

struct WorkspaceLayout {
  std::vector<WorkspaceSlot> slots;  // in first-use order
  int64_t bytes = 0;                 // where cuDNN's own workspace starts (aligned)

  const WorkspaceSlot* find_uid(int64_t uid) const;  // nullptr when not workspace-resident
};

// Bytes spanned by a tensor's dims/strides at its data type.
int64_t tensor_extent_bytes(const TensorRecord& r);

// The layout of every workspace-resident tensor an op touches; `g` must be validated
// (dims, strides and data types final).
WorkspaceLayout layout_workspace_tensors(const GraphRecord& g);

}  // namespace cudnn_backend
