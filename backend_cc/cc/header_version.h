// What the cuDNN headers said when this library was compiled.
//
// Placeholder for the backend's C++ libraries (lowering, descriptors, dlopen of libcudnn):
// it proves that cudnn_graph.h and the CUDA runtime headers it includes resolve through
// @cudnn_headers / @cuda_runtime_headers (tools/bzl/python_headers.bzl).
#pragma once

namespace cudnn_backend {

// CUDNN_VERSION of the headers used at build time: major * 10000 + minor * 100 + patch.
int compiled_cudnn_version();

}  // namespace cudnn_backend
