#pragma once
// Small helpers shared by the long-tail CPU kernel families (loss, rnn, quant, einsum, sampling,
// signal, detection, ...): element loads and stores of any numeric dtype through double, index
// reads, and a def builder keyed by dtype.
//
//   const double v = load_f(x.dtype(), x.raw(), i);     // float16/bfloat16/float32/float64/ints
//   store_f(y.dtype(), y.raw(), i, v * 2);                // rounds / saturates to y's dtype
//   SL_RETURN_IF_ERROR(add_typed_def(reg, "Det", 11, DType::kFloat32, factory));

#include <climits>
#include <cstdint>
#include <cstring>

#include "core/small_types.h"
#include "ops/cpu/data_common.h"

namespace streamline::ops::cpu {

inline bool is_float_dtype(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 || t == DType::kBFloat16;
}

// Element i of a buffer of dtype t as double (bool as 0/1). Not for the hottest loops.
inline double load_f(DType t, const void* base, int64_t i) {
  switch (t) {
    case DType::kFloat32:
      return static_cast<const float*>(base)[i];
    case DType::kFloat64:
      return static_cast<const double*>(base)[i];
    case DType::kFloat16:
      return half_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::kBFloat16:
      return bfloat16_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::kInt64:
      return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DType::kInt32:
      return static_cast<const int32_t*>(base)[i];
    case DType::kInt16:
      return static_cast<const int16_t*>(base)[i];
    case DType::kInt8:
      return static_cast<const int8_t*>(base)[i];
    case DType::kUInt64:
      return static_cast<double>(static_cast<const uint64_t*>(base)[i]);
    case DType::kUInt32:
      return static_cast<const uint32_t*>(base)[i];
    case DType::kUInt16:
      return static_cast<const uint16_t*>(base)[i];
    case DType::kUInt8:
    case DType::kBool:
      return static_cast<const uint8_t*>(base)[i];
    default:
      if (is_small_type(t)) return small_to_float(t, static_cast<const uint8_t*>(base)[i]);
      return 0.0;
  }
}

// Stores v at element i of a buffer of dtype t (floats round, integers saturate, bool is v != 0).
inline void store_f(DType t, void* base, int64_t i, double v) {
  store_scalar(t, v, static_cast<uint8_t*>(base) + static_cast<size_t>(i) * dtype_size(t));
}

// Element i of an int32/int64 index tensor.
inline int64_t load_index(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kInt32 ? t.data<int32_t>()[i] : t.data<int64_t>()[i];
}

// Registers a CPU def for `op` (default domain unless `domain` is given) keyed by `dtype`
// (kUndefined = any dtype), selected by input `dtype_input`.
inline Status add_typed_def(KernelRegistry& reg, const char* op, int since, DType dtype, KernelFactory f,
                            const char* domain = "", int end = INT_MAX, int dtype_input = 0) {
  KernelDef def;
  def.op = op;
  def.domain = domain;
  def.since_version = since;
  def.end_version = end;
  def.dtype = dtype;
  def.dtype_input = dtype_input;
  def.provider = "cpu";
  def.create = std::move(f);
  return reg.add(std::move(def));
}

// A factory for a kernel type whose constructor takes the create args and which has a
// `Status init(const KernelCreateArgs&)` that validates attributes.
template <typename K>
KernelFactory make_factory() {
  return [](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    auto k = std::make_unique<K>(a.node);
    SL_RETURN_IF_ERROR(k->init(a));
    return std::unique_ptr<Kernel>(std::move(k));
  };
}

}  // namespace streamline::ops::cpu
