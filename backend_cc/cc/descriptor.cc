// Descriptor RAII and typed attribute access (see descriptor.h).
#include "backend_cc/cc/descriptor.h"

#include <algorithm>

#include "backend_cc/cc/cudnn_api.h"
#include "backend_cc/cc/errors.h"

namespace cudnn_backend {

Descriptor::Descriptor(cudnnBackendDescriptorType_t type, const char* type_name)
    : type_name_(type_name) {
  check_status(api().cudnnBackendCreateDescriptor(type, &desc_),
               std::string("cudnnBackendCreateDescriptor(") + type_name + ")");
}

Descriptor::~Descriptor() {
  // Destruction failures cannot be reported from a destructor; cuDNN only fails here for
  // invalid pointers, which RAII rules out.
  if (desc_ != nullptr && is_loaded()) api().cudnnBackendDestroyDescriptor(desc_);
}

Descriptor::Descriptor(Descriptor&& other) noexcept
    : desc_(other.desc_),
      type_name_(std::move(other.type_name_)),
      context_(std::move(other.context_)) {
  other.desc_ = nullptr;
}

Descriptor& Descriptor::operator=(Descriptor&& other) noexcept {
  if (this != &other) {
    if (desc_ != nullptr && is_loaded()) api().cudnnBackendDestroyDescriptor(desc_);
    desc_ = other.desc_;
    type_name_ = std::move(other.type_name_);
    context_ = std::move(other.context_);
    other.desc_ = nullptr;
  }
  return *this;
}

std::string Descriptor::call(const char* fn, const char* attr_name) const {
  std::string out = std::string(fn) + "(" + type_name_;
  if (attr_name != nullptr) out += std::string(", ") + attr_name;
  out += ")";
  if (!context_.empty()) out += " for " + context_;
  return out;
}

void Descriptor::set_raw(Attr attr, cudnnBackendAttributeType_t type, int64_t count,
                         const void* data) {
  check_status(api().cudnnBackendSetAttribute(desc_, attr.id, type, count, data),
               call("cudnnBackendSetAttribute", attr.name));
}

void Descriptor::set_int64(Attr attr, int64_t value) {
  set_raw(attr, CUDNN_TYPE_INT64, 1, &value);
}

void Descriptor::set_int64s(Attr attr, const std::vector<int64_t>& values) {
  set_raw(attr, CUDNN_TYPE_INT64, static_cast<int64_t>(values.size()), values.data());
}

void Descriptor::set_int32s(Attr attr, const std::vector<int32_t>& values) {
  set_raw(attr, CUDNN_TYPE_INT32, static_cast<int64_t>(values.size()), values.data());
}

void Descriptor::set_double(Attr attr, double value) {
  set_raw(attr, CUDNN_TYPE_DOUBLE, 1, &value);
}

void Descriptor::set_float(Attr attr, float value) { set_raw(attr, CUDNN_TYPE_FLOAT, 1, &value); }

void Descriptor::set_bool(Attr attr, bool value) { set_raw(attr, CUDNN_TYPE_BOOLEAN, 1, &value); }

void Descriptor::set_data_type(Attr attr, cudnnDataType_t value) {
  set_raw(attr, CUDNN_TYPE_DATA_TYPE, 1, &value);
}

void Descriptor::set_enum(Attr attr, cudnnBackendAttributeType_t type, int value) {
  static_assert(sizeof(cudnnPointwiseMode_t) == sizeof(int), "cuDNN enums are int sized");
  set_raw(attr, type, 1, &value);
}

void Descriptor::set_handle(Attr attr, cudnnHandle_t handle) {
  set_raw(attr, CUDNN_TYPE_HANDLE, 1, &handle);
}

void Descriptor::set_desc(Attr attr, const Descriptor& value) {
  cudnnBackendDescriptor_t raw = value.get();
  set_raw(attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
}

void Descriptor::set_descs(Attr attr, const std::vector<const Descriptor*>& values) {
  std::vector<cudnnBackendDescriptor_t> raw;
  raw.reserve(values.size());
  for (const Descriptor* d : values) raw.push_back(d->get());
  set_raw(attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(raw.size()), raw.data());
}

void Descriptor::set_void_ptrs(Attr attr, const std::vector<void*>& values) {
  set_raw(attr, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(values.size()), values.data());
}

void Descriptor::set_void_ptr(Attr attr, void* value) {
  set_raw(attr, CUDNN_TYPE_VOID_PTR, 1, &value);
}

void Descriptor::set_chars(Attr attr, const std::string& text) {
  set_raw(attr, CUDNN_TYPE_CHAR, static_cast<int64_t>(text.size() + 1), text.c_str());
}

void Descriptor::finalize() {
  check_status(api().cudnnBackendFinalize(desc_), call("cudnnBackendFinalize", nullptr));
}

int64_t Descriptor::get_count(Attr attr, cudnnBackendAttributeType_t type) const {
  int64_t count = 0;
  check_status(api().cudnnBackendGetAttribute(desc_, attr.id, type, 0, &count, nullptr),
               call("cudnnBackendGetAttribute", attr.name));
  return count;
}

int64_t Descriptor::get_int64(Attr attr) const {
  int64_t value = 0;
  int64_t count = 0;
  check_status(api().cudnnBackendGetAttribute(desc_, attr.id, CUDNN_TYPE_INT64, 1, &count, &value),
               call("cudnnBackendGetAttribute", attr.name));
  return value;
}

std::vector<int64_t> Descriptor::get_int64s(Attr attr, int64_t capacity) const {
  std::vector<int64_t> values(static_cast<size_t>(capacity));
  int64_t count = 0;
  check_status(api().cudnnBackendGetAttribute(desc_, attr.id, CUDNN_TYPE_INT64, capacity, &count,
                                              values.data()),
               call("cudnnBackendGetAttribute", attr.name));
  values.resize(static_cast<size_t>(std::min(count, capacity)));
  return values;
}

std::vector<int> Descriptor::get_enums(Attr attr, cudnnBackendAttributeType_t type,
                                       int64_t capacity) const {
  std::vector<int> values(static_cast<size_t>(capacity));
  int64_t count = 0;
  check_status(
      api().cudnnBackendGetAttribute(desc_, attr.id, type, capacity, &count, values.data()),
      call("cudnnBackendGetAttribute", attr.name));
  values.resize(static_cast<size_t>(std::min(count, capacity)));
  return values;
}

std::string Descriptor::get_chars(Attr attr) const {
  const int64_t size = get_count(attr, CUDNN_TYPE_CHAR);
  std::string text(static_cast<size_t>(size), '\0');
  int64_t count = 0;
  check_status(api().cudnnBackendGetAttribute(desc_, attr.id, CUDNN_TYPE_CHAR, size, &count,
                                              text.data()),
               call("cudnnBackendGetAttribute", attr.name));
  // cuDNN counts the terminating NUL; the string we hand out does not carry it.
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return text;
}

int64_t Descriptor::get_descs(Attr attr, std::vector<Descriptor>& into) const {
  std::vector<cudnnBackendDescriptor_t> raw;
  raw.reserve(into.size());
  for (const Descriptor& d : into) raw.push_back(d.get());
  int64_t count = 0;
  check_status(api().cudnnBackendGetAttribute(desc_, attr.id, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                              static_cast<int64_t>(raw.size()), &count,
                                              raw.data()),
               call("cudnnBackendGetAttribute", attr.name));
  return count;
}

}  // namespace cudnn_backend
