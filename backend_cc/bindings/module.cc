// cudnn._pybind_module: the thin pybind11 layer over backend_cc/cc.
//
// It registers the classes `backend_graph` and `backend_tensor`, one `backend_graph` method
// per row of the op table (op_schema.h; method and keyword names equal the IR's port and
// attribute names), the loader/handle functions, and the exception mapping of errors.h.
// Python code reaches this module only through cudnn.backend.loader.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "backend_cc/cc/backend_graph.h"
#include "backend_cc/cc/cudnn_api.h"
#include "backend_cc/cc/device_props.h"
#include "backend_cc/cc/engine_configs.h"
#include "backend_cc/cc/errors.h"
#include "backend_cc/cc/handle.h"
#include "backend_cc/cc/op_schema.h"
#include "backend_cc/bindings/py_args.h"
#include "backend_cc/bindings/py_tensor.h"
#include "backend_cc/bindings/py_views.h"

namespace py = pybind11;
using namespace cudnn_backend;
using cudnn_backend::py_bindings::ArgParser;
using cudnn_backend::py_bindings::PyTensor;

namespace {

// Bumped whenever the Python-visible surface changes; loader.py refuses a stale build.
constexpr int kBindingApiVersion = 3;

// Exception classes. They are created once and intentionally never released (module state
// that must outlive any graph the interpreter tears down at exit).
PyObject* g_not_supported = nullptr;
PyObject* g_backend_error = nullptr;
PyObject* g_unavailable = nullptr;

void translate(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const GraphNotSupported& e) {
    PyErr_SetString(g_not_supported, e.what());
  } catch (const CudnnUnavailable& e) {
    PyErr_SetString(g_unavailable, e.what());
  } catch (const BackendError& e) {
    PyErr_SetString(g_backend_error, e.what());
  } catch (const StateError& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (const ArgumentTypeError& e) {
    PyErr_SetString(PyExc_TypeError, e.what());
  } catch (const ArgumentValueError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  }
}

using py_bindings::GraphPtr;

py::object wrap(const GraphPtr& g, int index) { return py_bindings::wrap_tensor(g, index); }

std::vector<std::pair<int64_t, uintptr_t>> variant_pack(py::handle pack) {
  if (!py::isinstance<py::dict>(pack)) {
    throw ArgumentTypeError("execute(): variant_pack must be a dict {uid: device pointer}");
  }
  std::vector<std::pair<int64_t, uintptr_t>> out;
  for (const auto& item : pack.cast<py::dict>()) {
    const int64_t uid = py_bindings::as_int(item.first, "execute(): a variant_pack key");
    out.emplace_back(uid, py_bindings::as_pointer(
                              item.second, "execute(): the pointer for uid " + std::to_string(uid)));
  }
  return out;
}

void run_execute(BackendGraph& g, int index, py::handle pack, py::handle workspace,
                 py::handle handle) {
  PreparedExecution prepared =
      g.prepare_execute(index, variant_pack(pack),
                        py_bindings::as_pointer(workspace, "execute(): workspace"),
                        py_bindings::as_pointer(handle, "execute(): handle"));
  py::gil_scoped_release release;
  BackendGraph::run(prepared);
}

// Constructors take keywords only: every uid and data type is named at the call site.
void keywords_only(const char* method, const py::args& args) {
  if (args.size() != 0) {
    throw ArgumentTypeError(std::string(method) + "() takes keyword arguments only (" +
                            std::to_string(args.size()) + " positional given)");
  }
}

GraphPtr make_graph(const py::args& args, const py::kwargs& kwargs) {
  keywords_only("backend_graph", args);
  ArgParser a("backend_graph", {"io_data_type", "intermediate_data_type", "compute_data_type",
                                "handle", "name"}, {}, args, kwargs);
  GraphContext ctx;
  ctx.io_data_type = py_bindings::as_data_type(a.get("io_data_type"), a.what("io_data_type"));
  ctx.intermediate_data_type = py_bindings::as_data_type(a.get("intermediate_data_type"),
                                                         a.what("intermediate_data_type"));
  ctx.compute_data_type =
      py_bindings::as_data_type(a.get("compute_data_type"), a.what("compute_data_type"));
  ctx.name = a.given("name") ? a.get("name").cast<std::string>() : "backend_graph";
  return std::make_shared<BackendGraph>(ctx, py_bindings::as_pointer(a.get("handle"), a.what("handle")));
}

py::object make_tensor(const GraphPtr& g, const py::args& args, const py::kwargs& kwargs) {
  keywords_only("backend_graph.tensor", args);
  ArgParser a("backend_graph.tensor",
              {"uid", "dim", "stride", "data_type", "is_virtual", "is_pass_by_value", "value",
               "ragged_offset", "reordering_type", "name"},
              {"uid", "dim"}, args, kwargs);
  TensorSpec s;
  s.uid = py_bindings::as_int(a.get("uid"), a.what("uid"));
  s.dim = py_bindings::as_int_list(a.get("dim"), a.what("dim"));
  if (a.given("stride")) s.stride = py_bindings::as_int_list(a.get("stride"), a.what("stride"));
  s.data_type = py_bindings::as_data_type(a.get("data_type"), a.what("data_type"));
  if (a.given("is_virtual")) s.is_virtual = py_bindings::as_bool(a.get("is_virtual"), a.what("is_virtual"));
  if (a.given("is_pass_by_value")) {
    s.is_pass_by_value = py_bindings::as_bool(a.get("is_pass_by_value"), a.what("is_pass_by_value"));
  }
  if (a.given("value")) s.scalar_value = py_bindings::as_float(a.get("value"), a.what("value"));
  if (a.given("ragged_offset")) {
    s.ragged_offset = py_bindings::as_tensor(a.get("ragged_offset"), g.get(), a.what("ragged_offset"));
  }
  if (a.given("reordering_type")) {
    s.reordering = py_bindings::as_enum(a.get("reordering_type"), EnumKind::kTensorReordering,
                                        a.what("reordering_type"));
  }
  if (a.given("name")) s.name = a.get("name").cast<std::string>();
  return wrap(g, g->record().add_tensor(std::move(s)));
}

py::object make_scalar(const GraphPtr& g, const py::args& args, const py::kwargs& kwargs) {
  keywords_only("backend_graph.tensor_scalar", args);
  ArgParser a("backend_graph.tensor_scalar", {"uid", "value", "data_type", "name"},
              {"uid", "value"}, args, kwargs);
  TensorSpec s;
  s.uid = py_bindings::as_int(a.get("uid"), a.what("uid"));
  const py::object value = a.get("value");
  s.scalar_value = py_bindings::as_float(value, a.what("value"));
  s.data_type = py_bindings::as_data_type(a.get("data_type"), a.what("data_type"));
  if (s.data_type == 0) {
    s.data_type = PyFloat_Check(value.ptr()) ? data_type::kFloat : data_type::kInt64;
  }
  s.dim = {1, 1, 1, 1};
  s.is_pass_by_value = true;
  if (a.given("name")) s.name = a.get("name").cast<std::string>();
  return wrap(g, g->record().add_tensor(std::move(s)));
}

void register_op_methods(py::class_<BackendGraph, GraphPtr>& cls) {
  for (const OpSchema& schema : op_schemas()) {
    const OpSchema* row = &schema;
    cls.def(
        schema.method,
        [row](const GraphPtr& g, const py::args& args, const py::kwargs& kwargs) -> py::object {
          OpCall call = py_bindings::parse_op_call(*row, g.get(), args, kwargs);
          const std::vector<int> outs = g->add_op(*row, std::move(call));
          if (outs.size() == 1) return wrap(g, outs[0]);
          py::list result;
          for (int t : outs) result.append(wrap(g, t));
          return result;
        },
        (op_signature(schema) + "\n\nRecords one " + op_kind_name(schema.kind) +
         " op; tensors are backend_tensor objects of this graph. Outputs come back "
         "without uids: push each one with set_uid().")
            .c_str());
  }
}

void register_graph(py::module_& m) {
  py::class_<BackendGraph, GraphPtr> cls(m, "backend_graph");
  cls.def(py::init(&make_graph),
          "backend_graph(io_data_type=None, intermediate_data_type=None, "
          "compute_data_type=None, handle=None, name='backend_graph')")
      .def("tensor", &make_tensor,
           "tensor(*, uid, dim, stride=None, data_type=None, is_virtual=False, "
           "is_pass_by_value=False, value=None, ragged_offset=None, reordering_type=None, "
           "name=''): a graph tensor with the uid Python assigned.")
      .def("tensor_scalar", &make_scalar,
           "tensor_scalar(*, uid, value, data_type=None, name=''): a [1,1,1,1] pass-by-value "
           "tensor whose value is embedded and supplied at execute.")
      .def("validate", &BackendGraph::validate)
      .def("finalize_op_descriptors", &BackendGraph::finalize_op_descriptors,
           "Builds and finalizes every tensor/op descriptor (cuDNN checks each op; needs "
           "libcudnn but no GPU) and freezes the graph.")
      .def("build_operation_graph", &BackendGraph::build_operation_graph)
      .def("is_validated", [](const BackendGraph& g) { return g.record().validated(); })
      .def("is_operation_graph_built", &BackendGraph::operation_graph_built)
      .def("get_name", [](const BackendGraph& g) { return g.record().context().name; })
      .def("get_handle", &BackendGraph::handle)
      .def("tensors", [](const GraphPtr& g) {
        py::list out;
        for (size_t i = 0; i < g->record().tensors().size(); ++i) out.append(wrap(g, static_cast<int>(i)));
        return out;
      })
      .def("tensor_uids", [](const BackendGraph& g) {
        py::dict out;  // uid -> name, for every tensor an op touches
        for (int t : g.record().used_tensors()) {
          const TensorRecord& r = g.record().tensor(t);
          if (r.uid_assigned) out[py::int_(r.uid)] = r.name;
        }
        return out;
      })
      .def("query_tensor_attributes_of_uid", [](const GraphPtr& g, int64_t uid) {
        const int t = g->record().find_uid(uid);
        if (t < 0) throw ArgumentValueError("no tensor of this graph has uid " + std::to_string(uid));
        return wrap(g, t);
      })
      .def("ops", [](const GraphPtr& g) {
        py::list out;
        for (const OpRecord& op : g->record().ops()) out.append(py_bindings::op_dict(g, op));
        return out;
      }, "The recorded ops: name, method, kind, inputs/outputs {port: tensor}, attrs, internals.")
      .def("op_internals", [](const GraphPtr& g, int index) {
        const auto& ops = g->record().ops();
        const int n = static_cast<int>(ops.size());
        if (index < -n || index >= n) {
          throw std::out_of_range("op_internals(): op index " + std::to_string(index) +
                                  " is out of range (" + std::to_string(n) + " ops)");
        }
        py::list out;
        for (const auto& binding : ops[index < 0 ? index + n : index].internals) {
          out.append(wrap(g, binding.second));
        }
        return out;
      }, py::arg("index") = -1,
         "Internal tensors of a composite op (default: the last op recorded), born without "
         "uids like op outputs: push each one with set_uid().")
      .def("create_execution_plans", [](BackendGraph& g, py::handle modes) {
        std::vector<int64_t> values;
        if (!py::isinstance<py::sequence>(modes)) {
          throw ArgumentTypeError("create_execution_plans(): heur_modes must be a list of heur_mode");
        }
        for (py::handle m : modes) {
          values.push_back(py_bindings::as_enum(m, EnumKind::kHeurMode, "create_execution_plans(): heur_mode"));
        }
        return g.create_execution_plans(values);
      }, "Appends the engine configs each heur_mode proposes; returns their plan indices.")
      .def("create_execution_plan", [](BackendGraph& g, py::handle engine_id, py::handle knobs) {
        KnobChoices choices;
        if (!knobs.is_none()) {
          if (!py::isinstance<py::dict>(knobs)) {
            throw ArgumentTypeError("create_execution_plan(): knobs must be a dict {knob_type: value}");
          }
          for (const auto& item : knobs.cast<py::dict>()) {
            // Plain ints in cudnnBackendKnobType_t numbering (backend_knob_types()); an enum
            // of another numbering would silently pick the wrong knob, so none is accepted.
            choices.emplace_back(py_bindings::as_int(item.first, "create_execution_plan(): knob type"),
                                 py_bindings::as_int(item.second, "create_execution_plan(): knob value"));
          }
        }
        return g.create_execution_plan(py_bindings::as_int(engine_id, "create_execution_plan(): engine_id"), choices);
      }, py::arg("engine_id"), py::arg("knobs") = py::none())
      .def("get_execution_plan_count", &BackendGraph::plan_count)
      .def("get_plan_info_at_index", &py_bindings::plan_dict)
      .def("get_engine_and_knobs_at_index", [](const BackendGraph& g, int i) {
        const PlanInfo& p = g.plan_info(i);
        py::dict knobs;
        for (const auto& [type, value] : p.knobs) knobs[py::int_(type)] = value;
        return py::make_tuple(p.engine_id, knobs);
      })
      .def("get_plan_name_at_index", [](const BackendGraph& g, int i) { return g.plan_info(i).name; })
      .def("get_behavior_notes_for_plan_at_index", [](const BackendGraph& g, int i) { return g.plan_info(i).behavior_notes; })
      .def("get_numerical_notes_for_plan_at_index", [](const BackendGraph& g, int i) { return g.plan_info(i).numerical_notes; })
      .def("build_plan_at_index", [](BackendGraph& g, int i) {
        g.build_plan_at_index(i);
        g.select(i);  // a plan built on request becomes the one execute() runs
      }, "Finalizes plan i and selects it; a cuDNN NOT_SUPPORTED answer is a decline.")
      .def("check_support_at_index", &BackendGraph::build_plan_at_index,
           "Finalizes plan i; a cuDNN NOT_SUPPORTED answer raises cudnnGraphNotSupportedError.")
      .def("build_plans", &BackendGraph::build_plans, py::arg("build_all") = false)
      .def("check_support", [](BackendGraph& g) { return g.build_plans(false); })
      .def("select_plan", &BackendGraph::select)
      .def("get_selected_plan_index", &BackendGraph::selected_index)
      .def("get_workspace_size_plan_at_index", &BackendGraph::workspace_size_at_index)
      .def("workspace_tensors", [](BackendGraph& g) {
        py::list out;
        for (const WorkspaceSlot& s : g.workspace_layout().slots) {
          py::dict d;
          d["uid"] = s.uid;
          d["offset"] = s.offset;
          d["bytes"] = s.bytes;
          out.append(d);
        }
        return out;
      }, "Workspace-resident tensors and where execute puts them: [{uid, offset, bytes}], "
         "at the front of every plan's workspace (validates the graph first).")
      .def("workspace_tensor_bytes", [](BackendGraph& g) { return g.workspace_layout().bytes; },
           "Bytes of the workspace the workspace-resident tensors take before cuDNN's part.")
      .def("get_workspace_size", [](BackendGraph& g) {
        if (g.selected_index() < 0) throw StateError("get_workspace_size(): no plan is built yet");
        return g.workspace_size_at_index(g.selected_index());
      })
      .def("execute_plan_at_index", [](BackendGraph& g, py::handle pack, py::handle workspace, int index, py::handle handle) {
        run_execute(g, index, pack, workspace, handle);
      }, py::arg("variant_pack"), py::arg("workspace"), py::arg("index"), py::arg("handle") = py::none())
      .def("execute", [](BackendGraph& g, py::handle pack, py::handle workspace, py::handle handle) {
        if (g.selected_index() < 0) throw StateError("execute(): no plan is built yet; call build_plans()");
        run_execute(g, g.selected_index(), pack, workspace, handle);
      }, py::arg("variant_pack"), py::arg("workspace"), py::arg("handle") = py::none())
      .def("serialize", [](BackendGraph& g, py::handle index) {
        const int i = index.is_none() ? g.selected_index()
                                      : static_cast<int>(py_bindings::as_int(index, "serialize(): index"));
        if (i < 0) throw StateError("serialize(): no plan is built yet");
        return py::bytes(g.serialize(i));
      }, py::arg("index") = py::none())
      .def("deserialize", [](BackendGraph& g, py::handle data) {
        if (!py::isinstance<py::bytes>(data) && !py::isinstance<py::str>(data)) {
          throw ArgumentTypeError("deserialize(): data must be bytes (from serialize())");
        }
        return g.deserialize(data.cast<std::string>());
      })
      .def("__repr__", [](const BackendGraph& g) {
        return "backend_graph(name='" + g.record().context().name + "', ops=" +
               std::to_string(g.record().ops().size()) + ", tensors=" +
               std::to_string(g.record().tensors().size()) + ", plans=" +
               std::to_string(g.plan_count()) + ")";
      });
  register_op_methods(cls);
}

void register_functions(py::module_& m) {
  m.def("is_available", []() { return ensure_loaded(); },
        "True when a cuDNN 9 library was loaded (tries the default candidates once).");
  m.def("unavailable_reason", []() { ensure_loaded(); return unavailable_reason(); },
        "Why cuDNN is not available ('' when it is).");
  m.def("cudnn_version", []() -> py::object {
    if (!ensure_loaded()) return py::none();
    return py::int_(loaded_version());
  }, "cudnnGetVersion() of the loaded library, or None.");
  m.def("version", []() { return CUDNN_VERSION; },
        "CUDNN_VERSION of the cuDNN headers this extension was compiled against "
        "(cudnn_version() is the loaded library's).");
  m.def("load_cudnn", [](const std::vector<std::string>& candidates) { return load_cudnn(candidates); },
        "Tries each path in order; the first usable cuDNN 9 library wins. True when loaded.");
  m.def("default_library_candidates", &default_candidates);
  m.def("library_path", &loaded_path);
  m.def("dlsym_symbols", &symbol_names, "Every cuDNN symbol this extension resolves with dlsym.");
  m.def("create_handle", []() { return handle_to_int(create_handle()); });
  m.def("destroy_handle", [](uintptr_t h) { destroy_handle(handle_from_int(h)); });
  m.def("set_stream", [](uintptr_t h, uintptr_t stream) {
    set_stream(handle_from_int(h), reinterpret_cast<cudaStream_t>(stream));
  }, py::arg("handle"), py::arg("stream"));
  m.def("device_properties_json", [](uintptr_t h) {
    return device_properties_json(handle_from_int(h));
  }, py::arg("handle"),
        "cuDNN's JSON description of the handle's GPU (CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, "
        "cuDNN 9.8+; needs a GPU): e.g. \"deviceVer\": 900 on sm_90.");
  m.def("get_stream", [](uintptr_t h) { return reinterpret_cast<uintptr_t>(get_stream(handle_from_int(h))); });
  m.def("op_schemas", []() {
    py::list out;
    for (const OpSchema& s : op_schemas()) out.append(py_bindings::schema_dict(s));
    return out;
  }, "The op table: one dict per backend_graph op method.");
  m.def("backend_knob_types", []() {
    py::dict out;
    for (const auto& [name, value] : knob_type_names()) out[py::str(name)] = value;
    return out;
  }, "cudnnBackendKnobType_t names and values (the numbering plan knobs are reported in).");
  m.def("set_graph_not_supported_error", [](py::object cls) {
    if (!PyType_Check(cls.ptr()) || !PyObject_IsSubclass(cls.ptr(), PyExc_Exception)) {
      throw ArgumentTypeError("set_graph_not_supported_error(): expected an Exception subclass");
    }
    Py_INCREF(cls.ptr());
    g_not_supported = cls.ptr();
  }, "Makes declines raise `cls` (the IR's cudnn.cudnnGraphNotSupportedError).");
  m.def("graph_not_supported_error", []() { return py::reinterpret_borrow<py::object>(g_not_supported); });
}

}  // namespace

PYBIND11_MODULE(_pybind_module, m) {
  m.doc() = "cuDNN backend graph builder (backend_cc); libcudnn is loaded at run time.";
  m.attr("BINDING_API_VERSION") = kBindingApiVersion;
  g_not_supported = PyErr_NewExceptionWithDoc(
      "cudnn._pybind_module.cudnnGraphNotSupportedError",
      "The cuDNN backend cannot run this graph (a decline, not a failure).", PyExc_Exception, nullptr);
  g_backend_error = PyErr_NewExceptionWithDoc(
      "cudnn._pybind_module.CudnnBackendError", "A cuDNN call failed.", PyExc_RuntimeError, nullptr);
  g_unavailable = PyErr_NewExceptionWithDoc(
      "cudnn._pybind_module.CudnnUnavailableError", "No usable libcudnn could be loaded.",
      g_backend_error, nullptr);
  m.attr("cudnnGraphNotSupportedError") = py::reinterpret_borrow<py::object>(g_not_supported);
  m.attr("CudnnBackendError") = py::reinterpret_borrow<py::object>(g_backend_error);
  m.attr("CudnnUnavailableError") = py::reinterpret_borrow<py::object>(g_unavailable);
  py::register_exception_translator(&translate);

  py_bindings::register_tensor(m);
  register_graph(m);
  register_functions(m);
}
