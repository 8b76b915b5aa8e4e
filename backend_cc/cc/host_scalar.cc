// Host scalar encoding (see host_scalar.h).
#include "backend_cc/cc/host_scalar.h"

#include <cmath>
#include <cstring>

#include "backend_cc/cc/enums.h"
#include "backend_cc/cc/errors.h"

namespace cudnn_backend {

uint16_t float_to_half_bits(float value) {
  uint32_t f;
  std::memcpy(&f, &value, sizeof(f));
  const uint32_t sign = (f >> 16) & 0x8000u;
  const uint32_t exponent = (f >> 23) & 0xffu;
  uint32_t mantissa = f & 0x7fffffu;
  if (exponent == 0xffu) {  // inf / nan (keep nan quiet)
    return static_cast<uint16_t>(sign | 0x7c00u | (mantissa ? 0x200u : 0u));
  }
  const int32_t e = static_cast<int32_t>(exponent) - 127 + 15;
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);  // underflow to signed zero
    mantissa |= 0x800000u;                             // subnormal: implicit bit made explicit
    const uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // may carry into inf: fine
  return static_cast<uint16_t>(sign | half);
}

uint16_t float_to_bfloat16_bits(float value) {
  uint32_t f;
  std::memcpy(&f, &value, sizeof(f));
  if ((f & 0x7f800000u) == 0x7f800000u && (f & 0x7fffffu)) {
    return static_cast<uint16_t>((f >> 16) | 0x40u);  // quiet nan
  }
  const uint32_t rounding = 0x7fffu + ((f >> 16) & 1u);
  return static_cast<uint16_t>((f + rounding) >> 16);
}

HostScalar encode_host_scalar(double value, int64_t data_type, const std::string& what) {
  HostScalar bytes{};
  auto put = [&](const auto& v) { std::memcpy(bytes.data(), &v, sizeof(v)); };
  switch (data_type) {
    case data_type::kFloat: put(static_cast<float>(value)); break;
    case data_type::kDouble: put(value); break;
    case data_type::kHalf: put(float_to_half_bits(static_cast<float>(value))); break;
    case data_type::kBfloat16: put(float_to_bfloat16_bits(static_cast<float>(value))); break;
    case data_type::kInt32: put(static_cast<int32_t>(std::llround(value))); break;
    case data_type::kInt64: put(static_cast<int64_t>(std::llround(value))); break;
    case data_type::kInt8: put(static_cast<int8_t>(std::llround(value))); break;
    case data_type::kUint8: put(static_cast<uint8_t>(std::llround(value))); break;
    case data_type::kBoolean: put(static_cast<uint8_t>(value != 0.0)); break;
    default:
      throw ArgumentValueError(what + ": an embedded scalar cannot be encoded as " +
                               enum_value_name(EnumKind::kDataType, data_type));
  }
  return bytes;
}

}  // namespace cudnn_backend
