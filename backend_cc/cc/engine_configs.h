// Engine configurations of a finalized operation graph: asking cuDNN's heuristics for them,
// reading back what each one is (engine id, knob choices, notes), building one from an
// explicit (engine id, knobs) pair, and finalizing an execution plan from one.
//
// Engines are discovered per graph through the heuristics; nothing here enumerates engine
// ids. Knob types are reported in cuDNN's own numbering (cudnnBackendKnobType_t).
#pragma once

#include <cudnn_graph.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backend_cc/cc/descriptor.h"

namespace cudnn_backend {

using KnobChoices = std::vector<std::pair<int64_t, int64_t>>;  // (knob type, value), by type

struct EngineConfigInfo {
  int64_t engine_id = -1;
  KnobChoices knobs;
  std::vector<int64_t> behavior_notes;   // frontend behavior_note values
  std::vector<int64_t> numerical_notes;  // frontend numerical_note values
};

// Finalized engine configs in the heuristic's ranking order (possibly empty).
std::vector<Descriptor> query_heuristics(const Descriptor& op_graph, cudnnBackendHeurMode_t mode);

EngineConfigInfo describe_engine_config(const Descriptor& engine_config);

// A finalized engine config for engine `engine_id` of `op_graph` with the given knobs.
// An engine id this graph has no engine for is a GraphNotSupported.
Descriptor make_engine_config(const Descriptor& op_graph, int64_t engine_id,
                              const KnobChoices& knobs);

// "eng3_k2=1_k13=0": the engine id followed by the knob choices, sorted by knob type.
std::string engine_config_name(const EngineConfigInfo& info);

Descriptor finalize_execution_plan(const Descriptor& engine_config, cudnnHandle_t handle,
                                   const std::string& context);

// Names of cudnnBackendKnobType_t members known to the build headers: {name, value}.
std::vector<std::pair<std::string, int64_t>> knob_type_names();

}  // namespace cudnn_backend
