// Python argument conversion (see py_args.h).
#include "backend_cc/bindings/py_args.h"

#include <pybind11/stl.h>

#include <algorithm>

#include "backend_cc/cc/errors.h"

namespace cudnn_backend::py_bindings {

namespace {

std::string type_name(py::handle value) {
  return py::str(py::type::handle_of(value).attr("__name__")).cast<std::string>();
}

bool is_int(py::handle value) {
  return !PyBool_Check(value.ptr()) && (PyLong_Check(value.ptr()) || PyIndex_Check(value.ptr()));
}

std::string accepted_names(const OpSchema& schema) {
  std::string out;
  auto add = [&](const std::string& name) { out += (out.empty() ? "" : ", ") + name; };
  for (const auto& p : schema.inputs) add(p.name);
  for (const auto& a : schema.attrs) add(a.name);
  if (schema.takes_compute_data_type) add("compute_data_type");
  add("name");
  return out;
}

// Python slice objects -> flat (start, stop, step) triples, kSliceNone for a missing bound.
AttrValue convert_slices(py::handle value, const std::string& what) {
  if (py::isinstance<py::str>(value) || !py::isinstance<py::sequence>(value)) {
    throw ArgumentTypeError(what + " must be a list of slice objects, got " + type_name(value));
  }
  std::vector<int64_t> flat;
  size_t i = 0;
  for (py::handle item : value) {
    const std::string item_what = what + "[" + std::to_string(i++) + "]";
    if (!PySlice_Check(item.ptr())) {
      throw ArgumentTypeError(item_what + " must be a slice, got " + type_name(item));
    }
    for (const char* field : {"start", "stop", "step"}) {
      py::object bound = item.attr(field);
      const int64_t v = bound.is_none() ? kSliceNone : as_int(bound, item_what + "." + field);
      if (!bound.is_none() && v == kSliceNone) {
        throw ArgumentValueError(item_what + "." + field + " is out of range");
      }
      flat.push_back(v);
    }
  }
  return AttrValue{flat};
}

AttrValue convert_attr(const AttrSpec& spec, py::handle value, const std::string& what) {
  switch (spec.type) {
    case AttrType::kSliceList: return convert_slices(value, what);
    case AttrType::kInt: return AttrValue{as_int(value, what)};
    case AttrType::kFloat: return AttrValue{as_float(value, what)};
    case AttrType::kBool: return AttrValue{as_bool(value, what)};
    case AttrType::kIntList: return AttrValue{as_int_list(value, what)};
    case AttrType::kEnum: return AttrValue{as_enum(value, spec.enum_kind, what)};
    case AttrType::kOpaque: break;
  }
  // Only None reaches the record for opaque values; anything else is what makes the
  // attribute unsupported in the first place.
  throw GraphNotSupported(what + " (" + type_name(value) + ") is not supported: " +
                          (spec.unsupported ? spec.unsupported : "the backend cannot carry it"));
}

void bind_tensor_port(OpCall& call, const PortSpec& port, py::handle value,
                      const BackendGraph* graph, const std::string& what) {
  if (!port.is_list) {
    call.inputs.emplace_back(port.name, as_tensor(value, graph, what));
    return;
  }
  if (!py::isinstance<py::list>(value) && !py::isinstance<py::tuple>(value)) {
    throw ArgumentTypeError(what + " must be a list of backend tensors, got " + type_name(value));
  }
  size_t i = 0;
  for (py::handle item : value) {
    const std::string item_what = what + "[" + std::to_string(i) + "]";
    call.inputs.emplace_back(std::string(port.name) + "_" + std::to_string(i),
                             as_tensor(item, graph, item_what));
    ++i;
  }
}

}  // namespace

int64_t as_int(py::handle value, const std::string& what) {
  if (!is_int(value)) {
    throw ArgumentTypeError(what + " must be an int, got " + type_name(value));
  }
  return py::int_(py::reinterpret_borrow<py::object>(value)).cast<int64_t>();
}

double as_float(py::handle value, const std::string& what) {
  if (PyBool_Check(value.ptr()) || !(PyFloat_Check(value.ptr()) || is_int(value))) {
    throw ArgumentTypeError(what + " must be a float, got " + type_name(value));
  }
  return py::float_(py::reinterpret_borrow<py::object>(value)).cast<double>();
}

bool as_bool(py::handle value, const std::string& what) {
  if (!PyBool_Check(value.ptr())) {
    throw ArgumentTypeError(what + " must be a bool, got " + type_name(value));
  }
  return value.ptr() == Py_True;
}

std::vector<int64_t> as_int_list(py::handle value, const std::string& what) {
  if (py::isinstance<py::str>(value) || !py::isinstance<py::sequence>(value)) {
    throw ArgumentTypeError(what + " must be a list of ints, got " + type_name(value));
  }
  std::vector<int64_t> out;
  size_t i = 0;
  for (py::handle item : value) {
    out.push_back(as_int(item, what + "[" + std::to_string(i++) + "]"));
  }
  return out;
}

int64_t as_enum(py::handle value, EnumKind kind, const std::string& what) {
  if (is_int(value)) return as_int(value, what);
  if (py::hasattr(value, "value")) {
    py::object inner = value.attr("value");
    if (is_int(inner)) return as_int(inner, what);
  }
  throw ArgumentTypeError(what + " must be a " + enum_kind_name(kind) +
                          " (an enum member or its int value), got " + type_name(value));
}

int64_t as_data_type(py::handle value, const std::string& what) {
  if (value.is_none()) return 0;
  const int64_t v = as_enum(value, EnumKind::kDataType, what);
  if (v != 0 && find_frontend(EnumKind::kDataType, v) == nullptr) {
    throw ArgumentValueError(what + ": " + std::to_string(v) + " is not a data_type value (" +
                             enum_members(EnumKind::kDataType) + ")");
  }
  return v;
}

uintptr_t as_pointer(py::handle value, const std::string& what) {
  if (value.is_none()) return 0;
  if (!is_int(value)) {
    throw ArgumentTypeError(what + " must be an int address, got " + type_name(value));
  }
  return py::int_(py::reinterpret_borrow<py::object>(value)).cast<uintptr_t>();
}

int as_tensor(py::handle value, const BackendGraph* graph, const std::string& what) {
  if (!py::isinstance<PyTensor>(value)) {
    std::string hint;
    if (PyFloat_Check(value.ptr()) || is_int(value)) {
      hint = " (a Python number must first become a pass-by-value tensor with "
             "tensor_scalar(uid=..., value=...): the backend graph never assigns uids)";
    }
    throw ArgumentTypeError(what + " must be a backend_tensor, got " + type_name(value) + hint);
  }
  const PyTensor& t = value.cast<const PyTensor&>();
  if (t.graph.get() != graph) {
    throw ArgumentValueError(what + " is a tensor of another backend_graph");
  }
  return t.index;
}

ArgParser::ArgParser(std::string method, std::vector<std::string> names,
                     std::vector<std::string> required, const py::args& args,
                     const py::kwargs& kwargs)
    : method_(std::move(method)) {
  if (args.size() > names.size()) {
    throw ArgumentTypeError(method_ + "() takes at most " + std::to_string(names.size()) +
                            " arguments (" + std::to_string(args.size()) + " given)");
  }
  for (size_t i = 0; i < args.size(); ++i) {
    values_[names[i]] = py::reinterpret_borrow<py::object>(args[i]);
  }
  for (const auto& item : kwargs) {
    const std::string key = py::str(item.first).cast<std::string>();
    if (std::find(names.begin(), names.end(), key) == names.end()) {
      std::string accepted;
      for (const auto& n : names) accepted += (accepted.empty() ? "" : ", ") + n;
      throw ArgumentTypeError(method_ + "() got an unexpected keyword argument '" + key +
                              "' (accepted: " + accepted + ")");
    }
    if (values_.count(key)) {
      throw ArgumentTypeError(method_ + "() got multiple values for argument '" + key + "'");
    }
    values_[key] = py::reinterpret_borrow<py::object>(item.second);
  }
  for (const auto& name : required) {
    if (!given(name)) {
      throw ArgumentTypeError(method_ + "() missing required argument '" + name + "'");
    }
  }
}

py::object ArgParser::get(const std::string& name) const {
  const auto it = values_.find(name);
  return it == values_.end() ? py::none() : it->second;
}

bool ArgParser::given(const std::string& name) const {
  const auto it = values_.find(name);
  return it != values_.end() && !it->second.is_none();
}

OpCall parse_op_call(const OpSchema& schema, const BackendGraph* graph, const py::args& args,
                     const py::kwargs& kwargs) {
  const std::string method = std::string("backend_graph.") + schema.method + "()";
  auto what = [&](const std::string& name) { return method + ": argument '" + name + "'"; };
  OpCall call;
  std::map<std::string, bool> seen;
  // A decline found while parsing waits until every argument was checked, so a misspelled
  // keyword is still reported as the TypeError it is.
  std::optional<GraphNotSupported> decline;

  if (args.size() > schema.inputs.size()) {
    throw ArgumentTypeError(method + " takes at most " + std::to_string(schema.inputs.size()) +
                            " positional tensor arguments (" + std::to_string(args.size()) +
                            " given); pass attributes by keyword");
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const PortSpec& port = schema.inputs[i];
    seen[port.name] = true;
    if (args[i].is_none()) continue;
    bind_tensor_port(call, port, args[i], graph, what(port.name));
  }

  for (const auto& item : kwargs) {
    const std::string key = py::str(item.first).cast<std::string>();
    py::handle value = item.second;
    if (seen[key]) throw ArgumentTypeError(method + " got multiple values for argument '" + key + "'");
    seen[key] = true;
    if (key == "name") {
      if (!value.is_none()) {
        if (!py::isinstance<py::str>(value)) {
          throw ArgumentTypeError(what(key) + " must be a str, got " + type_name(value));
        }
        call.name = value.cast<std::string>();
      }
    } else if (key == "compute_data_type" && schema.takes_compute_data_type) {
      call.compute_data_type = as_data_type(value, what(key));
    } else if (const PortSpec* port = schema.find_input(key)) {
      if (!value.is_none()) bind_tensor_port(call, *port, value, graph, what(key));
    } else if (const AttrSpec* attr = schema.find_attr(key)) {
      if (value.is_none()) continue;
      try {
        call.attrs.emplace_back(key, convert_attr(*attr, value, what(key)));
      } catch (const GraphNotSupported& e) {
        if (!decline) decline.emplace(e);
      }
    } else {
      throw ArgumentTypeError(method + " got an unexpected keyword argument '" + key +
                              "' (accepted: " + accepted_names(schema) + ")");
    }
  }
  if (decline) throw *decline;
  return call;
}

}  // namespace cudnn_backend::py_bindings
