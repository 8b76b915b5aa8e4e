// RAII ownership of one cuDNN backend descriptor, with typed attribute setters and getters
// whose failures name the descriptor type and the attribute (errors.h maps the status).
//
//   Descriptor op = BACKEND_DESCRIPTOR(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
//   op.set_desc(ATTR(CUDNN_ATTR_OPERATION_MATMUL_ADESC), a);
//   op.finalize();
#pragma once

#include <cudnn_graph.h>

#include <cstdint>
#include <string>
#include <vector>

namespace cudnn_backend {

// An attribute id together with its enumerator spelling, for error messages.
struct Attr {
  cudnnBackendAttributeName_t id;
  const char* name;
};
#define ATTR(x) ::cudnn_backend::Attr{x, #x}
#define BACKEND_DESCRIPTOR(x) ::cudnn_backend::Descriptor(x, #x)

class Descriptor {
 public:
  Descriptor(cudnnBackendDescriptorType_t type, const char* type_name);
  ~Descriptor();
  Descriptor(Descriptor&& other) noexcept;
  Descriptor& operator=(Descriptor&& other) noexcept;
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return desc_; }
  const std::string& type_name() const { return type_name_; }
  // Extra context ("op 'matmul.0'") appended to every error message of this descriptor.
  void set_context(std::string context) { context_ = std::move(context); }

  void set_raw(Attr attr, cudnnBackendAttributeType_t type, int64_t count, const void* data);
  void set_int64(Attr attr, int64_t value);
  void set_int64s(Attr attr, const std::vector<int64_t>& values);
  // CUDNN_TYPE_INT32 attributes (block sizes, MoE top_k); values are range-checked by the
  // op rules before they get here.
  void set_int32s(Attr attr, const std::vector<int32_t>& values);
  void set_double(Attr attr, double value);
  void set_float(Attr attr, float value);
  void set_bool(Attr attr, bool value);
  void set_data_type(Attr attr, cudnnDataType_t value);
  // Any enum-valued attribute (all cuDNN enums are int sized).
  void set_enum(Attr attr, cudnnBackendAttributeType_t type, int value);
  void set_handle(Attr attr, cudnnHandle_t handle);
  void set_desc(Attr attr, const Descriptor& value);
  void set_descs(Attr attr, const std::vector<const Descriptor*>& values);
  void set_void_ptrs(Attr attr, const std::vector<void*>& values);
  void set_void_ptr(Attr attr, void* value);
  void set_chars(Attr attr, const std::string& text);  // includes the terminating NUL

  void finalize();

  // Number of elements the attribute holds (a get with capacity 0).
  int64_t get_count(Attr attr, cudnnBackendAttributeType_t type) const;
  int64_t get_int64(Attr attr) const;
  std::vector<int64_t> get_int64s(Attr attr, int64_t capacity) const;
  std::vector<int> get_enums(Attr attr, cudnnBackendAttributeType_t type, int64_t capacity) const;
  std::string get_chars(Attr attr) const;
  // Fills caller-created descriptors (cuDNN's contract for descriptor-valued getters);
  // returns how many were filled.
  int64_t get_descs(Attr attr, std::vector<Descriptor>& into) const;

 private:
  std::string call(const char* fn, const char* attr_name) const;

  cudnnBackendDescriptor_t desc_ = nullptr;
  std::string type_name_;
  std::string context_;
};

}  // namespace cudnn_backend
