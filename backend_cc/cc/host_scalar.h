// Encoding of an embedded pass-by-value scalar (epsilon, attn_scale, momentum, ...) into the
// host bytes cuDNN reads through the variant pack at execute time.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace cudnn_backend {

using HostScalar = std::array<unsigned char, 8>;

// `value` encoded as frontend data_type `data_type` (FLOAT, DOUBLE, HALF, BFLOAT16, INT8,
// UINT8, BOOLEAN, INT32, INT64). Throws ArgumentValueError for other types.
HostScalar encode_host_scalar(double value, int64_t data_type, const std::string& what);

// IEEE binary16 / bfloat16 bit patterns of `value`, rounded to nearest even.
uint16_t float_to_half_bits(float value);
uint16_t float_to_bfloat16_bits(float value);

}  // namespace cudnn_backend
