// dlopen/dlsym of libcudnn (see cudnn_api.h).
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "backend_cc/cc/cudnn_api.h"
#include "backend_cc/cc/errors.h"

namespace cudnn_backend {

namespace {

struct LoaderState {
  std::mutex mutex;
  bool loaded = false;
  bool attempted = false;  // some load_cudnn() call already ran
  void* library = nullptr;
  CudnnApi table;
  std::string path;
  size_t version = 0;
  std::string reason = "libcudnn has not been loaded yet (nothing asked for it)";
};

LoaderState& state() {
  static LoaderState instance;
  return instance;
}

// Resolves every symbol of CUDNN_BACKEND_SYMBOLS from `library` into `table`. Returns the
// name of the first missing symbol, or an empty string.
std::string resolve_symbols(void* library, CudnnApi& table) {
#define CUDNN_BACKEND_RESOLVE(name)                                        \
  table.name = reinterpret_cast<decltype(&::name)>(dlsym(library, #name)); \
  if (table.name == nullptr) return #name;
  CUDNN_BACKEND_SYMBOLS(CUDNN_BACKEND_RESOLVE)
#undef CUDNN_BACKEND_RESOLVE
  return {};
}

// Tries one candidate; on success fills the state and returns an empty string, otherwise
// returns why this candidate was rejected.
std::string try_candidate(LoaderState& s, const std::string& candidate) {
  dlerror();
  void* library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* err = dlerror();
    const std::string text = err ? err : "dlopen failed";
    // dlerror() usually starts with the path already; do not say it twice.
    return text.rfind(candidate, 0) == 0 ? text : candidate + ": " + text;
  }
  CudnnApi table;
  const std::string missing = resolve_symbols(library, table);
  if (!missing.empty()) {
    dlclose(library);
    return candidate + ": missing symbol " + missing + " (not a cuDNN 9 library?)";
  }
  const size_t version = table.cudnnGetVersion();
  if (version / 10000 != 9) {
    dlclose(library);
    return candidate + ": cuDNN version " + std::to_string(version) +
           " is not supported (this extension speaks the cuDNN 9 backend API)";
  }
  s.library = library;
  s.table = table;
  s.path = candidate;
  s.version = version;
  s.loaded = true;
  s.reason.clear();
  return {};
}

}  // namespace

std::vector<std::string> symbol_names() {
  std::vector<std::string> names;
#define CUDNN_BACKEND_NAME(name) names.emplace_back(#name);
  CUDNN_BACKEND_SYMBOLS(CUDNN_BACKEND_NAME)
#undef CUDNN_BACKEND_NAME
  return names;
}

std::vector<std::string> default_candidates() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("CUDNN_LIBRARY_PATH"); env != nullptr && env[0] != '\0') {
    candidates.emplace_back(env);
  }
  candidates.emplace_back("libcudnn.so.9");
  return candidates;
}

bool load_cudnn(const std::vector<std::string>& candidates) {
  LoaderState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.loaded) return true;
  s.attempted = true;
  if (candidates.empty()) {
    s.reason = "no candidate path for libcudnn was given";
    return false;
  }
  std::string reasons;
  for (const auto& candidate : candidates) {
    const std::string why = try_candidate(s, candidate);
    if (why.empty()) return true;
    reasons += (reasons.empty() ? "" : "; ") + why;
  }
  s.reason = "no usable cuDNN 9 library found: " + reasons;
  return false;
}

bool ensure_loaded() {
  {
    LoaderState& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.loaded) return true;
    // Whoever asked first chose the candidates (the Python loader lists the wheel paths);
    // its answer and reason stand until an explicit load_cudnn() call tries again.
    if (s.attempted) return false;
  }
  return load_cudnn(default_candidates());
}

bool is_loaded() {
  LoaderState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.loaded;
}

std::string unavailable_reason() {
  LoaderState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.loaded ? std::string() : s.reason;
}

std::string loaded_path() {
  LoaderState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.path;
}

size_t loaded_version() {
  LoaderState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.version;
}

const CudnnApi& api() {
  LoaderState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.loaded) throw CudnnUnavailable("cuDNN is not available: " + s.reason);
  // The table never changes after a successful load, so handing out a reference is safe.
  return s.table;
}

}  // namespace cudnn_backend
