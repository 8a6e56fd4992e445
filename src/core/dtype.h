#pragma once
// Element types. Values match ONNX TensorProto.DataType so conversion is a cast.
//
//   DType t = DType::kFloat32;
//   size_t n = dtype_size(t);           // 4
//   std::string s = dtype_name(t);      // "float32"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace streamline {

enum class DType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kBFloat16 = 16,
  // One byte per element in memory (core/small_types.h): float8 bit patterns, float4 in the low
  // nibble, 4- and 2-bit integers as their value.
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUInt4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,
  kUInt2 = 25,
  kInt2 = 26,
};

// Bytes per element; 0 for kUndefined and kString (string tensors hold std::string objects, see
// Tensor::strings(), and have no fixed element size).
size_t dtype_size(DType t);
// "float32", "int64", ...
const char* dtype_name(DType t);
// True for the fixed-size types (everything above but kString/kUndefined): what plans, arenas and
// numeric kernels hold. String tensors exist too, but only kernels registered for kString take them.
bool dtype_supported(DType t);
// Parses "float32"/"FP32"/"TYPE_FP32" style names; kUndefined when unknown.
DType dtype_from_name(const std::string& name);

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kFloat32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kFloat64; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kInt64; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct DTypeOf<int16_t> { static constexpr DType value = DType::kInt16; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::kInt8; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::kUInt8; };
template <> struct DTypeOf<uint16_t> { static constexpr DType value = DType::kUInt16; };
template <> struct DTypeOf<uint32_t> { static constexpr DType value = DType::kUInt32; };
template <> struct DTypeOf<uint64_t> { static constexpr DType value = DType::kUInt64; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::kBool; };

// Arithmetic of device kernels (ops::Precision, ModelOptions::precision). kFp32: true fp32
// everywhere. kTf32: fp32 tensors, matrix products and convolutions on TF32 tensor cores (10-bit
// mantissa inputs, fp32 accumulation). kFp16: the model's float32 activations and weights are
// float16 (converted when the model loads); kernels accumulate in fp32 where it matters
// (reductions, Softmax, LayerNorm, GEMM). CPU kernels run fp32.
enum class Precision { kFp32 = 0, kTf32 = 1, kFp16 = 2 };

// IEEE half precision conversions (round to nearest even).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bfloat16_to_float(uint16_t h);
uint16_t float_to_bfloat16(float f);

}  // namespace streamline
