// The recording layer (see graph_record.h).
#include "backend_cc/cc/graph_record.h"

#include <set>

#include "backend_cc/cc/composite.h"
#include "backend_cc/cc/errors.h"
#include "backend_cc/cc/op_rules.h"
#include "backend_cc/cc/shape_inference.h"

namespace cudnn_backend {

namespace {

std::string base_port(const std::string& port, const OpSchema& schema) {
  if (schema.find_input(port) != nullptr) return port;
  // List ports are recorded as <port>_<i>.
  const auto cut = port.rfind('_');
  if (cut != std::string::npos) {
    const std::string base = port.substr(0, cut);
    const PortSpec* spec = schema.find_input(base);
    if (spec != nullptr && spec->is_list) return base;
  }
  return port;
}

bool attr_equals(const AttrValue& a, const AttrValue& b) { return a == b; }

bool attr_type_matches(const AttrSpec& spec, const AttrValue& value) {
  switch (spec.type) {
    case AttrType::kInt:
    case AttrType::kEnum: return std::holds_alternative<int64_t>(value);
    case AttrType::kFloat: return std::holds_alternative<double>(value);
    case AttrType::kBool: return std::holds_alternative<bool>(value);
    case AttrType::kIntList: return std::holds_alternative<std::vector<int64_t>>(value);
    case AttrType::kOpaque: return false;  // only None reaches the record; None is never stored
    case AttrType::kSliceList: {
      const auto* v = std::get_if<std::vector<int64_t>>(&value);
      return v != nullptr && v->size() % 3 == 0;
    }
  }
  return false;
}

// Declines a port/attribute that needs a newer cuDNN than the headers or the loaded library.
void check_version(const std::string& what, int64_t min_version, int64_t cudnn_version) {
  if (min_version == 0) return;
  if (CUDNN_VERSION < min_version) {
    throw GraphNotSupported(what + " needs cuDNN >= " + cudnn_version_string(min_version) +
                            "; this extension was built against cuDNN " +
                            cudnn_version_string(CUDNN_VERSION) + " headers");
  }
  if (cudnn_version != 0 && cudnn_version < min_version) {
    throw GraphNotSupported(what + " needs cuDNN >= " + cudnn_version_string(min_version) +
                            "; the loaded library is " + cudnn_version_string(cudnn_version));
  }
}

bool output_present(const OutputSpec& spec, const OpRecord& op) {
  switch (spec.presence) {
    case Presence::kAlways: return true;
    case Presence::kIfTraining: {
      const AttrValue* phase = op.attr("norm_forward_phase");
      // norm_forward_phase INFERENCE = 1 (frontend numbering); unset counts as training.
      return phase == nullptr || std::get<int64_t>(*phase) != 1;
    }
    case Presence::kIfInputGiven: return op.input(spec.input) >= 0;
    case Presence::kIfInputGivenAndAttrNotFalse: {
      if (op.input(spec.input) < 0) return false;
      const AttrValue* flag = op.attr(spec.attr);
      return flag == nullptr || std::get<bool>(*flag);
    }
    case Presence::kIfSdpaStats: {
      if (const AttrValue* gen = op.attr("generate_stats")) return std::get<bool>(*gen);
      if (const AttrValue* inf = op.attr("is_inference")) return !std::get<bool>(*inf);
      return false;
    }
  }
  return true;
}

std::vector<int64_t> row_major(const std::vector<int64_t>& dim) {
  std::vector<int64_t> stride(dim.size(), 1);
  for (int i = static_cast<int>(dim.size()) - 2; i >= 0; --i) stride[i] = stride[i + 1] * dim[i + 1];
  return stride;
}

}  // namespace

// --- OpRecord ------------------------------------------------------------------------------------

int OpRecord::input(const std::string& port) const {
  for (const auto& [name, t] : inputs) {
    if (name == port) return t;
  }
  return -1;
}

int OpRecord::output(const std::string& port) const {
  for (const auto& [name, t] : outputs) {
    if (name == port) return t;
  }
  return -1;
}

std::vector<int> OpRecord::list_input(const std::string& port) const {
  std::vector<int> out;
  for (size_t i = 0;; ++i) {
    const int t = input(port + "_" + std::to_string(i));
    if (t < 0) break;
    out.push_back(t);
  }
  return out;
}

const AttrValue* OpRecord::attr(const std::string& attr_name) const {
  for (const auto& [name, value] : attrs) {
    if (name == attr_name) return &value;
  }
  return nullptr;
}

// --- GraphRecord ----------------------------------------------------------------------------------

GraphRecord::GraphRecord(GraphContext context) : context_(std::move(context)) {
  for (int64_t dt : {context_.io_data_type, context_.intermediate_data_type,
                     context_.compute_data_type}) {
    if (dt != 0 && find_frontend(EnumKind::kDataType, dt) == nullptr) {
      throw ArgumentValueError("backend_graph: " + std::to_string(dt) +
                               " is not a data_type value (" +
                               enum_members(EnumKind::kDataType) + ")");
    }
  }
}

const TensorRecord& GraphRecord::tensor(int index) const {
  check_index(index);
  return tensors_[index];
}

void GraphRecord::check_index(int t) const {
  if (t < 0 || t >= static_cast<int>(tensors_.size())) {
    throw ArgumentValueError("tensor index " + std::to_string(t) + " is not in this graph");
  }
}

void GraphRecord::check_mutable(const char* what) const {
  if (frozen_) {
    throw StateError(std::string("cannot ") + what +
                     ": the backend graph is frozen once its descriptors exist "
                     "(finalize_op_descriptors / build_operation_graph); build a new graph");
  }
}

std::string GraphRecord::describe_tensor(int t) const {
  const TensorRecord& r = tensor(t);
  std::string out = "'" + r.name + "'";
  out += r.uid_assigned ? " (uid " + std::to_string(r.uid) + ")" : " (no uid)";
  return out;
}

int GraphRecord::find_uid(int64_t uid) const {
  const auto it = uid_index_.find(uid);
  return it == uid_index_.end() ? -1 : it->second;
}

int GraphRecord::add_tensor(TensorSpec spec) {
  check_mutable("create a tensor");
  const std::string label = spec.name.empty() ? "tensor" : "tensor '" + spec.name + "'";
  if (spec.uid < 0) {
    throw ArgumentValueError(label + ": uid must be >= 0, got " + std::to_string(spec.uid));
  }
  if (const int holder = find_uid(spec.uid); holder >= 0) {
    throw ArgumentValueError(label + ": uid " + std::to_string(spec.uid) +
                             " is already used by tensor " + describe_tensor(holder));
  }
  if (spec.dim.empty() || spec.dim.size() > CUDNN_DIM_MAX) {
    throw ArgumentValueError(label + ": dim must have 1.." + std::to_string(CUDNN_DIM_MAX) +
                             " extents, got " + std::to_string(spec.dim.size()));
  }
  for (int64_t d : spec.dim) {
    if (d <= 0) throw ArgumentValueError(label + ": every extent of dim must be > 0");
  }
  const bool stride_given = !spec.stride.empty();
  if (stride_given) {
    if (spec.stride.size() != spec.dim.size()) {
      throw ArgumentValueError(label + ": stride has " + std::to_string(spec.stride.size()) +
                               " entries but dim has " + std::to_string(spec.dim.size()));
    }
    for (int64_t s : spec.stride) {
      if (s <= 0) throw ArgumentValueError(label + ": every stride must be > 0 (cuDNN rule)");
    }
  }
  if (spec.data_type != 0 && find_frontend(EnumKind::kDataType, spec.data_type) == nullptr) {
    throw ArgumentValueError(label + ": " + std::to_string(spec.data_type) +
                             " is not a data_type value");
  }
  if (spec.is_virtual && spec.is_pass_by_value) {
    throw ArgumentValueError(label + ": a tensor cannot be both virtual and pass-by-value");
  }
  if (spec.scalar_value.has_value() && !spec.is_pass_by_value) {
    throw ArgumentValueError(label + ": an embedded scalar value needs is_pass_by_value=True");
  }
  if (spec.ragged_offset >= 0) check_index(spec.ragged_offset);

  TensorRecord r;
  r.name = spec.name.empty() ? "tensor_" + std::to_string(tensors_.size()) : spec.name;
  r.uid = spec.uid;
  r.uid_assigned = true;
  r.dim = spec.dim;
  r.dim_assigned = true;
  r.stride = stride_given ? spec.stride : row_major(spec.dim);
  r.stride_assigned = stride_given;
  r.data_type = spec.data_type;
  r.data_type_assigned = spec.data_type != 0;
  r.is_virtual = spec.is_virtual;
  r.is_pass_by_value = spec.is_pass_by_value;
  r.scalar_value = spec.scalar_value;
  r.ragged_offset = spec.ragged_offset;
  r.reordering = spec.reordering;
  tensors_.push_back(std::move(r));
  const int index = static_cast<int>(tensors_.size()) - 1;
  uid_index_[spec.uid] = index;
  validated_ = false;
  return index;
}

std::string GraphRecord::next_op_name(const OpSchema& schema) const {
  // The counter advances only when an op is actually recorded (see add_op), so a declined
  // call does not leave a gap in the names.
  const auto it = op_counters_.find(schema.method);
  return std::string(schema.method) + "." + std::to_string(it == op_counters_.end() ? 0 : it->second);
}

std::vector<int> GraphRecord::add_op(const OpSchema& schema, OpCall call,
                                     int64_t cudnn_version) {
  check_mutable("add an op");
  const std::string method = schema.method;
  if (schema.missing_from_headers != nullptr) {
    throw GraphNotSupported(method + ": this extension was built against cuDNN " +
                            cudnn_version_string(CUDNN_VERSION) + " headers, which lack " +
                            schema.missing_from_headers);
  }
  check_version(method, schema.min_version, cudnn_version);
  if (const std::string why = runtime_decline(schema, cudnn_version); !why.empty()) {
    throw GraphNotSupported(why);
  }
  if (schema.no_lowering != nullptr) throw GraphNotSupported(method + ": " + schema.no_lowering);

  OpRecord op;
  op.schema = &schema;
  op.name = call.name.empty() ? next_op_name(schema) : call.name;
  const std::string where = method + " '" + op.name + "'";

  if (call.compute_data_type != 0) {
    if (!schema.takes_compute_data_type) {
      throw ArgumentTypeError(where + ": compute_data_type is not an argument of " + method);
    }
    if (find_frontend(EnumKind::kDataType, call.compute_data_type) == nullptr) {
      throw ArgumentValueError(where + ": compute_data_type " +
                               std::to_string(call.compute_data_type) +
                               " is not a data_type value");
    }
  }
  op.compute_data_type = call.compute_data_type;

  std::set<std::string> seen_ports;
  for (const auto& [port, t] : call.inputs) {
    const std::string base = base_port(port, schema);
    const PortSpec* spec = schema.find_input(base);
    if (spec == nullptr) {
      throw ArgumentTypeError(where + ": unexpected tensor argument '" + port + "'");
    }
    if (!seen_ports.insert(port).second) {
      throw ArgumentTypeError(where + ": tensor argument '" + port + "' given twice");
    }
    check_index(t);
    if (spec->unsupported != nullptr) {
      throw GraphNotSupported(where + ": argument '" + base + "' is not supported: " +
                              spec->unsupported);
    }
    check_version(where + ": argument '" + base + "'", spec->min_version, cudnn_version);
    op.inputs.emplace_back(port, t);
  }
  for (const auto& spec : schema.inputs) {
    if (!spec.required) continue;
    const bool given = spec.is_list ? seen_ports.count(std::string(spec.name) + "_0") > 0
                                    : seen_ports.count(spec.name) > 0;
    if (!given) {
      throw ArgumentTypeError(where + ": missing required tensor argument '" + spec.name + "'");
    }
  }

  for (auto& [name, value] : call.attrs) {
    const AttrSpec* spec = schema.find_attr(name);
    if (spec == nullptr) {
      throw ArgumentTypeError(where + ": unexpected keyword argument '" + name + "'");
    }
    if (!attr_is_set(value)) continue;  // None means "not given"
    if (!attr_type_matches(*spec, value)) {
      throw ArgumentTypeError(where + ": argument '" + name + "' has the wrong type (" +
                              attr_to_string(value) + ")");
    }
    if (spec->type == AttrType::kEnum &&
        find_frontend(spec->enum_kind, std::get<int64_t>(value)) == nullptr) {
      throw ArgumentValueError(where + ": argument '" + name + "': " + attr_to_string(value) +
                               " is not a " + enum_kind_name(spec->enum_kind) + " value (" +
                               enum_members(spec->enum_kind) + ")");
    }
    const bool neutral = attr_equals(value, spec->neutral);
    if (spec->unsupported != nullptr && !neutral) {
      throw GraphNotSupported(where + ": " + name + "=" + attr_to_string(value) +
                              " is not supported: " + spec->unsupported);
    }
    if (!neutral) check_version(where + ": " + name, spec->min_version, cudnn_version);
    op.attrs.emplace_back(name, value);
  }
  for (const auto& spec : schema.attrs) {
    if (spec.required && op.attr(spec.name) == nullptr) {
      throw ArgumentTypeError(where + ": missing required argument '" + spec.name + "'");
    }
  }

  check_op_rules(op, *this);

  // Outputs: virtual, no uid, no dtype; Python pushes uids (and dims/strides it owns).
  std::vector<int> result;
  const int op_index = static_cast<int>(ops_.size());
  for (const auto& spec : schema.outputs) {
    if (!output_present(spec, op)) {
      result.push_back(-1);
      continue;
    }
    TensorRecord r;
    r.name = op.name + "::" + spec.name;
    r.is_virtual = true;
    r.producer = op_index;
    r.producer_port = spec.name;
    tensors_.push_back(std::move(r));
    const int t = static_cast<int>(tensors_.size()) - 1;
    op.outputs.emplace_back(spec.name, t);
    result.push_back(t);
  }
  if (is_composite(schema.kind)) create_internals(op);
  ops_.push_back(std::move(op));
  ++op_counters_[schema.method];
  validated_ = false;
  return result;
}

// --- Setters ---------------------------------------------------------------------------------------

void GraphRecord::set_uid(int t, int64_t uid) {
  check_index(t);
  TensorRecord& r = tensors_[t];
  if (r.uid_assigned && r.uid == uid) return;  // same value: no change, allowed when frozen
  check_mutable("change a tensor uid");
  if (uid < 0) {
    throw ArgumentValueError("tensor '" + r.name + "': uid must be >= 0, got " +
                             std::to_string(uid));
  }
  if (const int holder = find_uid(uid); holder >= 0) {
    throw ArgumentValueError("tensor '" + r.name + "': uid " + std::to_string(uid) +
                             " is already used by tensor " + describe_tensor(holder));
  }
  if (r.uid_assigned) uid_index_.erase(r.uid);
  r.uid = uid;
  r.uid_assigned = true;
  uid_index_[uid] = t;
  validated_ = false;
}

void GraphRecord::set_dim(int t, std::vector<int64_t> dim) {
  check_index(t);
  check_mutable("set a tensor's dim");
  if (dim.empty() || dim.size() > CUDNN_DIM_MAX) {
    throw ArgumentValueError("tensor '" + tensors_[t].name + "': dim must have 1.." +
                             std::to_string(CUDNN_DIM_MAX) + " extents");
  }
  for (int64_t d : dim) {
    if (d <= 0) {
      throw ArgumentValueError("tensor '" + tensors_[t].name + "': every extent must be > 0");
    }
  }
  TensorRecord& r = tensors_[t];
  r.dim = std::move(dim);
  r.dim_assigned = true;
  if (!r.stride_assigned) r.stride = row_major(r.dim);
  validated_ = false;
}

void GraphRecord::set_stride(int t, std::vector<int64_t> stride) {
  check_index(t);
  check_mutable("set a tensor's stride");
  for (int64_t s : stride) {
    if (s <= 0) {
      throw ArgumentValueError("tensor '" + tensors_[t].name +
                               "': every stride must be > 0 (cuDNN rule)");
    }
  }
  tensors_[t].stride = std::move(stride);
  tensors_[t].stride_assigned = true;
  validated_ = false;
}

void GraphRecord::set_data_type(int t, int64_t data_type) {
  check_index(t);
  check_mutable("set a tensor's data type");
  if (data_type != 0 && find_frontend(EnumKind::kDataType, data_type) == nullptr) {
    throw ArgumentValueError("tensor '" + tensors_[t].name + "': " + std::to_string(data_type) +
                             " is not a data_type value (" + enum_members(EnumKind::kDataType) +
                             ")");
  }
  tensors_[t].data_type = data_type;
  tensors_[t].data_type_assigned = data_type != 0;
  validated_ = false;
}

void GraphRecord::set_is_virtual(int t, bool is_virtual) {
  check_index(t);
  check_mutable("change whether a tensor is virtual");
  if (is_virtual && tensors_[t].is_pass_by_value) {
    throw ArgumentValueError("tensor '" + tensors_[t].name +
                             "': a pass-by-value tensor cannot be virtual");
  }
  tensors_[t].is_virtual = is_virtual;
  validated_ = false;
}

void GraphRecord::set_is_pass_by_value(int t, bool value) {
  check_index(t);
  check_mutable("change whether a tensor is pass-by-value");
  TensorRecord& r = tensors_[t];
  if (value && (r.is_virtual || r.producer >= 0)) {
    throw ArgumentValueError("tensor '" + r.name +
                             "': only graph inputs that are not virtual can be pass-by-value");
  }
  r.is_pass_by_value = value;
  if (!value) r.scalar_value.reset();
  validated_ = false;
}

void GraphRecord::set_scalar_value(int t, double value) {
  check_index(t);
  check_mutable("set a tensor's embedded value");
  if (!tensors_[t].is_pass_by_value) {
    throw ArgumentValueError("tensor '" + tensors_[t].name +
                             "': an embedded value needs a pass-by-value tensor");
  }
  tensors_[t].scalar_value = value;
  validated_ = false;
}

void GraphRecord::set_name(int t, std::string name) {
  check_index(t);
  check_mutable("rename a tensor");
  tensors_[t].name = std::move(name);
}

void GraphRecord::set_ragged_offset(int t, int offset_tensor) {
  check_index(t);
  check_index(offset_tensor);
  check_mutable("set a tensor's ragged offset");
  if (offset_tensor == t) {
    throw ArgumentValueError("tensor '" + tensors_[t].name +
                             "': a tensor cannot be its own ragged offset");
  }
  tensors_[t].ragged_offset = offset_tensor;
  validated_ = false;
}

void GraphRecord::set_reordering(int t, int64_t reordering) {
  check_index(t);
  check_mutable("set a tensor's reordering type");
  if (find_frontend(EnumKind::kTensorReordering, reordering) == nullptr) {
    throw ArgumentValueError("tensor '" + tensors_[t].name + "': " + std::to_string(reordering) +
                             " is not a tensor_reordering value (" +
                             enum_members(EnumKind::kTensorReordering) + ")");
  }
  tensors_[t].reordering = reordering;
  validated_ = false;
}

void GraphRecord::set_in_workspace(int t, bool value) {
  check_index(t);
  check_mutable("change whether a tensor lives in the workspace");
  TensorRecord& r = tensors_[t];
  if (value && r.producer < 0) {
    throw ArgumentValueError("tensor '" + r.name + "': only op outputs can live in the "
                             "workspace (a graph input's contents come from the caller)");
  }
  r.in_workspace = value;
  if (value) r.is_virtual = false;  // it is materialized, just not by the caller
  validated_ = false;
}

// --- Validation ------------------------------------------------------------------------------------

int64_t GraphRecord::effective_compute_type(const OpRecord& op) const {
  if (op.compute_data_type != 0) return op.compute_data_type;
  if (context_.compute_data_type != 0) return context_.compute_data_type;
  return data_type::kFloat;
}

std::vector<int> GraphRecord::used_tensors() const {
  std::vector<int> order;
  std::set<int> seen;
  auto visit = [&](int t) {
    // Follow ragged-offset chains so offsets get descriptors before the tensors using them.
    std::vector<int> chain;
    for (int cur = t; cur >= 0 && !seen.count(cur); cur = tensors_[cur].ragged_offset) {
      chain.push_back(cur);
      seen.insert(cur);
    }
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) order.push_back(*it);
  };
  for (const auto& op : ops_) {
    for (const auto& binding : op.inputs) visit(binding.second);
    for (const auto& binding : op.outputs) visit(binding.second);
    for (const auto& binding : op.internals) visit(binding.second);
  }
  return order;
}

void GraphRecord::validate() {
  if (ops_.empty()) throw ArgumentValueError("backend_graph.validate(): the graph has no ops");

  // Shapes, in op order (ops are recorded after their inputs exist, so this is topological).
  for (const auto& op : ops_) {
    for (const auto& [port, t] : op.outputs) {
      TensorRecord& r = tensors_[t];
      if (!r.dim_assigned) {
        auto dims = infer_output_dim(op, port, *this);
        if (!dims.has_value()) {
          throw ArgumentValueError(std::string(op.schema->method) + " '" + op.name +
                                   "': cannot infer the dims of output " + port +
                                   "; set them on the tensor (set_dim)");
        }
        r.dim = std::move(*dims);
      }
      if (!r.stride_assigned) r.stride = infer_output_stride(op, port, r.dim, *this);
    }
  }

  // Internal tensors are laid out from the others' final dims and types, so they come last.
  const std::vector<int> used = used_tensors();
  for (int t : used) {
    if (!tensors_[t].internal) check_and_fill(t);
  }
  layout_internals();
  check_transposed_inputs();
  for (int t : used) {
    if (tensors_[t].internal) check_and_fill(t);
  }
  validated_ = true;
}

void GraphRecord::check_and_fill(int t) {
  TensorRecord& r = tensors_[t];
  const std::string label = "tensor '" + r.name + "'";
  if (!r.uid_assigned) {
    std::string origin = r.producer >= 0 ? " (" + std::string(r.internal ? "internal tensor " : "output ") +
                                               r.producer_port + " of op '" +
                                               ops_[r.producer].name + "')"
                                         : "";
    throw StateError("uid ownership violated: " + label + origin +
                     " has no uid. Every uid is pushed from Python (tensor(uid=...) or "
                     "set_uid); the backend graph never assigns one");
  }
  if (r.dim.empty()) throw ArgumentValueError(label + " has no dims");
  if (r.stride.size() != r.dim.size()) {
    throw ArgumentValueError(label + ": stride rank " + std::to_string(r.stride.size()) +
                             " does not match dim rank " + std::to_string(r.dim.size()));
  }
  if (r.is_virtual && r.is_pass_by_value) {
    throw ArgumentValueError(label + " is both virtual and pass-by-value");
  }
  if (r.is_virtual && r.in_workspace) {
    throw ArgumentValueError(label + " is both virtual and workspace-resident (a "
                                     "workspace tensor is materialized)");
  }
  if (!r.data_type_assigned) {
    int64_t filled = 0;
    if (r.producer >= 0) {
      const OutputSpec* spec = ops_[r.producer].schema->find_output(r.producer_port);
      if (spec != nullptr) filled = spec->default_data_type;
    }
    if (filled == 0) {
      filled = r.is_virtual ? (context_.intermediate_data_type != 0
                                   ? context_.intermediate_data_type
                                   : data_type::kFloat)
                            : context_.io_data_type;
    }
    if (filled == 0) {
      throw ArgumentValueError(label + " has no data type and the graph has no "
                                       "io_data_type to default to");
    }
    r.data_type = filled;
  }
}

}  // namespace cudnn_backend
