// Dict views for Python (see py_views.h).
#include "backend_cc/bindings/py_views.h"

#include <pybind11/stl.h>

#include "backend_cc/cc/composite.h"

#include <type_traits>
#include <variant>

namespace cudnn_backend::py_bindings {

namespace {

// Flat (start, stop, step) triples back into Python slice objects.
py::list slices_list(const std::vector<int64_t>& flat) {
  py::list out;
  auto bound = [](int64_t v) { return v == kSliceNone ? py::object(py::none()) : py::object(py::int_(v)); };
  for (size_t i = 0; i + 2 < flat.size(); i += 3) {
    out.append(py::reinterpret_steal<py::object>(
        PySlice_New(bound(flat[i]).ptr(), bound(flat[i + 1]).ptr(), bound(flat[i + 2]).ptr())));
  }
  return out;
}

py::dict attrs_dict(const OpRecord& op) {
  py::dict d;
  for (const auto& [name, value] : op.attrs) {
    const AttrSpec* spec = op.schema->find_attr(name);
    if (spec != nullptr && spec->type == AttrType::kSliceList) {
      d[py::str(name)] = slices_list(std::get<std::vector<int64_t>>(value));
      continue;
    }
    d[py::str(name)] = std::visit([](const auto& v) -> py::object {
      using V = std::decay_t<decltype(v)>;
      if constexpr (std::is_same_v<V, std::monostate>) {
        return py::none();
      } else {
        return py::cast(v);
      }
    }, value);
  }
  return d;
}

}  // namespace

py::dict op_dict(const GraphPtr& g, const OpRecord& op) {
  py::dict inputs, outputs;
  for (const auto& [port, t] : op.inputs) inputs[py::str(port)] = wrap_tensor(g, t);
  for (const auto& spec : op.schema->outputs) outputs[py::str(spec.name)] = wrap_tensor(g, op.output(spec.name));
  py::dict d;
  d["name"] = op.name;
  d["method"] = op.schema->method;
  d["kind"] = op_kind_name(op.schema->kind);
  d["inputs"] = inputs;
  d["outputs"] = outputs;
  d["attrs"] = attrs_dict(op);
  d["compute_data_type"] = op.compute_data_type;
  py::dict internals;
  for (const auto& [name, t] : op.internals) internals[py::str(name)] = wrap_tensor(g, t);
  d["internals"] = internals;
  return d;
}

py::dict plan_dict(const BackendGraph& g, int i) {
  const PlanInfo& p = g.plan_info(i);
  py::dict knobs;
  for (const auto& [type, value] : p.knobs) knobs[py::int_(type)] = value;
  py::dict d;
  d["index"] = i;
  d["engine_id"] = p.engine_id;
  d["knobs"] = knobs;
  d["name"] = p.name;
  d["heur_mode"] = p.heur_mode < 0 ? py::object(py::none()) : py::object(py::int_(p.heur_mode));
  d["behavior_notes"] = p.behavior_notes;
  d["numerical_notes"] = p.numerical_notes;
  d["deserialized"] = p.deserialized;
  d["built"] = g.plan_built(i);
  d["failure"] = g.plan_failure(i);
  return d;
}

py::dict schema_dict(const OpSchema& s) {
  py::list inputs, outputs, attrs;
  for (const auto& p : s.inputs) {
    py::dict d;
    d["name"] = p.name;
    d["required"] = p.required;
    d["is_list"] = p.is_list;
    d["unsupported"] = p.unsupported ? py::object(py::str(p.unsupported)) : py::object(py::none());
    d["min_version"] = p.min_version;
    inputs.append(d);
  }
  for (const auto& o : s.outputs) outputs.append(py::str(o.name));
  for (const auto& a : s.attrs) {
    py::dict d;
    d["name"] = a.name;
    d["required"] = a.required;
    d["unsupported"] = a.unsupported ? py::object(py::str(a.unsupported)) : py::object(py::none());
    attrs.append(d);
  }
  py::dict d;
  d["method"] = s.method;
  d["kind"] = op_kind_name(s.kind);
  d["inputs"] = inputs;
  d["outputs"] = outputs;
  d["attrs"] = attrs;
  d["takes_compute_data_type"] = s.takes_compute_data_type;
  d["min_version"] = s.min_version;
  d["min_runtime_version"] = s.min_runtime_version;
  d["min_sm"] = s.min_sm;
  d["min_sm_reason"] = s.min_sm_reason ? py::object(py::str(s.min_sm_reason)) : py::object(py::none());
  d["no_lowering"] = s.no_lowering ? py::object(py::str(s.no_lowering)) : py::object(py::none());
  d["missing_from_headers"] = s.missing_from_headers ? py::object(py::str(s.missing_from_headers))
                                                     : py::object(py::none());
  d["composite"] = is_composite(s.kind);
  d["signature"] = op_signature(s);
  return d;
}

}  // namespace cudnn_backend::py_bindings
