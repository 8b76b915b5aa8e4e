#include "backend_cc/cc/header_version.h"

#include <cudnn_graph.h>

// The backend is written against the cuDNN 9 backend descriptor API.
static_assert(CUDNN_MAJOR == 9, "backend_cc needs the cuDNN 9 headers");

namespace cudnn_backend {

int compiled_cudnn_version() { return CUDNN_VERSION; }

}  // namespace cudnn_backend
