// cudnn._pybind_module: the pybind11 layer over the backend's C++ libraries.
//
// Placeholder bindings: the real ones expose the backend_graph builder that lowering fills.
// The module must import on machines without a GPU or libcudnn, so nothing here touches
// the cuDNN library at import time.
#include <pybind11/pybind11.h>

#include "backend_cc/cc/header_version.h"

namespace py = pybind11;

namespace {

// Stands in for the C++ graph builder that cudnn.backend lowers a pygraph into.
class BackendGraph {};

}  // namespace

PYBIND11_MODULE(_pybind_module, m) {
  m.doc() = "cuDNN backend bindings (placeholder)";
  m.def("version", &cudnn_backend::compiled_cudnn_version,
        "CUDNN_VERSION of the cuDNN headers this module was compiled against.");
  py::class_<BackendGraph>(m, "backend_graph").def(py::init<>());
}
