// Device properties through cuDNN (see device_props.h).
#include "backend_cc/cc/device_props.h"

#include "backend_cc/cc/cudnn_api.h"
#include "backend_cc/cc/descriptor.h"
#include "backend_cc/cc/errors.h"

namespace cudnn_backend {

std::string device_properties_json(cudnnHandle_t handle) {
  if (handle == nullptr) {
    throw ArgumentValueError("device_properties_json(): a cuDNN handle is required");
  }
#if CUDNN_VERSION >= 90800
  if (loaded_version() != 0 && loaded_version() < 90800) {
    throw GraphNotSupported("device_properties_json(): the loaded cuDNN " +
                            std::to_string(loaded_version()) +
                            " has no DEVICEPROP descriptor (cuDNN 9.8+)");
  }
  Descriptor props = BACKEND_DESCRIPTOR(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR);
  props.set_context("device properties");
  props.set_handle(ATTR(CUDNN_ATTR_DEVICEPROP_HANDLE), handle);
  props.finalize();
  return props.get_chars(ATTR(CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION));
#else
  throw GraphNotSupported("device_properties_json(): built against cuDNN headers without "
                          "CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR (9.8)");
#endif
}

}  // namespace cudnn_backend
