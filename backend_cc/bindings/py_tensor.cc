// The backend_tensor class (see py_tensor.h).
#include "backend_cc/bindings/py_tensor.h"

#include <pybind11/stl.h>

#include "backend_cc/cc/enums.h"
#include "backend_cc/cc/errors.h"

namespace cudnn_backend::py_bindings {

namespace {

GraphRecord& rec(const PyTensor& t) { return t.graph->record(); }

// Fluent setters return the very Python object they were called on (t.set_uid(3) is t).
template <typename F>
auto chain(F apply) {
  return [apply](py::object self, py::handle value) {
    apply(self.cast<const PyTensor&>(), value);
    return self;
  };
}
const TensorRecord& info(const PyTensor& t) { return t.graph->record().tensor(t.index); }


}  // namespace

py::object wrap_tensor(const GraphPtr& graph, int index) {
  if (index < 0) return py::none();
  return py::cast(PyTensor{graph, index});
}

void register_tensor(py::module_& m) {
  py::class_<PyTensor>(m, "backend_tensor")
      .def("get_uid", [](const PyTensor& t) -> py::object {
        return info(t).uid_assigned ? py::object(py::int_(info(t).uid)) : py::object(py::none());
      }, "The uid Python pushed, or None when none was pushed yet.")
      .def("set_uid", chain([](const PyTensor& t, py::handle uid) {
        rec(t).set_uid(t.index, as_int(uid, "set_uid(): uid"));
      }))
      .def("get_uid_assigned", [](const PyTensor& t) { return info(t).uid_assigned; })
      .def("get_name", [](const PyTensor& t) { return info(t).name; })
      .def("set_name", chain([](const PyTensor& t, py::handle name) {
        if (!py::isinstance<py::str>(name)) throw ArgumentTypeError("set_name(): name must be a str");
        rec(t).set_name(t.index, name.cast<std::string>());
      }))
      .def("get_dim", [](const PyTensor& t) { return info(t).dim; })
      .def("set_dim", chain([](const PyTensor& t, py::handle dim) {
        rec(t).set_dim(t.index, as_int_list(dim, "set_dim(): dim"));
      }))
      .def("get_dim_assigned", [](const PyTensor& t) { return info(t).dim_assigned; })
      .def("get_stride", [](const PyTensor& t) { return info(t).stride; })
      .def("set_stride", chain([](const PyTensor& t, py::handle stride) {
        rec(t).set_stride(t.index, as_int_list(stride, "set_stride(): stride"));
      }))
      .def("get_stride_assigned", [](const PyTensor& t) { return info(t).stride_assigned; })
      .def("get_data_type", [](const PyTensor& t) { return info(t).data_type; },
           "Frontend data_type value (0 = not set yet).")
      .def("set_data_type", chain([](const PyTensor& t, py::handle dt) {
        rec(t).set_data_type(t.index, as_data_type(dt, "set_data_type(): data_type"));
      }))
      .def("get_is_virtual", [](const PyTensor& t) { return info(t).is_virtual; })
      .def("set_is_virtual", chain([](const PyTensor& t, py::handle v) {
        rec(t).set_is_virtual(t.index, as_bool(v, "set_is_virtual(): value"));
      }))
      .def("set_output", chain([](const PyTensor& t, py::handle v) {
        rec(t).set_is_virtual(t.index, !as_bool(v, "set_output(): value"));
      }))
      .def("get_is_pass_by_value", [](const PyTensor& t) { return info(t).is_pass_by_value; })
      .def("set_is_pass_by_value", chain([](const PyTensor& t, py::handle v) {
        rec(t).set_is_pass_by_value(t.index, as_bool(v, "set_is_pass_by_value(): value"));
      }))
      .def("get_workspace_resident", [](const PyTensor& t) { return info(t).in_workspace; })
      .def("set_workspace_resident", chain([](const PyTensor& t, py::handle v) {
        rec(t).set_in_workspace(t.index, as_bool(v, "set_workspace_resident(): value"));
      }), "Marks an op output as scratch the graph carves from the execute workspace (it "
          "becomes non-virtual; execute binds it itself, callers give no buffer for it).")
      .def("get_pass_by_value", [](const PyTensor& t) -> py::object {
        const auto& v = info(t).scalar_value;
        return v ? py::object(py::float_(*v)) : py::object(py::none());
      })
      .def("set_pass_by_value", chain([](const PyTensor& t, py::handle v) {
        rec(t).set_scalar_value(t.index, as_float(v, "set_pass_by_value(): value"));
      }))
      .def("get_ragged_offset", [](const PyTensor& t) { return wrap_tensor(t.graph, info(t).ragged_offset); })
      .def("set_ragged_offset", chain([](const PyTensor& t, py::handle offset) {
        rec(t).set_ragged_offset(
            t.index, as_tensor(offset, t.graph.get(), "set_ragged_offset(): tensor"));
      }))
      .def("get_reordering_type", [](const PyTensor& t) { return info(t).reordering; })
      .def("set_reordering_type", chain([](const PyTensor& t, py::handle v) {
        rec(t).set_reordering(t.index, as_enum(v, EnumKind::kTensorReordering,
                                                            "set_reordering_type(): value"));
      }))
      .def("get_producer", [](const PyTensor& t) -> py::object {
        const TensorRecord& r = info(t);
        if (r.producer < 0) return py::none();
        return py::make_tuple(rec(t).ops()[r.producer].name, r.producer_port);
      }, "(op name, output port) of the op that produces this tensor, or None.")
      .def("__eq__", [](const PyTensor& a, const PyTensor& b) {
        return a.graph == b.graph && a.index == b.index;
      })
      .def("__hash__", [](const PyTensor& t) {
        return std::hash<const void*>()(t.graph.get()) ^ std::hash<int>()(t.index);
      })
      .def("__repr__", [](const PyTensor& t) {
        const TensorRecord& r = info(t);
        std::string dims;
        for (size_t i = 0; i < r.dim.size(); ++i) dims += (i ? ", " : "") + std::to_string(r.dim[i]);
        return "backend_tensor(name='" + r.name + "', uid=" +
               (r.uid_assigned ? std::to_string(r.uid) : std::string("None")) + ", dim=[" + dims +
               "], data_type=" + enum_value_name(EnumKind::kDataType, r.data_type) +
               ", virtual=" + (r.is_virtual ? "True" : "False") + ")";
      });
}

}  // namespace cudnn_backend::py_bindings
