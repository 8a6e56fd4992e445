#pragma once
// Values of the sub-16-bit element types ONNX added from opset 19: the float8 formats (E4M3FN,
// E4M3FNUZ, E5M2, E5M2FNUZ, E8M0), float4 E2M1 and the 4- and 2-bit integers.
//
//   uint8_t b = float_to_small(DType::kFloat8E4M3FN, 0.3f, {});  // round to nearest even
//   float v = small_to_float(DType::kFloat8E4M3FN, b);            // 0.3125
//
// In memory every such element takes one byte: the float formats their bit pattern (float4 in the
// low nibble), int4/int2 the value sign-extended to int8, uint4/uint2 the value in a uint8. Only
// ONNX's TensorProto packs 4-bit types two to a byte and 2-bit types four to a byte
// (graph/onnx_tensor.cc converts).
//
// Conversions to float8 follow Cast's tables: round to nearest even; with `saturate` (the
// default) infinities and values past the largest finite one become that value with their sign,
// without it they become infinity (E5M2) or NaN. The FNUZ formats have no negative zero. float4
// E2M1 has neither infinity nor NaN and always saturates (NaN gives the zero of the opposite
// sign, as ONNX's reference does). E8M0 (powers of two 2^(e - 127), 0xFF = NaN) takes the
// float32's exponent, rounded up (default), down, or to nearest by its mantissa; saturation keeps
// the largest power from rounding into NaN. Integers: a float truncates toward zero (NaN and
// infinities give 0), then like every integer keeps its low 4 or 2 bits (two's complement).

#include <cstdint>

#include "core/dtype.h"

namespace streamline {

// True for the element types above (one byte in memory, bit-level conversions).
bool is_small_type(DType t);
bool is_small_float(DType t);  // the float8 formats and float4 E2M1
bool is_small_int(DType t);    // int4, uint4, int2, uint2

// Rounding of float -> E8M0 (Cast's round_mode).
enum class E8M0Round { kUp, kDown, kNearest };

struct SmallCastOptions {
  // Cast's `saturate`: out-of-range values clamp to the largest finite value (float8 formats).
  bool saturate = true;
  // Cast's `round_mode`, for E8M0 only.
  E8M0Round e8m0_round = E8M0Round::kUp;
};

// The value of one stored element of small type `t`.
float small_to_float(DType t, uint8_t stored);
// The stored byte of `v` as small type `t` (floats round, integers truncate and wrap).
uint8_t float_to_small(DType t, float v, const SmallCastOptions& options);
// The stored byte of integer `v` as small type `t`: small floats convert the value, small integers
// keep its low bits.
uint8_t int_to_small(DType t, int64_t v, const SmallCastOptions& options);
// Smallest and largest value of a small integer type.
int64_t small_int_min(DType t);
int64_t small_int_max(DType t);
// Bits per element in a packed TensorProto: 4 for int4/uint4/float4, 2 for int2/uint2, else 8.
int packed_bits(DType t);

}  // namespace streamline
