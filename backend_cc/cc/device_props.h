// What cuDNN knows about the GPU behind a handle, as cuDNN's own JSON device description
// (CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, cuDNN 9.8+). The lowering reads the compute
// capability from it to pick between lowerings that only some architectures run (the native
// SDPA_BWD descriptor vs the composite fused-attention graph).
#pragma once

#include <cudnn_graph.h>

#include <string>

namespace cudnn_backend {

// The device's properties as cuDNN serializes them (keys such as "deviceVer": 900 for
// sm_90). Needs a loaded cuDNN >= 9.8 and a handle on a live GPU; raises GraphNotSupported
// when the loaded library (or the headers built against) predates the descriptor,
// BackendError when cuDNN refuses.
std::string device_properties_json(cudnnHandle_t handle);

}  // namespace cudnn_backend
