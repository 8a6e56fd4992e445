#include "core/small_types.h"

#include <cmath>
#include <cstring>

namespace streamline {
namespace {

// One minifloat format: exponent and mantissa widths, bias, and how it spells the specials.
struct Format {
  int ebits, mbits, bias;
  enum class Specials { kIeee, kFiniteNan, kUnsignedZeroNan, kNone } specials;
  uint8_t max_code;  // the largest finite magnitude, sign bit clear
};

// kIeee: E5M2 (infinities, NaNs in the top exponent). kFiniteNan: E4M3FN (no infinities, S.1111.111
// is NaN). kUnsignedZeroNan: the FNUZ formats (0x80 is the only NaN, no negative zero). kNone:
// E2M1 (every code a finite number).
Format format_of(DType t) {
  switch (t) {
    case DType::kFloat8E4M3FN:
      return {4, 3, 7, Format::Specials::kFiniteNan, 0x7E};
    case DType::kFloat8E4M3FNUZ:
      return {4, 3, 8, Format::Specials::kUnsignedZeroNan, 0x7F};
    case DType::kFloat8E5M2:
      return {5, 2, 15, Format::Specials::kIeee, 0x7B};
    case DType::kFloat8E5M2FNUZ:
      return {5, 2, 16, Format::Specials::kUnsignedZeroNan, 0x7F};
    default:  // kFloat4E2M1
      return {2, 1, 1, Format::Specials::kNone, 0x7};
  }
}

float decode(const Format& f, uint8_t b) {
  const int top = f.ebits + f.mbits;
  const bool neg = (b >> top) & 1;
  const int exp = (b >> f.mbits) & ((1 << f.ebits) - 1);
  const int mant = b & ((1 << f.mbits) - 1);
  const int emax = (1 << f.ebits) - 1;
  if (f.specials == Format::Specials::kUnsignedZeroNan && b == 0x80) return NAN;
  if (f.specials == Format::Specials::kFiniteNan && exp == emax && mant == (1 << f.mbits) - 1) return NAN;
  if (f.specials == Format::Specials::kIeee && exp == emax) return mant == 0 ? (neg ? -INFINITY : INFINITY) : NAN;
  const double v = exp == 0 ? std::ldexp(static_cast<double>(mant), 1 - f.bias - f.mbits)
                            : std::ldexp(1.0 + std::ldexp(static_cast<double>(mant), -f.mbits), exp - f.bias);
  return static_cast<float>(neg ? -v : v);
}

uint8_t encode(const Format& f, float v, bool saturate) {
  const int top = f.ebits + f.mbits;
  const uint8_t sign = std::signbit(v) ? static_cast<uint8_t>(1u << top) : 0;
  const bool uz = f.specials == Format::Specials::kUnsignedZeroNan;
  if (std::isnan(v)) {
    switch (f.specials) {
      case Format::Specials::kUnsignedZeroNan:
        return 0x80;
      case Format::Specials::kFiniteNan:
        return sign | 0x7F;
      case Format::Specials::kIeee:
        return sign | 0x7E;
      case Format::Specials::kNone:
        return sign ? 0x0 : 0x8;
    }
  }
  // What a value past the largest finite one becomes.
  const auto overflow = [&]() -> uint8_t {
    if (saturate || f.specials == Format::Specials::kNone) return sign | f.max_code;
    if (f.specials == Format::Specials::kIeee) return sign | 0x7C;
    return uz ? 0x80 : (sign | 0x7F);
  };
  const double a = std::fabs(static_cast<double>(v));
  if (std::isinf(a)) return overflow();
  if (a == 0.0) return uz ? 0 : sign;
  const int emin = 1 - f.bias;  // exponent of the smallest normal
  int e = std::max(std::ilogb(a), emin);
  double r = std::nearbyint(std::ldexp(a, f.mbits - e));  // round half to even
  const double full = std::ldexp(1.0, f.mbits + 1);
  if (r >= full) {
    r /= 2;
    ++e;
  }
  if (std::ldexp(r, e - f.mbits) > static_cast<double>(decode(f, f.max_code))) return overflow();
  if (r == 0) return uz ? 0 : sign;
  const int mant_one = 1 << f.mbits;
  const int ri = static_cast<int>(r);
  if (ri < mant_one) return static_cast<uint8_t>(sign | ri);  // subnormal (e == emin)
  return static_cast<uint8_t>(sign | ((e + f.bias) << f.mbits) | (ri - mant_one));
}

// float32 -> E8M0 from the float's exponent field, as ONNX's reference rounds it.
uint8_t encode_e8m0(float v, const SmallCastOptions& o) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  uint32_t exp = (bits >> 23) & 0xFF;
  if (exp == 0xFF) return 0xFF;
  bool up = false;
  if (o.e8m0_round == E8M0Round::kUp) {
    up = (bits & 0x7FFFFF) != 0;
  } else if (o.e8m0_round == E8M0Round::kNearest) {
    const bool g = bits & 0x400000, r = bits & 0x200000, s = (bits & 0x1FFFFF) != 0, lsb = exp > 0;
    up = g && (r || s || lsb);
  }
  if (up && !(o.saturate && exp == 0xFE)) ++exp;
  return static_cast<uint8_t>(exp);
}

int small_int_bits(DType t) {
  return t == DType::kInt4 || t == DType::kUInt4 ? 4 : 2;
}

bool small_int_signed(DType t) {
  return t == DType::kInt4 || t == DType::kInt2;
}

uint8_t wrap_int(DType t, int64_t v) {
  const int bits = small_int_bits(t);
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  uint64_t low = static_cast<uint64_t>(v) & mask;
  if (small_int_signed(t) && (low >> (bits - 1)) != 0) low |= ~mask;  // sign-extend into the byte
  return static_cast<uint8_t>(low);
}

}  // namespace

bool is_small_float(DType t) {
  switch (t) {
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
    case DType::kFloat8E8M0:
    case DType::kFloat4E2M1:
      return true;
    default:
      return false;
  }
}

bool is_small_int(DType t) {
  return t == DType::kInt4 || t == DType::kUInt4 || t == DType::kInt2 || t == DType::kUInt2;
}

bool is_small_type(DType t) {
  return is_small_float(t) || is_small_int(t);
}

float small_to_float(DType t, uint8_t stored) {
  if (t == DType::kFloat8E8M0) return stored == 0xFF ? NAN : std::ldexp(1.0f, static_cast<int>(stored) - 127);
  if (is_small_int(t)) return small_int_signed(t) ? static_cast<int8_t>(stored) : stored;
  return decode(format_of(t), stored);
}

uint8_t float_to_small(DType t, float v, const SmallCastOptions& options) {
  if (t == DType::kFloat8E8M0) return encode_e8m0(v, options);
  if (is_small_int(t)) {
    if (!std::isfinite(v)) return 0;
    const double tv = std::trunc(static_cast<double>(v));
    // Keep the low bits of the truncated value; beyond int64's range they are all zero.
    const int64_t i = std::fabs(tv) < 9.2e18 ? static_cast<int64_t>(tv) : 0;
    return wrap_int(t, i);
  }
  return encode(format_of(t), v, options.saturate);
}

uint8_t int_to_small(DType t, int64_t v, const SmallCastOptions& options) {
  if (is_small_int(t)) return wrap_int(t, v);
  return float_to_small(t, static_cast<float>(v), options);
}

int64_t small_int_min(DType t) {
  return small_int_signed(t) ? -(int64_t{1} << (small_int_bits(t) - 1)) : 0;
}

int64_t small_int_max(DType t) {
  return small_int_signed(t) ? (int64_t{1} << (small_int_bits(t) - 1)) - 1 : (int64_t{1} << small_int_bits(t)) - 1;
}

int packed_bits(DType t) {
  switch (t) {
    case DType::kInt4:
    case DType::kUInt4:
    case DType::kFloat4E2M1:
      return 4;
    case DType::kInt2:
    case DType::kUInt2:
      return 2;
    default:
      return 8;
  }
}

}  // namespace streamline
