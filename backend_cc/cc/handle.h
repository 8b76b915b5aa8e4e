// cuDNN handle management for Python: handles travel as integers (the pointer value), the
// same way the classic binding exposed them.
#pragma once

#include <cudnn_graph.h>

#include <cstdint>

namespace cudnn_backend {

cudnnHandle_t create_handle();             // needs a GPU and a loaded libcudnn
void destroy_handle(cudnnHandle_t handle);
void set_stream(cudnnHandle_t handle, cudaStream_t stream);
cudaStream_t get_stream(cudnnHandle_t handle);

inline cudnnHandle_t handle_from_int(uintptr_t value) {
  return reinterpret_cast<cudnnHandle_t>(value);
}
inline uintptr_t handle_to_int(cudnnHandle_t handle) {
  return reinterpret_cast<uintptr_t>(handle);
}

}  // namespace cudnn_backend
