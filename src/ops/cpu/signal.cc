// Signal and text features: DFT (opset 17) and TfIdfVectorizer (opset 9, integer tokens).
//
// DFT: input [batch, n_1, ..., n_k, 1 | 2] (real or complex); the transform runs along `axis` (an
// attribute, default 1, up to opset 19; input 2, default -2, from opset 20; negative counts from
// the back, the complex dimension excluded) over dft_length points (the input's length by
// default; shorter truncates, longer zero-pads); `inverse` divides by the length. `onesided` on a
// forward transform keeps the first length / 2 + 1 bins of a real input (RFFT); on an inverse one
// it takes those bins of a conjugate-symmetric spectrum (a real input's imaginary parts are 0) and
// returns the real signal of dft_length points (IRFFT, default 2 * (bins - 1)). Output [..., 2] complex, or [..., 1]
// for IRFFT. Direct O(N^2) sums in double with a precomputed twiddle table in the workspace.
//
// TfIdfVectorizer: counts, per row, the pool's n-grams (lengths min_gram_length..max_gram_length,
// consecutive tokens or tokens `skip + 1` apart for skip in 0..max_skip_count; unigrams once) and
// writes TF (count), IDF (weight if seen) or TFIDF (count * weight) at each n-gram's ngram_indexes
// position.

#include <cmath>
#include <map>
#include <numbers>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"

namespace streamline::ops::cpu {
namespace {

class DftKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;

  Status init(const KernelCreateArgs& a) {
    if (opset_ >= 20 && a.node.has_attr("axis")) return invalid("DFT-20 takes axis as input 2, not an attribute");
    axis_ = a.node.attr_int("axis", opset_ >= 20 ? -2 : 1);
    inverse_ = a.node.attr_int("inverse", 0) != 0;
    onesided_ = a.node.attr_int("onesided", 0) != 0;
    return ok_status();
  }

  struct Plan {
    int64_t axis = 0, len = 0;
    bool irfft = false;
  };

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid("missing input");
    if (in[0].dtype != DType::kFloat32 && in[0].dtype != DType::kFloat64)
      return unsupported_error("only float32/float64");
    const Shape& s = in[0].shape;
    if (s.rank() < 3 || (s.back() != 1 && s.back() != 2))
      return invalid("input must be [batch, ..., 1 or 2], got " + s.to_string());
    int64_t axis_value = axis_;
    if (opset_ >= 20 && in.size() > 2 && in[2].present()) {
      SL_ASSIGN_OR_RETURN(std::vector<int64_t> a, constant_ints(in[2], "axis", desc_));
      if (a.size() != 1) return invalid("axis must be a scalar");
      axis_value = a[0];
    }
    SL_ASSIGN_OR_RETURN(int64_t axis, signal_axis(s, axis_value));
    Plan plan;
    plan.axis = axis;
    plan.irfft = onesided_ && inverse_;
    const int64_t n = s[static_cast<size_t>(axis)];
    plan.len = plan.irfft ? 2 * (n - 1) : n;
    if (in.size() > 1 && in[1].present()) {
      SL_ASSIGN_OR_RETURN(std::vector<int64_t> l, constant_ints(in[1], "dft_length", desc_));
      if (l.size() != 1 || l[0] < 1) return invalid("dft_length must be a positive scalar");
      plan.len = l[0];
    }
    if (plan.len < 1) return invalid("the transform length must be positive");
    if (onesided_ && !inverse_ && s.back() == 2) return invalid("a onesided forward transform needs a real input");
    Shape out = s;
    out[static_cast<size_t>(axis)] = onesided_ && !inverse_ ? plan.len / 2 + 1 : plan.len;
    out[out.rank() - 1] = plan.irfft ? 1 : 2;
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, out, Layout::kPlain});
    rr.workspace_bytes = static_cast<size_t>(2 * plan.len) * sizeof(double);
    rr.state = std::make_shared<Plan>(plan);
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Plan& plan = *static_cast<const Plan*>(ctx.state);
    const int64_t axis = plan.axis, len = plan.len;
    const bool irfft = plan.irfft;
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    const Shape& s = x.shape();
    const int64_t comp_in = s.back(), n_in = s[static_cast<size_t>(axis)], n_out = y.shape()[static_cast<size_t>(axis)];
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= s[static_cast<size_t>(d)];
    for (size_t d = static_cast<size_t>(axis) + 1; d + 1 < s.rank(); ++d) inner *= s[d];
    // Twiddles: e^{-+2 pi i m / len} for m in [0, len).
    double* tw = static_cast<double*>(ctx.workspace);
    const double sign = inverse_ ? 1.0 : -1.0;
    for (int64_t m = 0; m < len; ++m) {
      const double ang = sign * 2.0 * std::numbers::pi * static_cast<double>(m) / static_cast<double>(len);
      tw[2 * m] = std::cos(ang);
      tw[2 * m + 1] = std::sin(ang);
    }
    const int64_t used = std::min(n_in, len);
    const double scale = inverse_ ? 1.0 / static_cast<double>(len) : 1.0;
    math::parallel_chunks(outer * inner, 8, ctx.num_threads, [&](int64_t b, int64_t e) {
      for (int64_t oi = b; oi < e; ++oi) {
        const int64_t o = oi / inner, i = oi % inner;
        for (int64_t k = 0; k < n_out; ++k) {
          double re = 0, im = 0;
          // IRFFT: the full spectrum's bin t is the given bin t, or the conjugate of bin len - t.
          const int64_t terms = irfft ? len : used;
          for (int64_t t = 0; t < terms; ++t) {
            int64_t from = t;
            double conj = 1.0;
            if (irfft && t >= n_in) {
              from = len - t;
              conj = -1.0;
              if (from >= n_in) continue;
            }
            const int64_t src = ((o * n_in + from) * inner + i) * comp_in;
            const double xr = load_f(x.dtype(), x.raw(), src),
                         xi = comp_in == 2 ? conj * load_f(x.dtype(), x.raw(), src + 1) : 0.0;
            const int64_t m = (k * t) % len;
            re += xr * tw[2 * m] - xi * tw[2 * m + 1];
            im += xr * tw[2 * m + 1] + xi * tw[2 * m];
          }
          if (irfft) {
            store_f(y.dtype(), y.raw(), (o * n_out + k) * inner + i, re * scale);
            continue;
          }
          const int64_t dst = ((o * n_out + k) * inner + i) * 2;
          store_f(y.dtype(), y.raw(), dst, re * scale);
          store_f(y.dtype(), y.raw(), dst + 1, im * scale);
        }
      }
    });
    return ok_status();
  }

 private:
  // Accepted: [-rank, -2] and [0, rank - 2]; the last dimension holds the complex components.
  Result<int64_t> signal_axis(const Shape& s, int64_t axis) const {
    const int64_t r = static_cast<int64_t>(s.rank());
    const int64_t a = axis < 0 ? axis + r : axis;
    if (a < 0 || a > r - 2)
      return invalid("axis " + std::to_string(axis) + " is not a signal axis of " + s.to_string());
    return a;
  }

  int64_t axis_ = 1;
  bool inverse_ = false, onesided_ = false;
};

class TfIdfKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;

  Status init(const KernelCreateArgs& a) {
    const graph::Node& n = a.node;
    min_n_ = n.attr_int("min_gram_length", 1);
    max_n_ = n.attr_int("max_gram_length", 1);
    max_skip_ = n.attr_int("max_skip_count", 0);
    const std::string mode = n.attr_string("mode", "TF");
    if (mode != "TF" && mode != "IDF" && mode != "TFIDF") return invalid("unknown mode '" + mode + "'");
    mode_ = mode == "TF" ? 0 : mode == "IDF" ? 1 : 2;
    if (n.has_attr("pool_strings")) return unsupported_error("string pools (tensors of strings are not supported)");
    const std::vector<int64_t> pool = n.attr_ints("pool_int64s");
    const std::vector<int64_t> counts = n.attr_ints("ngram_counts");
    indexes_ = n.attr_ints("ngram_indexes");
    weights_ = n.attr_floats("weights");
    if (min_n_ < 1 || max_n_ < min_n_ || max_skip_ < 0) return invalid("bad n-gram lengths or skip count");
    // Pool segment i holds the (i + 1)-grams; grams are numbered in pool order.
    int64_t ordinal = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
      const int64_t n_len = static_cast<int64_t>(i) + 1;
      const int64_t begin = counts[i], end = i + 1 < counts.size() ? counts[i + 1] : static_cast<int64_t>(pool.size());
      if (begin < 0 || end > static_cast<int64_t>(pool.size()) || begin > end || (end - begin) % n_len != 0)
        return invalid("ngram_counts do not split the pool into whole n-grams");
      for (int64_t p = begin; p < end; p += n_len, ++ordinal)
        grams_[std::vector<int64_t>(pool.begin() + p, pool.begin() + p + n_len)] = ordinal;
    }
    if (static_cast<int64_t>(indexes_.size()) < ordinal) return invalid("fewer ngram_indexes than n-grams");
    for (int64_t v : indexes_) {
      if (v < 0) return invalid("negative ngram index");
      out_size_ = std::max(out_size_, v + 1);
    }
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 1 || !in[0].present()) return invalid("expected one input");
    if (in[0].dtype != DType::kInt32 && in[0].dtype != DType::kInt64)
      return unsupported_error("only int32/int64 tokens");
    const Shape& s = in[0].shape;
    if (s.rank() != 1 && s.rank() != 2) return invalid("input must be [C] or [B, C]");
    ReshapeResult rr;
    rr.outputs.push_back(
        OutputInfo{DType::kFloat32, s.rank() == 1 ? Shape{out_size_} : Shape{s[0], out_size_}, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const int64_t rows = x.shape().rank() == 1 ? 1 : x.shape()[0];
    const int64_t cols = x.shape().back();
    float* y = ctx.outputs[0].data<float>();
    std::fill(y, y + ctx.outputs[0].numel(), 0.f);
    std::vector<int64_t> gram;
    for (int64_t r = 0; r < rows; ++r) {
      float* row = y + r * out_size_;
      int64_t first_n = min_n_;
      for (int64_t dist = 1; dist <= max_skip_ + 1; ++dist) {
        for (int64_t start = 0; start < cols; ++start) {
          gram.clear();
          for (int64_t n = 1; n <= max_n_; ++n) {
            const int64_t pos = start + (n - 1) * dist;
            if (pos >= cols) break;
            gram.push_back(load_index(x, r * cols + pos));
            if (n < first_n) continue;
            auto it = grams_.find(gram);
            if (it != grams_.end()) row[indexes_[static_cast<size_t>(it->second)]] += 1.f;
          }
        }
        // Unigrams do not depend on the skip distance: count them once.
        if (first_n == 1 && ++first_n > max_n_) break;
      }
      // Weights are indexed by output position, as ONNX Runtime applies them.
      for (int64_t o = 0; o < out_size_ && mode_ != 0; ++o) {
        const float w = o < static_cast<int64_t>(weights_.size()) ? weights_[static_cast<size_t>(o)] : 1.f;
        row[o] = mode_ == 1 ? (row[o] > 0 ? w : 0.f) : row[o] * w;
      }
    }
    return ok_status();
  }

 private:
  int64_t min_n_ = 1, max_n_ = 1, max_skip_ = 0, out_size_ = 0;
  int mode_ = 0;
  std::vector<int64_t> indexes_;
  std::vector<float> weights_;
  std::map<std::vector<int64_t>, int64_t> grams_;
};

}  // namespace

Status register_signal(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add_typed_def(reg, "DFT", 17, DType::kUndefined, make_factory<DftKernel>()));
  return add_typed_def(reg, "TfIdfVectorizer", 9, DType::kUndefined, make_factory<TfIdfKernel>());
}

}  // namespace streamline::ops::cpu
