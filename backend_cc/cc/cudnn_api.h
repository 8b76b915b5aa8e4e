// The cuDNN entry points this extension calls, resolved from libcudnn at run time.
//
// The extension never links against libcudnn: it compiles against the cuDNN headers only and
// dlopen()s the library the first time it is needed, so it builds and imports on machines
// with no cuDNN and no GPU. Every symbol is resolved with dlsym into one table (CudnnApi);
// code that talks to cuDNN goes through `api()`, which throws CudnnUnavailable when no
// library could be loaded.
#pragma once

#include <cudnn_graph.h>

#include <cstddef>
#include <string>
#include <vector>

namespace cudnn_backend {

// X-macro list of every symbol we resolve. Adding a call to cuDNN means adding it here.
#define CUDNN_BACKEND_SYMBOLS(X)    \
  X(cudnnGetVersion)                \
  X(cudnnGetErrorString)            \
  X(cudnnGetLastErrorString)        \
  X(cudnnCreate)                    \
  X(cudnnDestroy)                   \
  X(cudnnSetStream)                 \
  X(cudnnGetStream)                 \
  X(cudnnBackendCreateDescriptor)   \
  X(cudnnBackendDestroyDescriptor)  \
  X(cudnnBackendFinalize)           \
  X(cudnnBackendSetAttribute)       \
  X(cudnnBackendGetAttribute)       \
  X(cudnnBackendExecute)

struct CudnnApi {
#define CUDNN_BACKEND_DECLARE_FIELD(name) decltype(&::name) name = nullptr;
  CUDNN_BACKEND_SYMBOLS(CUDNN_BACKEND_DECLARE_FIELD)
#undef CUDNN_BACKEND_DECLARE_FIELD
};

// Names of the symbols in CUDNN_BACKEND_SYMBOLS, in order (for reports and tests).
std::vector<std::string> symbol_names();

// Tries each candidate path (or bare soname) in order; the first library that opens, exports
// every symbol and reports cuDNN major version 9 wins. Once a library is loaded, later calls
// return true without reloading. Returns false and records why when none qualifies.
bool load_cudnn(const std::vector<std::string>& candidates);

// Candidates tried when nobody supplied any: $CUDNN_LIBRARY_PATH (if set), then the system
// soname "libcudnn.so.9". The Python loader prepends the pip wheel locations.
std::vector<std::string> default_candidates();

// Loads with default_candidates() unless a load was already attempted (with any candidates).
bool ensure_loaded();

bool is_loaded();
std::string unavailable_reason();  // empty when loaded
std::string loaded_path();         // empty when not loaded
size_t loaded_version();           // cudnnGetVersion() of the loaded library, 0 when not loaded

// The resolved table; throws CudnnUnavailable (a RuntimeError) when nothing is loaded.
const CudnnApi& api();

}  // namespace cudnn_backend
