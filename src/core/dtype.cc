#include "core/dtype.h"

#include <algorithm>
#include <cctype>

namespace streamline {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat32: case DType::kInt32: case DType::kUInt32: return 4;
    case DType::kFloat64: case DType::kInt64: case DType::kUInt64: return 8;
    case DType::kFloat16: case DType::kBFloat16: case DType::kInt16: case DType::kUInt16: return 2;
    case DType::kInt8: case DType::kUInt8: case DType::kBool: return 1;
    case DType::kFloat8E4M3FN: case DType::kFloat8E4M3FNUZ: case DType::kFloat8E5M2: case DType::kFloat8E5M2FNUZ:
    case DType::kFloat8E8M0: case DType::kFloat4E2M1: case DType::kUInt4: case DType::kInt4: case DType::kUInt2:
    case DType::kInt2: return 1;
    case DType::kString: case DType::kUndefined: return 0;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt64: return "int64";
    case DType::kInt32: return "int32";
    case DType::kInt16: return "int16";
    case DType::kInt8: return "int8";
    case DType::kUInt64: return "uint64";
    case DType::kUInt32: return "uint32";
    case DType::kUInt16: return "uint16";
    case DType::kUInt8: return "uint8";
    case DType::kBool: return "bool";
    case DType::kFloat8E4M3FN: return "float8e4m3fn";
    case DType::kFloat8E4M3FNUZ: return "float8e4m3fnuz";
    case DType::kFloat8E5M2: return "float8e5m2";
    case DType::kFloat8E5M2FNUZ: return "float8e5m2fnuz";
    case DType::kFloat8E8M0: return "float8e8m0";
    case DType::kFloat4E2M1: return "float4e2m1";
    case DType::kUInt4: return "uint4";
    case DType::kInt4: return "int4";
    case DType::kUInt2: return "uint2";
    case DType::kInt2: return "int2";
    case DType::kString: return "string";
    case DType::kUndefined: return "undefined";
  }
  return "undefined";
}

bool dtype_supported(DType t) { return dtype_size(t) != 0; }

DType dtype_from_name(const std::string& raw) {
  std::string n = raw;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  if (n.rfind("type_", 0) == 0) n = n.substr(5);
  struct Alias { const char* name; DType t; };
  static const Alias kAliases[] = {
      {"float32", DType::kFloat32}, {"float", DType::kFloat32}, {"fp32", DType::kFloat32},
      {"float64", DType::kFloat64}, {"double", DType::kFloat64}, {"fp64", DType::kFloat64},
      {"float16", DType::kFloat16}, {"half", DType::kFloat16}, {"fp16", DType::kFloat16},
      {"bfloat16", DType::kBFloat16}, {"bf16", DType::kBFloat16},
      {"int64", DType::kInt64}, {"int32", DType::kInt32}, {"int16", DType::kInt16}, {"int8", DType::kInt8},
      {"uint64", DType::kUInt64}, {"uint32", DType::kUInt32}, {"uint16", DType::kUInt16},
      {"uint8", DType::kUInt8}, {"bool", DType::kBool}, {"string", DType::kString}, {"bytes", DType::kString},
      {"float8e4m3fn", DType::kFloat8E4M3FN}, {"float8e4m3fnuz", DType::kFloat8E4M3FNUZ},
      {"float8e5m2", DType::kFloat8E5M2}, {"float8e5m2fnuz", DType::kFloat8E5M2FNUZ},
      {"float8e8m0", DType::kFloat8E8M0}, {"float4e2m1", DType::kFloat4E2M1}, {"uint4", DType::kUInt4},
      {"int4", DType::kInt4}, {"uint2", DType::kUInt2}, {"int2", DType::kInt2},
  };
  for (const auto& a : kAliases)
    if (n == a.name) return a.t;
  return DType::kUndefined;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) { mant <<= 1; --exp; }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (abs < 0x38800000u) {  // subnormal or zero in half
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // half subnormals count units of 2^-24
    uint32_t half_m = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_m & 1u))) ++half_m;
    return static_cast<uint16_t>(sign | half_m);
  }
  uint32_t h = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float bfloat16_to_float(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

}  // namespace streamline
