// BackendGraph (see backend_graph.h).
#include "backend_cc/cc/backend_graph.h"

#include <map>
#include <set>

#include "backend_cc/cc/cudnn_api.h"
#include "backend_cc/cc/enums.h"
#include "backend_cc/cc/errors.h"
#include "backend_cc/cc/handle.h"
#include "backend_cc/cc/op_rules.h"

namespace cudnn_backend {

BackendGraph::BackendGraph(GraphContext context, uintptr_t handle)
    : record_(std::move(context)), handle_(handle_from_int(handle)) {}

BackendGraph::~BackendGraph() {
  // Descriptors go first (member order), then the handle we created ourselves.
  plans_.clear();
  op_graph_.reset();
  ops_.clear();
  keepalive_.clear();
  tensors_ = TensorDescriptors();
  if (owns_handle_ && handle_ != nullptr && is_loaded()) api().cudnnDestroy(handle_);
}

uintptr_t BackendGraph::handle() const { return handle_to_int(handle_); }

cudnnHandle_t BackendGraph::ensure_handle() {
  if (handle_ == nullptr) {
    handle_ = create_handle();
    owns_handle_ = true;
  }
  return handle_;
}

std::vector<int> BackendGraph::add_op(const OpSchema& schema, OpCall call) {
  const int64_t version = is_loaded() ? static_cast<int64_t>(loaded_version()) : 0;
  return record_.add_op(schema, std::move(call), version);
}

void BackendGraph::validate() { record_.validate(); }

void BackendGraph::finalize_op_descriptors() {
  if (!ops_.empty()) return;  // already materialized
  if (!record_.validated()) record_.validate();
  if (!is_loaded()) api();  // raises CudnnUnavailable with the loader's reason
  const int64_t version = static_cast<int64_t>(loaded_version());
  for (const OpRecord& op : record_.ops()) {
    // Recorded before a library was loaded, or the loaded one changed since.
    if (const std::string why = runtime_decline(*op.schema, version); !why.empty()) {
      throw GraphNotSupported(op_context(op) + ": " + why);
    }
    if (const std::string why = known_runtime_fault(op, version); !why.empty()) {
      throw GraphNotSupported(op_context(op) + ": " + why);
    }
  }
  TensorDescriptors tensors;
  const std::set<int> transposed = record_.transposed_tensors();
  for (int t : record_.used_tensors()) {
    tensors.add(t, build_tensor_descriptor(record_, t, tensors, transposed.count(t) > 0));
  }
  std::vector<Descriptor> keepalive;
  std::vector<Descriptor> ops;
  for (const OpRecord& op : record_.ops()) {
    build_op_descriptors(record_, op, tensors, keepalive, ops);
  }
  // Only a complete set is kept, so a failure leaves the graph as it was (and mutable).
  tensors_ = std::move(tensors);
  keepalive_ = std::move(keepalive);
  ops_ = std::move(ops);
  record_.freeze();
}

void BackendGraph::build_operation_graph() {
  if (op_graph_.has_value()) return;  // idempotent: the descriptors already exist
  finalize_op_descriptors();
  Descriptor graph = BACKEND_DESCRIPTOR(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set_context("graph '" + record_.context().name + "'");
  graph.set_handle(ATTR(CUDNN_ATTR_OPERATIONGRAPH_HANDLE), ensure_handle());
  std::vector<const Descriptor*> op_ptrs;
  for (const Descriptor& op : ops_) op_ptrs.push_back(&op);
  graph.set_descs(ATTR(CUDNN_ATTR_OPERATIONGRAPH_OPS), op_ptrs);
  graph.finalize();
  op_graph_ = std::move(graph);
}

const Descriptor& BackendGraph::op_graph() const {
  if (!op_graph_.has_value()) {
    throw StateError("the operation graph is not built; call build_operation_graph() first");
  }
  return *op_graph_;
}

BackendGraph::PlanEntry& BackendGraph::entry(int index) {
  if (index < 0 || index >= plan_count()) {
    throw std::out_of_range("plan index " + std::to_string(index) + " is out of range (" +
                            std::to_string(plan_count()) + " plans)");
  }
  return *plans_[index];
}

const BackendGraph::PlanEntry& BackendGraph::entry(int index) const {
  return const_cast<BackendGraph*>(this)->entry(index);
}

std::string BackendGraph::plan_context(int index) const {
  return "plan " + std::to_string(index) + " (" + entry(index).info.name + ") of graph '" +
         record_.context().name + "'";
}

const PlanInfo& BackendGraph::plan_info(int index) const { return entry(index).info; }
bool BackendGraph::plan_built(int index) const { return entry(index).plan.has_value(); }
const std::string& BackendGraph::plan_failure(int index) const { return entry(index).failure; }

std::vector<int> BackendGraph::create_execution_plans(const std::vector<int64_t>& heur_modes) {
  const Descriptor& graph = op_graph();
  if (heur_modes.empty()) {
    throw ArgumentValueError("create_execution_plans: give at least one heur_mode");
  }
  std::vector<int> created;
  std::optional<GraphNotSupported> last_decline;
  for (int64_t mode : heur_modes) {
    const EnumEntry* m = find_frontend(EnumKind::kHeurMode, mode);
    if (m == nullptr) {
      throw ArgumentValueError("create_execution_plans: " + std::to_string(mode) +
                               " is not a heur_mode value (" + enum_members(EnumKind::kHeurMode) +
                               ")");
    }
    if (m->cudnn < 0) {
      throw ArgumentValueError(std::string("create_execution_plans: heur_mode ") + m->name +
                               " is not a cuDNN heuristic; the backend adapter answers it with "
                               "its delegating entry");
    }
    std::vector<Descriptor> configs;
    try {
      configs = query_heuristics(graph, static_cast<cudnnBackendHeurMode_t>(m->cudnn));
    } catch (const GraphNotSupported& decline) {
      // One mode declining (e.g. B on a graph it does not model) does not sink the others.
      last_decline.emplace(std::string("heur_mode ") + m->name + ": " + decline.what());
      continue;
    }
    for (Descriptor& config : configs) {
      auto e = std::make_unique<PlanEntry>();
      const EngineConfigInfo info = describe_engine_config(config);
      e->info.engine_id = info.engine_id;
      e->info.knobs = info.knobs;
      e->info.behavior_notes = info.behavior_notes;
      e->info.numerical_notes = info.numerical_notes;
      e->info.name = engine_config_name(info);
      e->info.heur_mode = mode;
      e->config = std::move(config);
      plans_.push_back(std::move(e));
      created.push_back(plan_count() - 1);
    }
  }
  if (created.empty() && last_decline) throw *last_decline;
  return created;
}

int BackendGraph::create_execution_plan(int64_t engine_id, const KnobChoices& knobs) {
  const Descriptor& graph = op_graph();
  if (engine_id < 0) {
    throw ArgumentValueError("create_execution_plan: engine_id must be >= 0, got " +
                             std::to_string(engine_id));
  }
  Descriptor config = make_engine_config(graph, engine_id, knobs);
  const EngineConfigInfo info = describe_engine_config(config);
  auto e = std::make_unique<PlanEntry>();
  e->info.engine_id = info.engine_id;
  e->info.knobs = info.knobs;
  e->info.behavior_notes = info.behavior_notes;
  e->info.numerical_notes = info.numerical_notes;
  e->info.name = engine_config_name(info);
  e->config = std::move(config);
  plans_.push_back(std::move(e));
  return plan_count() - 1;
}

void BackendGraph::build_plan_at_index(int index) {
  PlanEntry& e = entry(index);
  if (e.plan.has_value()) return;
  try {
    e.plan = finalize_execution_plan(*e.config, ensure_handle(), plan_context(index));
    e.failure.clear();
  } catch (const std::exception& err) {
    e.failure = err.what();
    throw;
  }
}

int BackendGraph::build_plans(bool build_all) {
  if (plan_count() == 0) {
    throw GraphNotSupported("build_plans: graph '" + record_.context().name +
                            "' has no engine configs (create_execution_plans proposed none); " +
                            kCudnnLogHint);
  }
  int first_built = -1;
  std::string declines;
  for (int i = 0; i < plan_count(); ++i) {
    try {
      build_plan_at_index(i);
    } catch (const GraphNotSupported& decline) {
      declines += (declines.empty() ? "" : "; ") + std::string("[") + std::to_string(i) + "] " +
                  entry(i).info.name + ": " + decline.what();
      continue;
    }
    if (first_built < 0) first_built = i;
    if (!build_all) break;
  }
  if (first_built < 0) {
    throw GraphNotSupported("no engine config of graph '" + record_.context().name +
                            "' could be built: " + declines + "; " + kCudnnLogHint);
  }
  if (!(build_all && selected_ >= 0 && plan_built(selected_))) selected_ = first_built;
  return selected_;
}

void BackendGraph::select(int index) {
  entry(index);  // range check
  selected_ = index;
}

WorkspaceLayout BackendGraph::workspace_layout() {
  if (workspace_layout_.has_value()) return *workspace_layout_;
  if (record_.ops().empty()) return WorkspaceLayout{};  // only deserialized plans
  if (!record_.validated()) record_.validate();
  WorkspaceLayout layout = layout_workspace_tensors(record_);
  if (record_.frozen()) workspace_layout_ = layout;  // the record cannot change any more
  return layout;
}

int64_t BackendGraph::workspace_size_at_index(int index) {
  build_plan_at_index(index);
  return workspace_layout().bytes +
         entry(index).plan->get_int64(ATTR(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE));
}

PreparedExecution BackendGraph::prepare_execute(
    int index, const std::vector<std::pair<int64_t, uintptr_t>>& pack, uintptr_t workspace,
    uintptr_t handle) {
  build_plan_at_index(index);
  PlanEntry& e = entry(index);
  PreparedExecution prepared;
  prepared.context = plan_context(index);
  prepared.handle = handle != 0 ? handle_from_int(handle) : ensure_handle();
  prepared.plan = e.plan->get();

  const int64_t workspace_size = workspace_size_at_index(index);
  const WorkspaceLayout layout = workspace_layout();
  if (workspace_size > 0 && workspace == 0) {
    throw ArgumentValueError("execute: " + prepared.context + " needs " +
                             std::to_string(workspace_size) +
                             " bytes of workspace but the workspace pointer is 0");
  }

  std::vector<int64_t> uids;
  std::vector<void*> pointers;
  std::map<int64_t, uintptr_t> given;
  for (const auto& [uid, pointer] : pack) {
    if (!given.emplace(uid, pointer).second) {
      throw ArgumentValueError("execute: uid " + std::to_string(uid) + " appears twice");
    }
    if (const WorkspaceSlot* slot = layout.find_uid(uid)) {
      throw ArgumentValueError("execute: uid " + std::to_string(uid) + " belongs to tensor " +
                               record_.describe_tensor(slot->tensor) +
                               ", which lives in the graph's workspace and takes no buffer");
    }
  }
  // Workspace-resident tensors first, then cuDNN's own part of the workspace.
  for (const WorkspaceSlot& slot : layout.slots) {
    uids.push_back(slot.uid);
    pointers.push_back(reinterpret_cast<void*>(workspace + static_cast<uintptr_t>(slot.offset)));
  }
  const uintptr_t cudnn_workspace =
      workspace == 0 ? 0 : workspace + static_cast<uintptr_t>(layout.bytes);
  if (e.info.deserialized) {
    // A deserialized plan carries no tensor list of ours: the caller's pack is the contract.
    for (const auto& [uid, pointer] : given) {
      uids.push_back(uid);
      pointers.push_back(reinterpret_cast<void*>(pointer));
    }
  } else {
    const std::vector<int> used = record_.used_tensors();
    std::map<int64_t, int> required;
    for (int t : used) {
      const TensorRecord& r = record_.tensor(t);
      if (!r.is_virtual && !r.in_workspace) required.emplace(r.uid, t);
    }
    for (const auto& [uid, pointer] : given) {
      if (required.count(uid) == 0) {
        const int t = record_.find_uid(uid);
        throw ArgumentValueError(
            "execute: uid " + std::to_string(uid) +
            (t < 0 ? " is not a tensor of this graph"
                   : " belongs to tensor " + record_.describe_tensor(t) +
                         ", which is virtual or unused and takes no buffer"));
      }
    }
    prepared.scalars.reserve(required.size());  // pointers into it must stay valid
    for (const auto& [uid, t] : required) {
      const TensorRecord& r = record_.tensor(t);
      const auto it = given.find(uid);
      if (it != given.end()) {
        if (it->second == 0) {
          throw ArgumentValueError("execute: the buffer for tensor " +
                                   record_.describe_tensor(t) + " is a null pointer");
        }
        uids.push_back(uid);
        pointers.push_back(reinterpret_cast<void*>(it->second));
      } else if (r.is_pass_by_value && r.scalar_value.has_value()) {
        prepared.scalars.push_back(encode_host_scalar(*r.scalar_value, r.data_type,
                                                      "tensor " + record_.describe_tensor(t)));
        uids.push_back(uid);
        pointers.push_back(prepared.scalars.back().data());
      } else {
        throw ArgumentValueError("execute: the variant pack is missing a buffer for tensor " +
                                 record_.describe_tensor(t));
      }
    }
  }

  Descriptor vp = BACKEND_DESCRIPTOR(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  vp.set_context(prepared.context);
  vp.set_int64s(ATTR(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS), uids);
  vp.set_void_ptrs(ATTR(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS), pointers);
  vp.set_void_ptr(ATTR(CUDNN_ATTR_VARIANT_PACK_WORKSPACE), reinterpret_cast<void*>(cudnn_workspace));
  vp.finalize();
  prepared.variant_pack = std::move(vp);
  return prepared;
}

void BackendGraph::run(const PreparedExecution& prepared) {
  check_status(api().cudnnBackendExecute(prepared.handle, prepared.plan,
                                         prepared.variant_pack->get()),
               "cudnnBackendExecute(" + prepared.context + ")");
}

std::string BackendGraph::serialize(int index) {
  build_plan_at_index(index);
  return entry(index).plan->get_chars(ATTR(CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION));
}

int BackendGraph::deserialize(const std::string& json) {
  if (json.empty()) throw ArgumentValueError("deserialize: the serialized plan is empty");
  Descriptor plan = BACKEND_DESCRIPTOR(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  plan.set_context("deserialized plan");
  plan.set_handle(ATTR(CUDNN_ATTR_EXECUTION_PLAN_HANDLE), ensure_handle());
  plan.set_chars(ATTR(CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION), json);
  plan.finalize();
  auto e = std::make_unique<PlanEntry>();
  e->info.deserialized = true;
  e->info.name = "deserialized";
  e->plan = std::move(plan);
  plans_.push_back(std::move(e));
  selected_ = plan_count() - 1;
  return selected_;
}

}  // namespace cudnn_backend
