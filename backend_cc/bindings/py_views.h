// Read-only Python views (dicts) of the recorded ops, the plan entries and the op table.
#pragma once

#include <pybind11/pybind11.h>

#include "backend_cc/bindings/py_tensor.h"
#include "backend_cc/cc/backend_graph.h"
#include "backend_cc/cc/op_schema.h"

namespace cudnn_backend::py_bindings {

// {name, method, kind, inputs: {port: tensor}, outputs: {port: tensor or None}, attrs,
//  compute_data_type}
py::dict op_dict(const GraphPtr& graph, const OpRecord& op);
// {index, engine_id, knobs, name, heur_mode, behavior_notes, numerical_notes, deserialized,
//  built, failure}
py::dict plan_dict(const BackendGraph& graph, int index);
// {method, kind, inputs, outputs, attrs, takes_compute_data_type, min_version,
//  min_runtime_version, signature}
py::dict schema_dict(const OpSchema& schema);

}  // namespace cudnn_backend::py_bindings
