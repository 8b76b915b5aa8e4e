// Encoding of embedded pass-by-value scalars into the bytes cuDNN reads.
#include <cstring>

#include "backend_cc/cc/errors.h"
#include "backend_cc/cc/host_scalar.h"
#include "backend_cc/cc/tests/check.h"

using namespace cudnn_backend;

namespace {

template <typename T>
T decode(const HostScalar& bytes) {
  T value;
  std::memcpy(&value, bytes.data(), sizeof(T));
  return value;
}

}  // namespace

int main() {
  // binary16: exact values, rounding to nearest even, overflow, subnormals, sign.
  CHECK(float_to_half_bits(1.0f) == 0x3c00);
  CHECK(float_to_half_bits(-2.0f) == 0xc000);
  CHECK(float_to_half_bits(65504.0f) == 0x7bff);
  CHECK(float_to_half_bits(65520.0f) == 0x7c00);       // rounds up to inf
  CHECK(float_to_half_bits(1.0f + 1.0f / 2048) == 0x3c00);  // tie -> even (down)
  CHECK(float_to_half_bits(1.0f + 3.0f / 2048) == 0x3c02);  // tie -> even (up)
  CHECK(float_to_half_bits(5.9604645e-8f) == 0x0001);  // smallest subnormal
  CHECK(float_to_half_bits(1e-5f) == 0x00a8);          // epsilon-sized subnormal
  CHECK(float_to_half_bits(1e-9f) == 0x0000);
  // bfloat16: truncation with round to nearest even.
  CHECK(float_to_bfloat16_bits(1.0f) == 0x3f80);
  CHECK(float_to_bfloat16_bits(0.125f) == 0x3e00);
  CHECK(float_to_bfloat16_bits(1.00390625f) == 0x3f80);  // 1 + 2^-8: tie -> even
  CHECK(float_to_bfloat16_bits(1.01171875f) == 0x3f82);  // 1 + 3*2^-8: tie -> even (up)

  CHECK(decode<float>(encode_host_scalar(0.125, 1, "eps")) == 0.125f);         // FLOAT
  CHECK(decode<double>(encode_host_scalar(1e-12, 2, "eps")) == 1e-12);         // DOUBLE
  CHECK(decode<uint16_t>(encode_host_scalar(1.0, 3, "eps")) == 0x3c00);        // HALF
  CHECK(decode<uint16_t>(encode_host_scalar(1.0, 10, "eps")) == 0x3f80);       // BFLOAT16
  CHECK(decode<int32_t>(encode_host_scalar(-7.0, 5, "seed")) == -7);           // INT32
  CHECK(decode<int64_t>(encode_host_scalar(1e12, 11, "seed")) == 1000000000000);  // INT64
  CHECK(decode<uint8_t>(encode_host_scalar(0.5, 12, "flag")) == 1);            // BOOLEAN
  CHECK_THROWS(ArgumentValueError, "cannot be encoded as FP8_E4M3",
               encode_host_scalar(1.0, 14, "tensor 'x'"));
  return 0;
}
