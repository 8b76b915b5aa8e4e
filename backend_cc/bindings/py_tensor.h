// The Python class `backend_tensor`: a handle on one tensor of a backend graph, with the
// classic fluent getters/setters (setters return the same Python object).
#pragma once

#include <pybind11/pybind11.h>

#include <memory>

#include "backend_cc/bindings/py_args.h"
#include "backend_cc/cc/backend_graph.h"

namespace cudnn_backend::py_bindings {

using GraphPtr = std::shared_ptr<BackendGraph>;

// The tensor handle of `index` in `graph`, or None for index -1 (an absent output).
py::object wrap_tensor(const GraphPtr& graph, int index);

void register_tensor(py::module_& m);

}  // namespace cudnn_backend::py_bindings
