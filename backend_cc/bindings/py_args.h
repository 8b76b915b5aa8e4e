// Conversion of Python arguments into the C++ record types, with errors that name the method
// and the argument: TypeError for a wrong kind of value or an unknown/missing argument,
// ValueError for a value outside its vocabulary.
#pragma once

#include <pybind11/pybind11.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend_cc/cc/backend_graph.h"
#include "backend_cc/cc/enums.h"
#include "backend_cc/cc/op_schema.h"

namespace cudnn_backend::py_bindings {

namespace py = pybind11;

// The Python-side handle of one tensor of a backend graph.
struct PyTensor {
  std::shared_ptr<BackendGraph> graph;
  int index;
};

int64_t as_int(py::handle value, const std::string& what);
double as_float(py::handle value, const std::string& what);
bool as_bool(py::handle value, const std::string& what);
std::vector<int64_t> as_int_list(py::handle value, const std::string& what);
// An int, or an enum member whose `.value` is an int (the IR's enums, IntEnum, pybind enums).
int64_t as_enum(py::handle value, EnumKind kind, const std::string& what);
// None -> 0 (unset); otherwise as_enum(kDataType).
int64_t as_data_type(py::handle value, const std::string& what);
uintptr_t as_pointer(py::handle value, const std::string& what);
// A tensor handle of `graph`: TypeError for other objects, ValueError for another graph's.
int as_tensor(py::handle value, const BackendGraph* graph, const std::string& what);

// Keyword parser for the non-op methods: binds positionals in declared order, rejects
// unknown names, reports missing required ones.
class ArgParser {
 public:
  ArgParser(std::string method, std::vector<std::string> names, std::vector<std::string> required,
            const py::args& args, const py::kwargs& kwargs);
  // The argument or None.
  py::object get(const std::string& name) const;
  bool given(const std::string& name) const;
  const std::string& method() const { return method_; }
  std::string what(const std::string& name) const { return method_ + "(): argument '" + name + "'"; }

 private:
  std::string method_;
  std::map<std::string, py::object> values_;
};

// Parses one op call against its table row.
OpCall parse_op_call(const OpSchema& schema, const BackendGraph* graph, const py::args& args,
                     const py::kwargs& kwargs);

}  // namespace cudnn_backend::py_bindings
