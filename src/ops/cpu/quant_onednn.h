#pragma once
// oneDNN plumbing of the int8 kernels (qconv.cc, qmatmul.cc): data types, the constant
// quantisation parameters they read at create, and the output stage expressed as oneDNN
// attributes (output scales, destination zero point, residual sum, activation).
//
//   QOutputStage st = output_stage(acc_scales, out_dtype, y_scale, y_zp, act);
//   dnnl::primitive_attr attr;
//   dnnl::post_ops po;
//   st.apply(attr, po, residual);   // residual: optional {scale, zero point, dtype}
//
// oneDNN's int8 primitives compute dst = sat(round(post_ops(output_scale * (acc + bias)) + dst_zp)).
// With an activation that commutes with positive scaling (none, Relu, LeakyRelu, Clip with its
// bounds divided by y_scale) the output scale is x_scale * w_scale / y_scale and every post-op
// works in the output's quantised units; with any other activation the output scale is
// x_scale * w_scale, the activation sees real values, and a final linear post-op divides by y_scale.

#include <atomic>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ops/cpu/onednn_common.h"
#include "ops/cpu/quant_common.h"

namespace streamline::ops::cpu {

// Tests make kernels created after they set it take one path whatever the CPU: 1 as with VNNI,
// 0 as without (the split weights below), -1 (the default) as this CPU has it.
inline std::atomic<int>& int8_exactness_override() {
  static std::atomic<int> v{-1};
  return v;
}

// Whether oneDNN's int8 kernels on this CPU sum u8 x s8 products in 32 bits (VNNI). Without it
// (plain AVX2 or AVX-512) they add each pair of neighbouring products in 16 bits first, which
// saturates once 255 * (|b0| + |b1|) exceeds 32767: the result is then silently wrong.
inline bool int8_products_exact() {
  if (const int o = int8_exactness_override().load(std::memory_order_relaxed); o >= 0) return o == 1;
  static const bool exact = [] {
    switch (dnnl::get_effective_cpu_isa()) {
      case dnnl::cpu_isa::avx2_vnni:
      case dnnl::cpu_isa::avx512_core_vnni:
      case dnnl::cpu_isa::avx512_core_bf16:
      case dnnl::cpu_isa::avx512_core_amx:
        return true;
      default:
        return false;
    }
  }();
  return exact;
}

// Whether any of n int8 weights exceeds 64 in magnitude, so that two of them (however oneDNN
// pairs them) could add past 128 and a 16-bit pair sum of u8 x s8 products could saturate.
inline bool int8_may_saturate(const int8_t* w, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (w[i] > 64 || w[i] < -64) return true;
  return false;
}

// Splits `rows` rows of `len` int8 weights into halves of at most 64 in magnitude, w = hi + lo:
// dst holds [hi(row 0), lo(row 0), hi(row 1), lo(row 1), ...], 2 * rows * len values.
inline void split_int8_halves(const int8_t* src, int64_t rows, int64_t len, int8_t* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    const int8_t* s = src + r * len;
    int8_t* hi = dst + 2 * r * len;
    int8_t* lo = hi + len;
    for (int64_t i = 0; i < len; ++i) {
      hi[i] = static_cast<int8_t>(s[i] / 2);      // rounds toward zero: |hi| <= 64
      lo[i] = static_cast<int8_t>(s[i] - hi[i]);  // |lo| <= 64
    }
  }
}

inline dnnl::memory::data_type dnnl_dtype(DType t) {
  switch (t) {
    case DType::kUInt8:
      return dnnl::memory::data_type::u8;
    case DType::kInt8:
      return dnnl::memory::data_type::s8;
    case DType::kInt32:
      return dnnl::memory::data_type::s32;
    default:
      return dnnl::memory::data_type::f32;
  }
}

// A residual added by a sum post-op: Y += scale * (Z - zp), Z stored in Y's buffer as `dtype`.
struct QResidual {
  float scale = 1.f;
  int32_t zp = 0;
  DType dtype = DType::kUInt8;
};

// Appends the eltwise post-op(s) computing `act`, whose bounds are divided by `unit` (the output
// scale when the activation runs in quantised units, 1 otherwise).
inline void append_q_activation(dnnl::post_ops& po, const ActivationAttrs& act, float unit) {
  using dnnl::algorithm;
  switch (act.kind) {
    case ActivationKind::kRelu:
      po.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
      break;
    case ActivationKind::kLeakyRelu:
      po.append_eltwise(1.f, algorithm::eltwise_relu, act.alpha, 0.f);
      break;
    case ActivationKind::kClip:
      po.append_eltwise(1.f, algorithm::eltwise_clip_v2, act.alpha / unit, act.beta / unit);
      break;
    case ActivationKind::kSigmoid:
      po.append_eltwise(1.f, algorithm::eltwise_logistic, 0.f, 0.f);
      break;
    case ActivationKind::kTanh:
      po.append_eltwise(1.f, algorithm::eltwise_tanh, 0.f, 0.f);
      break;
    case ActivationKind::kHardSigmoid:
      po.append_eltwise(1.f, algorithm::eltwise_linear, act.alpha, act.beta);
      po.append_eltwise(1.f, algorithm::eltwise_clip_v2, 0.f, 1.f);
      break;
    case ActivationKind::kGelu:
      po.append_eltwise(1.f, algorithm::eltwise_gelu_erf, 0.f, 0.f);
      break;
    default:
      break;
  }
}

// The output stage of one int8 primitive (see the file comment).
struct QOutputStage {
  std::vector<float> scales;  // output scales: one, or one per output channel
  DType out = DType::kFloat32;
  float y_scale = 1.f;
  int32_t y_zp = 0;
  ActivationAttrs act;
  bool quantized_units = false;  // post-ops run in the output's quantised units
  // streamline.QConv's pre_residual_clip: bounds (real units) on conv + bias before Z is added.
  std::optional<std::pair<float, float>> pre_residual_clip;

  // Sets the output scales and destination zero point on `attr` and appends the residual sum and
  // the activation to `po` (the caller may append more and then sets the post-ops). `channel_mask`
  // is the output-scale mask of a per-channel scale.
  void apply(dnnl::primitive_attr& attr, dnnl::post_ops& po, const std::optional<QResidual>& residual,
             int channel_mask) const {
    attr.set_output_scales(scales.size() > 1 ? channel_mask : 0, scales);
    const bool q8 = is_q8(out);
    if (q8 && y_zp != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {y_zp});
    const float unit = quantized_units ? y_scale : 1.f;
    if (residual && pre_residual_clip)
      po.append_eltwise(1.f, dnnl::algorithm::eltwise_clip_v2, pre_residual_clip->first / unit,
                        pre_residual_clip->second / unit);
    if (residual) {
      const float s = quantized_units ? residual->scale / y_scale : residual->scale;
      if (residual->dtype == out)
        po.append_sum(s, residual->zp);
      else
        po.append_sum(s, residual->zp, dnnl_dtype(residual->dtype));
    }
    append_q_activation(po, act, unit);
    if (q8 && !quantized_units) po.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, 1.f / y_scale, 0.f);
  }
};

// Per-OpenMP-thread-count cache of a kernel's per-shape objects (band plans), like
// PrimitiveCache: built on the first request for a count, then shared; get() may run concurrently.
template <typename T>
class ThreadCountCache {
 public:
  // The object for `threads`, from build() (returning Result<std::unique_ptr<T>>, possibly null).
  template <typename Build>
  Result<const T*> get(int threads, Build&& build) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = owned_.find(threads);
    if (it != owned_.end()) return it->second.get();
    SL_ASSIGN_OR_RETURN(std::unique_ptr<T> built, build());
    const T* p = built.get();
    owned_.emplace(threads, std::move(built));
    return p;
  }

 private:
  mutable std::mutex mu_;
  mutable std::unordered_map<int, std::unique_ptr<T>> owned_;
};

// Constant weights reordered once per oneDNN layout and shared by every primitive that wants that
// layout (the primitives of all thread counts and row bands of one kernel).
class WeightPacks {
 public:
  // The weights `src` (described by `src_md`) in layout `md`.
  Result<std::shared_ptr<AlignedBuffer>> get(const dnnl::memory::desc& md, const dnnl::memory::desc& src_md,
                                             const void* src) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [m, buf] : packs_)
      if (m == md) return buf;
    SL_ASSIGN_OR_RETURN(std::shared_ptr<AlignedBuffer> buf, reorder_to_buffer(src_md, src, md));
    packs_.emplace_back(md, buf);
    return buf;
  }

 private:
  mutable std::mutex mu_;
  mutable std::vector<std::pair<dnnl::memory::desc, std::shared_ptr<AlignedBuffer>>> packs_;
};

// The output stage for accumulator scales `acc_scales` (x_scale * w_scale per channel).
inline QOutputStage output_stage(const std::vector<double>& acc_scales, DType out, double y_scale, int32_t y_zp,
                                 const ActivationAttrs& act) {
  QOutputStage st;
  st.out = out;
  st.y_scale = static_cast<float>(y_scale);
  st.y_zp = y_zp;
  st.act = act;
  st.quantized_units = is_q8(out) && activation_scales(act);
  for (double s : acc_scales) st.scales.push_back(static_cast<float>(st.quantized_units ? s / y_scale : s));
  return st;
}

}  // namespace streamline::ops::cpu
