// BackendGraph: a recorded graph (graph_record.h) plus everything cuDNN builds from it: the
// tensor and operation descriptors, the operation graph, the engine configs the heuristics
// propose (one growing plan list, indices stable), finalized execution plans, and execution
// with a variant pack keyed by the uids Python pushed.
//
// Lifecycle: record ops -> validate() -> build_operation_graph() (freezes the record)
// -> create_execution_plans(modes) / create_execution_plan(id, knobs) (append entries)
// -> build_plan_at_index(i) -> execute(i, {uid: pointer}, workspace).
//
// Workspace-resident tensors (workspace_tensors.h) are bound by execute itself, at their
// offsets in the caller's workspace; cuDNN gets the rest of it.
#pragma once

#include <cudnn_graph.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend_cc/cc/descriptor.h"
#include "backend_cc/cc/engine_configs.h"
#include "backend_cc/cc/graph_record.h"
#include "backend_cc/cc/host_scalar.h"
#include "backend_cc/cc/op_descriptors.h"
#include "backend_cc/cc/workspace_tensors.h"

namespace cudnn_backend {

struct PlanInfo {
  int64_t engine_id = -1;  // -1 for a deserialized plan: its engine lives inside the JSON
  KnobChoices knobs;       // cudnnBackendKnobType_t numbering
  std::vector<int64_t> behavior_notes;
  std::vector<int64_t> numerical_notes;
  std::string name;
  int64_t heur_mode = -1;  // frontend heur_mode that proposed it; -1 = explicit or deserialized
  bool deserialized = false;
};

// Everything one cudnnBackendExecute call needs, prepared while the caller holds its locks
// so that the call itself can run without them.
struct PreparedExecution {
  cudnnHandle_t handle = nullptr;
  cudnnBackendDescriptor_t plan = nullptr;
  std::string context;
  std::vector<HostScalar> scalars;  // storage the variant pack points into
  std::optional<Descriptor> variant_pack;
};

class BackendGraph {
 public:
  // `handle` 0 = create (and own) one lazily when cuDNN is first needed.
  BackendGraph(GraphContext context, uintptr_t handle);
  ~BackendGraph();
  BackendGraph(const BackendGraph&) = delete;
  BackendGraph& operator=(const BackendGraph&) = delete;

  GraphRecord& record() { return record_; }
  const GraphRecord& record() const { return record_; }

  // Records an op, gating version-dependent arguments on the loaded library (if any).
  std::vector<int> add_op(const OpSchema& schema, OpCall call);

  void validate();
  // Builds and finalizes every tensor and operation descriptor (no handle or GPU needed:
  // cuDNN checks each op's attributes here) and freezes the record. build_operation_graph()
  // starts with this step.
  void finalize_op_descriptors();
  bool op_descriptors_finalized() const { return !ops_.empty(); }
  void build_operation_graph();
  bool operation_graph_built() const { return op_graph_.has_value(); }

  // Appends the engine configs each heuristic mode proposes (frontend heur_mode values, in
  // the given order); returns the indices of the new entries. A mode cuDNN answers with
  // NOT_SUPPORTED is skipped; when every mode declines, the last decline is raised.
  std::vector<int> create_execution_plans(const std::vector<int64_t>& heur_modes);
  // Appends one explicit engine config (replay of a saved engine id and knobs).
  int create_execution_plan(int64_t engine_id, const KnobChoices& knobs);

  int plan_count() const { return static_cast<int>(plans_.size()); }
  const PlanInfo& plan_info(int index) const;
  bool plan_built(int index) const;
  const std::string& plan_failure(int index) const;

  // Finalizes the execution plan of entry `index` (cached). A cuDNN NOT_SUPPORTED answer is
  // a GraphNotSupported (the entry declines); other failures are BackendError.
  void build_plan_at_index(int index);
  // Builds entries in order; declines advance, other errors propagate. Without `build_all`
  // stops at the first that builds. Selects and returns the first built index; raises
  // GraphNotSupported listing every decline when none builds.
  int build_plans(bool build_all);
  int selected_index() const { return selected_; }
  void select(int index);

  // Bytes the caller's workspace must hold for plan `index`: the workspace-resident tensors
  // (workspace_tensors.h) followed by the plan's own workspace.
  int64_t workspace_size_at_index(int index);
  // Where the workspace-resident tensors sit in every plan's workspace (validates first).
  WorkspaceLayout workspace_layout();

  PreparedExecution prepare_execute(int index, const std::vector<std::pair<int64_t, uintptr_t>>& pack,
                                    uintptr_t workspace, uintptr_t handle);
  static void run(const PreparedExecution& prepared);

  // The execution plan's JSON (CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION).
  std::string serialize(int index);
  // Appends a plan rebuilt from serialize()'s output, selects it and returns its index.
  int deserialize(const std::string& json);

  uintptr_t handle() const;

 private:
  struct PlanEntry {
    PlanInfo info;
    std::optional<Descriptor> config;
    std::optional<Descriptor> plan;
    std::string failure;
  };

  cudnnHandle_t ensure_handle();
  PlanEntry& entry(int index);
  const PlanEntry& entry(int index) const;
  const Descriptor& op_graph() const;
  std::string plan_context(int index) const;

  GraphRecord record_;
  cudnnHandle_t handle_ = nullptr;
  bool owns_handle_ = false;
  // Declared in creation order so destruction runs from plans back to tensors.
  TensorDescriptors tensors_;
  std::vector<Descriptor> keepalive_;
  std::vector<Descriptor> ops_;
  std::optional<Descriptor> op_graph_;
  std::optional<WorkspaceLayout> workspace_layout_;  // fixed once the record is frozen
  std::vector<std::unique_ptr<PlanEntry>> plans_;
  int selected_ = -1;
};

}  // namespace cudnn_backend
