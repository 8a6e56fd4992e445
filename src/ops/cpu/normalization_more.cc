// GroupNormalization (opset 18: scale and bias per group; opset 21: per channel, stash_type),
// LpNormalization (p = 1 or 2 along one axis) and BatchNormalization in training mode (batch
// statistics, updated running mean and variance). Floating dtypes; statistics accumulate in double
// (two passes: mean, then the mean of squared deviations).
//
//   GroupNormalization: x [N, C, ...] in G groups of C/G channels; per (n, group)
//     y = (x - mean) / sqrt(var + epsilon) * scale + bias
//   LpNormalization:    y = x / (sum |x|^p)^(1/p) along `axis` (0 where the norm is 0)
//   BatchNormalization training_mode = 1:  per channel over N and the spatial axes
//     y = (x - mean) / sqrt(var + epsilon) * scale + B,
//     running_mean = input_mean * momentum + mean * (1 - momentum)   (likewise the variance)

#include "ops/cpu/normalization_more.h"

#include <cmath>
#include <vector>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"

namespace streamline::ops::cpu {
namespace {

// Every present input floating and of one dtype.
Status check_floats(std::span<const TensorInfo> in, const std::string& desc) {
  for (const TensorInfo& t : in) {
    if (!t.present()) continue;
    if (!is_float_dtype(t.dtype)) return unsupported(desc + ": dtype " + dtype_name(t.dtype));
    if (t.dtype != in[0].dtype)
      return invalid_argument(desc + ": inputs mix " + dtype_name(in[0].dtype) + " and " + dtype_name(t.dtype));
  }
  return ok_status();
}

// Mean and biased variance of n values starting at element `off` of x.
void moments(DType dt, const void* x, int64_t off, int64_t n, double* mean, double* var) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += load_f(dt, x, off + i);
  const double m = n > 0 ? s / static_cast<double>(n) : 0.0;
  double q = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = load_f(dt, x, off + i) - m;
    q += d * d;
  }
  *mean = m;
  *var = n > 0 ? q / static_cast<double>(n) : 0.0;
}

class GroupNormKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;

  Status init(const KernelCreateArgs& a) {
    eps_ = a.node.attr_float("epsilon", 1e-5f);
    groups_ = a.node.attr_int("num_groups", 0);
    if (groups_ < 1) return invalid("num_groups must be >= 1");
    const int64_t stash = a.node.attr_int("stash_type", 1);
    if (stash != 1 && stash != static_cast<int64_t>(DType::kFloat64))
      return unsupported_error("stash_type " + std::to_string(stash));
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 3 || !in[0].present() || !in[1].present() || !in[2].present())
      return invalid("expects X, scale and bias");
    SL_RETURN_IF_ERROR(check_floats(in, desc_));
    const Shape& x = in[0].shape;
    if (x.rank() < 2) return invalid("X must have rank 2 or more");
    const int64_t c = x[1];
    if (c % groups_ != 0)
      return invalid(std::to_string(c) + " channels do not split into " + std::to_string(groups_) + " groups");
    // Opset 18 gives scale and bias per group; 21 per channel.
    const int64_t want = opset_ >= 21 ? c : groups_;
    for (size_t k = 1; k < 3; ++k)
      if (in[k].shape.rank() != 1 || in[k].shape[0] != want)
        return invalid(std::string(k == 1 ? "scale" : "bias") + " has shape " + in[k].shape.to_string() +
                       ", expected [" + std::to_string(want) + "] at opset " + std::to_string(opset_));
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, x, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const Tensor& scale = ctx.inputs[1];
    const Tensor& bias = ctx.inputs[2];
    Tensor& y = ctx.outputs[0];
    const Shape& s = x.shape();
    const int64_t n = s[0], c = s[1], per_group = c / groups_;
    const int64_t spatial = s.rank() > 2 ? x.numel() / std::max<int64_t>(n * c, 1) : 1;
    const int64_t block = per_group * spatial;
    const DType dt = x.dtype();
    const bool per_channel = opset_ >= 21;
#pragma omp parallel for num_threads(omp_threads(ctx.num_threads)) if (x.numel() > 65536) schedule(static)
    for (int64_t t = 0; t < n * groups_; ++t) {
      const int64_t g = t % groups_, off = t * block;
      double mean = 0, var = 0;
      moments(dt, x.raw(), off, block, &mean, &var);
      const double inv = 1.0 / std::sqrt(var + static_cast<double>(eps_));
      for (int64_t k = 0; k < per_group; ++k) {
        const int64_t ch = g * per_group + k;
        const int64_t p = per_channel ? ch : g;
        const double a = load_f(dt, scale.raw(), p) * inv, b = load_f(dt, bias.raw(), p);
        for (int64_t i = 0; i < spatial; ++i) {
          const int64_t e = off + k * spatial + i;
          store_f(dt, y.raw(), e, (load_f(dt, x.raw(), e) - mean) * a + b);
        }
      }
    }
    return ok_status();
  }

 private:
  float eps_ = 1e-5f;
  int64_t groups_ = 1;
};

class LpNormKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;

  Status init(const KernelCreateArgs& a) {
    axis_ = a.node.attr_int("axis", -1);
    p_ = a.node.attr_int("p", 2);
    if (p_ != 1 && p_ != 2) return invalid("p must be 1 or 2, got " + std::to_string(p_));
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 1 || !in[0].present()) return invalid("expects one input");
    SL_RETURN_IF_ERROR(check_floats(in, desc_));
    int64_t axis = 0;
    if (!normalize_axis(axis_, static_cast<int64_t>(in[0].shape.rank()), &axis))
      return invalid("axis " + std::to_string(axis_) + " is out of range");
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, in[0].shape, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    const Shape& s = x.shape();
    int64_t axis = 0;
    normalize_axis(axis_, static_cast<int64_t>(s.rank()), &axis);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= s[static_cast<size_t>(d)];
    for (size_t d = static_cast<size_t>(axis) + 1; d < s.rank(); ++d) inner *= s[d];
    const int64_t len = s[static_cast<size_t>(axis)];
    const DType dt = x.dtype();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * len * inner + i;
        double acc = 0.0;
        for (int64_t k = 0; k < len; ++k) {
          const double v = load_f(dt, x.raw(), base + k * inner);
          acc += p_ == 1 ? std::fabs(v) : v * v;
        }
        const double norm = p_ == 1 ? acc : std::sqrt(acc);
        for (int64_t k = 0; k < len; ++k) {
          const int64_t e = base + k * inner;
          store_f(dt, y.raw(), e, norm == 0 ? 0.0 : load_f(dt, x.raw(), e) / norm);
        }
      }
    return ok_status();
  }

 private:
  int64_t axis_ = -1;
  int64_t p_ = 2;
};

// BatchNormalization with training_mode = 1 (opset 14+): outputs Y and, when asked for, the
// updated running mean and variance.
class BatchNormTrainingKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;

  Status init(const KernelCreateArgs& a) {
    eps_ = a.node.attr_float("epsilon", 1e-5f);
    momentum_ = a.node.attr_float("momentum", 0.9f);
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 5) return invalid("expects X, scale, B, input_mean and input_var");
    for (const TensorInfo& t : in)
      if (!t.present()) return invalid("every input is required");
    SL_RETURN_IF_ERROR(check_floats(in.subspan(0, 1), desc_));
    for (const TensorInfo& t : in.subspan(1))
      if (!is_float_dtype(t.dtype)) return unsupported_error(std::string("dtype ") + dtype_name(t.dtype));
    const Shape& x = in[0].shape;
    if (x.rank() < 2) return invalid("X must have rank 2 or more");
    for (size_t k = 1; k < 5; ++k)
      if (in[k].shape.numel() != x[1])
        return invalid("per-channel inputs must have " + std::to_string(x[1]) + " values");
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, x, Layout::kPlain});
    rr.outputs.push_back(OutputInfo{in[3].dtype, Shape{x[1]}, Layout::kPlain});
    rr.outputs.push_back(OutputInfo{in[4].dtype, Shape{x[1]}, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const Shape& s = x.shape();
    const int64_t n = s[0], c = s[1];
    const int64_t spatial = x.numel() / std::max<int64_t>(n * c, 1);
    const DType dt = x.dtype();
    for (int64_t ch = 0; ch < c; ++ch) {
      double sum = 0.0;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < spatial; ++i) sum += load_f(dt, x.raw(), (b * c + ch) * spatial + i);
      const double count = static_cast<double>(n * spatial);
      const double mean = count > 0 ? sum / count : 0.0;
      double q = 0.0;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < spatial; ++i) {
          const double d = load_f(dt, x.raw(), (b * c + ch) * spatial + i) - mean;
          q += d * d;
        }
      const double var = count > 0 ? q / count : 0.0;
      const double a = load_f(ctx.inputs[1].dtype(), ctx.inputs[1].raw(), ch) / std::sqrt(var + eps_);
      const double bias = load_f(ctx.inputs[2].dtype(), ctx.inputs[2].raw(), ch);
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < spatial; ++i) {
          const int64_t e = (b * c + ch) * spatial + i;
          store_f(dt, ctx.outputs[0].raw(), e, (load_f(dt, x.raw(), e) - mean) * a + bias);
        }
      const double m = momentum_;
      if (ctx.outputs.size() > 1 && ctx.outputs[1].defined())
        store_f(ctx.outputs[1].dtype(), ctx.outputs[1].raw(), ch,
                load_f(ctx.inputs[3].dtype(), ctx.inputs[3].raw(), ch) * m + mean * (1 - m));
      if (ctx.outputs.size() > 2 && ctx.outputs[2].defined())
        store_f(ctx.outputs[2].dtype(), ctx.outputs[2].raw(), ch,
                load_f(ctx.inputs[4].dtype(), ctx.inputs[4].raw(), ch) * m + var * (1 - m));
    }
    return ok_status();
  }

 private:
  float eps_ = 1e-5f;
  float momentum_ = 0.9f;
};

}  // namespace

Result<std::unique_ptr<Kernel>> make_batch_norm_training(const KernelCreateArgs& args) {
  if (args.node.opset < 14) return invalid_argument(args.node.describe() + ": training_mode needs opset 14 or later");
  return make_factory<BatchNormTrainingKernel>()(args);
}

Status register_normalization_more(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add_typed_def(reg, "GroupNormalization", 18, DType::kUndefined, make_factory<GroupNormKernel>()));
  return add_typed_def(reg, "LpNormalization", 1, DType::kUndefined, make_factory<LpNormKernel>());
}

}  // namespace streamline::ops::cpu
