// Handle create/destroy/stream (see handle.h).
#include "backend_cc/cc/handle.h"

#include "backend_cc/cc/cudnn_api.h"
#include "backend_cc/cc/errors.h"

namespace cudnn_backend {

cudnnHandle_t create_handle() {
  cudnnHandle_t handle = nullptr;
  check_status(api().cudnnCreate(&handle), "cudnnCreate");
  return handle;
}

void destroy_handle(cudnnHandle_t handle) {
  if (handle == nullptr) throw ArgumentValueError("destroy_handle: the handle is null");
  check_status(api().cudnnDestroy(handle), "cudnnDestroy");
}

void set_stream(cudnnHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) throw ArgumentValueError("set_stream: the handle is null");
  check_status(api().cudnnSetStream(handle, stream), "cudnnSetStream");
}

cudaStream_t get_stream(cudnnHandle_t handle) {
  if (handle == nullptr) throw ArgumentValueError("get_stream: the handle is null");
  cudaStream_t stream = nullptr;
  check_status(api().cudnnGetStream(handle, &stream), "cudnnGetStream");
  return stream;
}

}  // namespace cudnn_backend
