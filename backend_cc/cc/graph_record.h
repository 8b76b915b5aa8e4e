// The pure-C++ recording layer of a backend graph: tensors (with the uids Python pushed) and
// ops (checked against the op table). Nothing here needs libcudnn; materialization into
// backend descriptors happens later (backend_graph.h) and only reads this record.
//
// Uid ownership: every tensor's uid comes from Python. Tensors created by `add_tensor` carry
// one from birth; op outputs start without one and Python must `set_uid` them. validate()
// fails loudly if any tensor an op touches still has none: this layer never invents a uid.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backend_cc/cc/attr_value.h"
#include "backend_cc/cc/op_schema.h"

namespace cudnn_backend {

struct TensorRecord {
  std::string name;
  bool uid_assigned = false;
  int64_t uid = 0;
  std::vector<int64_t> dim;
  std::vector<int64_t> stride;
  bool dim_assigned = false;     // set by the caller; otherwise inferred at validate()
  bool stride_assigned = false;
  int64_t data_type = 0;         // frontend data_type; 0 = unset (filled at validate())
  bool data_type_assigned = false;
  bool is_virtual = false;
  bool is_pass_by_value = false;
  std::optional<double> scalar_value;  // embedded host value of a pass-by-value tensor
  int ragged_offset = -1;        // index of the tensor holding ragged offsets, -1 = none
  int64_t reordering = 0;        // frontend tensor_reordering
  int producer = -1;             // index of the op that outputs it, -1 for graph inputs
  std::string producer_port;
  // A non-virtual op output whose buffer the graph carves from the execute workspace
  // (workspace_tensors.h), so the caller never binds it: scratch a lowering needs that is
  // neither a graph input nor a graph output (e.g. the composite SDPA backward's row sums).
  bool in_workspace = false;
  // An internal tensor of a composite op (composite.h): virtual, laid out by the expansion.
  bool internal = false;
};

// One tensor port binding: port name -> tensor index. List ports appear as <port>_<i>.
using PortBinding = std::pair<std::string, int>;

struct OpRecord {
  const OpSchema* schema = nullptr;
  std::string name;
  int64_t compute_data_type = 0;  // frontend data_type; 0 = graph default
  std::vector<PortBinding> inputs;
  std::vector<PortBinding> outputs;  // present outputs only, in table order
  // Internal tensors of a composite op (composite.h), in expansion order.
  std::vector<PortBinding> internals;
  std::vector<std::pair<std::string, AttrValue>> attrs;  // attributes that were given

  int input(const std::string& port) const;   // tensor index or -1
  int output(const std::string& port) const;  // tensor index or -1
  std::vector<int> list_input(const std::string& port) const;
  const AttrValue* attr(const std::string& name) const;  // nullptr when not given
};

struct GraphContext {
  std::string name;
  int64_t io_data_type = 0;             // 0 = not set
  int64_t intermediate_data_type = 0;   // 0 = FLOAT at lowering
  int64_t compute_data_type = 0;        // 0 = FLOAT at lowering
};

// What the binding parsed from one op call.
struct OpCall {
  std::string name;
  int64_t compute_data_type = 0;
  std::vector<PortBinding> inputs;
  std::vector<std::pair<std::string, AttrValue>> attrs;
};

struct TensorSpec {
  int64_t uid = 0;
  std::vector<int64_t> dim;
  std::vector<int64_t> stride;  // empty = row-major, not marked as caller-set
  int64_t data_type = 0;
  bool is_virtual = false;
  bool is_pass_by_value = false;
  std::optional<double> scalar_value;
  std::string name;
  int ragged_offset = -1;
  int64_t reordering = 0;
};

class GraphRecord {
 public:
  explicit GraphRecord(GraphContext context);

  const GraphContext& context() const { return context_; }
  const std::vector<TensorRecord>& tensors() const { return tensors_; }
  const std::vector<OpRecord>& ops() const { return ops_; }
  const TensorRecord& tensor(int index) const;

  int add_tensor(TensorSpec spec);
  // Records one op; returns the output tensor indices in table order, -1 for absent
  // conditional outputs. `cudnn_version` is the loaded library's version (0 = unknown) and
  // gates ports/attributes newer than the library. Declines raise GraphNotSupported.
  std::vector<int> add_op(const OpSchema& schema, OpCall call, int64_t cudnn_version);

  // Tensor setters; every one raises StateError once the graph is frozen.
  void set_uid(int t, int64_t uid);
  void set_dim(int t, std::vector<int64_t> dim);
  void set_stride(int t, std::vector<int64_t> stride);
  void set_data_type(int t, int64_t data_type);
  void set_is_virtual(int t, bool is_virtual);
  void set_is_pass_by_value(int t, bool value);
  void set_scalar_value(int t, double value);
  void set_name(int t, std::string name);
  void set_ragged_offset(int t, int offset_tensor);
  void set_reordering(int t, int64_t reordering);
  // Marks op output `t` as workspace-resident (and so non-virtual), or clears the mark.
  void set_in_workspace(int t, bool value);

  // Fills unset data types, infers output dims/strides that the caller did not set, and
  // checks every tensor an op touches (uid present and unique, dims/strides consistent).
  void validate();
  bool validated() const { return validated_; }

  // Called once descriptors exist; from then on every mutation raises.
  void freeze() { frozen_ = true; }
  bool frozen() const { return frozen_; }

  // Tensors that must appear in descriptors: everything an op touches plus ragged offsets,
  // in first-use order.
  std::vector<int> used_tensors() const;

  // Tensors a composite op describes with their last two axes swapped (composite.h).
  std::set<int> transposed_tensors() const;

  int find_uid(int64_t uid) const;  // tensor index or -1
  std::string describe_tensor(int t) const;  // "'name' (uid 5)" for messages

  int64_t effective_compute_type(const OpRecord& op) const;

 private:
  void check_mutable(const char* what) const;
  void check_index(int t) const;
  void create_internals(OpRecord& op);
  void layout_internals();
  void check_transposed_inputs() const;
  void check_and_fill(int t);
  std::string next_op_name(const OpSchema& schema) const;

  GraphContext context_;
  std::vector<TensorRecord> tensors_;
  std::vector<OpRecord> ops_;
  std::map<int64_t, int> uid_index_;
  std::map<std::string, int> op_counters_;
  bool validated_ = false;
  bool frozen_ = false;
};

}  // namespace cudnn_backend
