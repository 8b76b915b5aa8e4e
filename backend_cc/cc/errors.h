// Exception types of the backend and the one place cuDNN status codes become exceptions.
//
// The pybind layer maps each type to a Python exception:
//   GraphNotSupported -> cudnn.cudnnGraphNotSupportedError (a decline: the router moves on)
//   BackendError      -> RuntimeError (a real failure: CUDA, bad handle, internal error)
//   CudnnUnavailable  -> RuntimeError (no libcudnn could be loaded)
//   ArgumentTypeError -> TypeError, ArgumentValueError -> ValueError
//   StateError        -> RuntimeError (call order: frozen graph, plan index not built, ...)
#pragma once

#include <cudnn_graph.h>

#include <stdexcept>
#include <string>

namespace cudnn_backend {

class BackendError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CudnnUnavailable : public BackendError {
 public:
  using BackendError::BackendError;
};

class GraphNotSupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class StateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ArgumentTypeError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

class ArgumentValueError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// "CUDNN_STATUS_BAD_PARAM" etc.; unknown codes render as "cudnnStatus_t(<n>)".
// Appended where cuDNN rejected engines without saying why in the error text (its support
// checks drop configs silently; the reasons only reach its debug log).
inline constexpr const char* kCudnnLogHint =
    "cuDNN logs its reason for every engine config it rejects when the process runs with "
    "CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=stderr";

std::string status_name(cudnnStatus_t status);

// True for the NOT_SUPPORTED category (3xxx): the graph, shape, layout or type is outside
// what this cuDNN can run. Those are declines; everything else is a failure.
bool is_not_supported(cudnnStatus_t status);

// Throws when status != SUCCESS. `call` names the API call and the descriptor/attribute
// involved, e.g. "cudnnBackendFinalize(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR) for op
// 'matmul.0'". The message also carries cuDNN's own last-error text when it has one.
void check_status(cudnnStatus_t status, const std::string& call);

}  // namespace cudnn_backend
