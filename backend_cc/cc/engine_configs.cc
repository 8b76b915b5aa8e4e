// Heuristics, engine-config introspection and plan finalization (see engine_configs.h).
#include "backend_cc/cc/engine_configs.h"

#include <algorithm>

#include "backend_cc/cc/enums.h"
#include "backend_cc/cc/errors.h"

namespace cudnn_backend {

namespace {

std::vector<int64_t> to_frontend_notes(const std::vector<int>& cudnn_notes, EnumKind kind) {
  std::vector<int64_t> out;
  for (int note : cudnn_notes) {
    // Notes newer than our table are dropped: no frontend value exists to report them as.
    if (const EnumEntry* entry = find_cudnn(kind, note)) out.push_back(entry->frontend);
  }
  return out;
}

}  // namespace

std::vector<Descriptor> query_heuristics(const Descriptor& op_graph, cudnnBackendHeurMode_t mode) {
  Descriptor heur = BACKEND_DESCRIPTOR(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur.set_context("heuristics mode " + std::to_string(static_cast<int>(mode)));
  heur.set_desc(ATTR(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH), op_graph);
  heur.set_enum(ATTR(CUDNN_ATTR_ENGINEHEUR_MODE), CUDNN_TYPE_HEUR_MODE, static_cast<int>(mode));
  heur.finalize();

  const int64_t available =
      heur.get_count(ATTR(CUDNN_ATTR_ENGINEHEUR_RESULTS), CUDNN_TYPE_BACKEND_DESCRIPTOR);
  std::vector<Descriptor> configs;
  configs.reserve(static_cast<size_t>(available));
  for (int64_t i = 0; i < available; ++i) {
    configs.push_back(BACKEND_DESCRIPTOR(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
  }
  const int64_t filled = heur.get_descs(ATTR(CUDNN_ATTR_ENGINEHEUR_RESULTS), configs);
  const auto keep = static_cast<size_t>(std::max<int64_t>(0, std::min(filled, available)));
  configs.erase(configs.begin() + static_cast<std::ptrdiff_t>(keep), configs.end());
  return configs;
}

EngineConfigInfo describe_engine_config(const Descriptor& engine_config) {
  EngineConfigInfo info;
  std::vector<Descriptor> engine;
  engine.push_back(BACKEND_DESCRIPTOR(CUDNN_BACKEND_ENGINE_DESCRIPTOR));
  engine_config.get_descs(ATTR(CUDNN_ATTR_ENGINECFG_ENGINE), engine);
  info.engine_id = engine[0].get_int64(ATTR(CUDNN_ATTR_ENGINE_GLOBAL_INDEX));
  info.behavior_notes = to_frontend_notes(
      engine[0].get_enums(ATTR(CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE), CUDNN_TYPE_BEHAVIOR_NOTE,
                          CUDNN_BEHAVIOR_NOTE_TYPE_COUNT),
      EnumKind::kBehaviorNote);
  info.numerical_notes = to_frontend_notes(
      engine[0].get_enums(ATTR(CUDNN_ATTR_ENGINE_NUMERICAL_NOTE), CUDNN_TYPE_NUMERICAL_NOTE,
                          CUDNN_NUMERICAL_NOTE_TYPE_COUNT),
      EnumKind::kNumericalNote);

  std::vector<Descriptor> choices;
  for (int i = 0; i < CUDNN_KNOB_TYPE_COUNTS; ++i) {
    choices.push_back(BACKEND_DESCRIPTOR(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR));
  }
  const int64_t count = engine_config.get_descs(ATTR(CUDNN_ATTR_ENGINECFG_KNOB_CHOICES), choices);
  for (int64_t i = 0; i < std::min<int64_t>(count, CUDNN_KNOB_TYPE_COUNTS); ++i) {
    const std::vector<int> type =
        choices[i].get_enums(ATTR(CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE), CUDNN_TYPE_KNOB_TYPE, 1);
    const int64_t value = choices[i].get_int64(ATTR(CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE));
    if (!type.empty()) info.knobs.emplace_back(type[0], value);
  }
  std::sort(info.knobs.begin(), info.knobs.end());
  return info;
}

Descriptor make_engine_config(const Descriptor& op_graph, int64_t engine_id,
                              const KnobChoices& knobs) {
  const std::string context = "engine " + std::to_string(engine_id);
  Descriptor engine = BACKEND_DESCRIPTOR(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  engine.set_context(context);
  engine.set_desc(ATTR(CUDNN_ATTR_ENGINE_OPERATION_GRAPH), op_graph);
  engine.set_int64(ATTR(CUDNN_ATTR_ENGINE_GLOBAL_INDEX), engine_id);
  engine.finalize();

  std::vector<Descriptor> choices;
  for (const auto& [type, value] : knobs) {
    Descriptor choice = BACKEND_DESCRIPTOR(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
    choice.set_context(context + " knob " + std::to_string(type));
    choice.set_enum(ATTR(CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE), CUDNN_TYPE_KNOB_TYPE,
                    static_cast<int>(type));
    choice.set_int64(ATTR(CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE), value);
    choice.finalize();
    choices.push_back(std::move(choice));
  }

  Descriptor config = BACKEND_DESCRIPTOR(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  config.set_context(context);
  config.set_desc(ATTR(CUDNN_ATTR_ENGINECFG_ENGINE), engine);
  if (!choices.empty()) {
    std::vector<const Descriptor*> raw;
    for (const Descriptor& c : choices) raw.push_back(&c);
    config.set_descs(ATTR(CUDNN_ATTR_ENGINECFG_KNOB_CHOICES), raw);
  }
  config.finalize();
  return config;
}

std::string engine_config_name(const EngineConfigInfo& info) {
  std::string name = "eng" + std::to_string(info.engine_id);
  for (const auto& [type, value] : info.knobs) {
    name += "_k" + std::to_string(type) + "=" + std::to_string(value);
  }
  return name;
}

Descriptor finalize_execution_plan(const Descriptor& engine_config, cudnnHandle_t handle,
                                   const std::string& context) {
  Descriptor plan = BACKEND_DESCRIPTOR(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  plan.set_context(context);
  plan.set_handle(ATTR(CUDNN_ATTR_EXECUTION_PLAN_HANDLE), handle);
  plan.set_desc(ATTR(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG), engine_config);
  plan.finalize();
  return plan;
}

std::vector<std::pair<std::string, int64_t>> knob_type_names() {
  std::vector<std::pair<std::string, int64_t>> names = {
#define KNOB(x) {#x, static_cast<int64_t>(CUDNN_KNOB_TYPE_##x)}
      KNOB(SPLIT_K), KNOB(SWIZZLE), KNOB(TILE_SIZE), KNOB(USE_TEX), KNOB(EDGE), KNOB(KBLOCK),
      KNOB(LDGA), KNOB(LDGB), KNOB(CHUNK_K), KNOB(SPLIT_H), KNOB(WINO_TILE), KNOB(MULTIPLY),
      KNOB(SPLIT_K_BUF), KNOB(TILEK), KNOB(STAGES), KNOB(REDUCTION_MODE), KNOB(CTA_SPLIT_K_MODE),
      KNOB(SPLIT_K_SLC), KNOB(IDX_MODE), KNOB(SLICED), KNOB(SPLIT_RS), KNOB(SINGLEBUFFER),
      KNOB(LDGC), KNOB(SPECFILT), KNOB(KERNEL_CFG), KNOB(WORKSPACE), KNOB(TILE_CGA),
      KNOB(TILE_CGA_M), KNOB(TILE_CGA_N), KNOB(BLOCK_SIZE), KNOB(OCCUPANCY),
      KNOB(ARRAY_SIZE_PER_THREAD), KNOB(NUM_C_PER_BLOCK), KNOB(SPLIT_COLS), KNOB(TILE_ROWS),
      KNOB(TILE_COLS), KNOB(LOAD_SIZE),
#if CUDNN_VERSION >= 90700
      KNOB(CTA_COUNT), KNOB(STREAM_K), KNOB(SPLIT_P_SLC), KNOB(TILE_M), KNOB(TILE_N),
      KNOB(WARP_SPEC_CFG),
#endif
#if CUDNN_VERSION >= 91800
      KNOB(SWAP_AB),
#endif
#if CUDNN_VERSION >= 92200
      KNOB(INPUT_TMA_ENABLE), KNOB(OUTPUT_TMA_ENABLE),
#endif
#undef KNOB
  };
  return names;
}

}  // namespace cudnn_backend
