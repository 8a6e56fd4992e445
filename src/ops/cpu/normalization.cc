// BatchNormalization (inference), InstanceNormalization, LRN, LayerNormalization (opset 17, and
// streamline.LayerNormalization at any opset), RMSNormalization (opset 23) and
// MeanVarianceNormalization. All take plain NC... tensors; statistics are two-pass (mean, then the
// mean of squared deviations) for accuracy. RMSNormalization is LayerNormalization's kernel
// without the mean: y = x / sqrt(mean(x^2) + epsilon) * Scale over the dims from `axis`.

#include <cmath>
#include <cstring>

#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"
#include "ops/cpu/math_reduce.h"
#include "ops/cpu/math_vec.h"
#include "ops/cpu/normalization_more.h"

namespace streamline::ops::cpu::math {
namespace {

Status expect_float_inputs(const graph::Node& node, std::span<const TensorInfo> inputs, size_t min, size_t max) {
  if (inputs.size() < min || inputs.size() > max)
    return invalid_argument(node_prefix(node) + "expected " + std::to_string(min) + " to " + std::to_string(max) +
                            " inputs, got " + std::to_string(inputs.size()));
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k].present()) {
      if (k < min) return invalid_argument(node_prefix(node) + "input " + std::to_string(k) + " is missing");
      continue;
    }
    SL_RETURN_IF_ERROR(check_dtype(node, inputs[k].dtype, {DType::kFloat32}));
  }
  return ok_status();
}

Status expect_channel_vector(const graph::Node& node, const TensorInfo& t, int64_t c, const char* what) {
  if (t.shape.numel() != c)
    return invalid_argument(node_prefix(node) + what + " has shape " + t.shape.to_string() + ", expected " +
                            std::to_string(c) + " elements (one per channel)");
  return ok_status();
}

// Count of output tensors the node asks for (omitted trailing optional outputs excluded).
size_t requested_outputs(const graph::Node& node) {
  size_t n = 0;
  for (size_t k = 0; k < node.outputs.size(); ++k)
    if (node.outputs[k] != graph::kNoValue) n = k + 1;
  return std::max<size_t>(n, 1);
}

class BatchNormKernel final : public Kernel {
 public:
  explicit BatchNormKernel(const graph::Node& node) : node_(node), eps_(node.attr_float("epsilon", 1e-5f)) {}

  Status validate() const {
    if (node_.attr_int("training_mode", 0) != 0)
      return unsupported(node_prefix(node_) + "training_mode=1 is not supported (inference only)");
    if (node_.opset < 9 && node_.attr_int("spatial", 1) == 0)
      return unsupported(node_prefix(node_) + "spatial=0 is not supported");
    if (requested_outputs(node_) > 1)
      return unsupported(node_prefix(node_) + "the training outputs (running mean/var, saved stats) are not supported");
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    SL_RETURN_IF_ERROR(expect_float_inputs(node_, inputs, 5, 5));
    const Shape& s = inputs[0].shape;
    if (s.rank() < 2)
      return invalid_argument(node_prefix(node_) + "input rank must be at least 2, got " + s.to_string());
    for (size_t k = 1; k < 5; ++k) {
      static const char* kNames[] = {"", "scale", "B", "mean", "var"};
      SL_RETURN_IF_ERROR(expect_channel_vector(node_, inputs[k], s[1], kNames[k]));
    }
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{DType::kFloat32, s, Layout::kPlain});
    rr.workspace_bytes = 2 * static_cast<size_t>(s[1]) * sizeof(float);
    rr.inplace = {0};
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Shape& s = ctx.inputs[0].shape();
    const int64_t n = s[0], c = s[1], sp = s.stride(1);
    auto* a = static_cast<float*>(ctx.workspace);
    float* b = a + c;
    const float* scale = ctx.inputs[1].data<float>();
    const float* bias = ctx.inputs[2].data<float>();
    const float* mean = ctx.inputs[3].data<float>();
    const float* var = ctx.inputs[4].data<float>();
    // y = x * a + b with a = scale / sqrt(var + eps), b = bias - mean * a.
    for (int64_t k = 0; k < c; ++k) {
      a[k] = scale[k] / std::sqrt(var[k] + eps_);
      b[k] = bias[k] - mean[k] * a[k];
    }
    const float* x = ctx.inputs[0].data<float>();
    float* y = ctx.outputs[0].data<float>();
    if (sp == 1) {
      parallel_chunks(n, std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(c, 1)), ctx.num_threads,
                      [&](int64_t lo, int64_t hi) {
                        for (int64_t i = lo; i < hi; ++i)
                          for (int64_t k = 0; k < c; ++k) y[i * c + k] = vec::fmadd(x[i * c + k], a[k], b[k]);
                      });
      return ok_status();
    }
    parallel_chunks(n * c, std::max<int64_t>(1, kCheapGrain / sp), ctx.num_threads, [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const float ak = a[r % c], bk = b[r % c];
        const float* xr = x + r * sp;
        float* yr = y + r * sp;
        for (int64_t i = 0; i < sp; ++i) yr[i] = vec::fmadd(xr[i], ak, bk);
      }
    });
    return ok_status();
  }

 private:
  graph::Node node_;
  float eps_;
};

// Mean and 1/sqrt(var + eps) of n contiguous floats.
void row_stats(const float* x, int64_t n, float eps, float* mean_out, float* inv_out) {
  const float mean = n > 0 ? vec::reduce_sum(x, n) / static_cast<float>(n) : 0.f;
  const float var =
      n > 0 ? vec::reduce_sum_map(x, n, [mean](float v) { return (v - mean) * (v - mean); }) / static_cast<float>(n)
            : 0.f;
  *mean_out = mean;
  *inv_out = 1.f / std::sqrt(var + eps);
}

class InstanceNormKernel final : public Kernel {
 public:
  explicit InstanceNormKernel(const graph::Node& node) : node_(node), eps_(node.attr_float("epsilon", 1e-5f)) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    SL_RETURN_IF_ERROR(expect_float_inputs(node_, inputs, 3, 3));
    const Shape& s = inputs[0].shape;
    if (s.rank() < 3)
      return invalid_argument(node_prefix(node_) + "input rank must be at least 3, got " + s.to_string());
    SL_RETURN_IF_ERROR(expect_channel_vector(node_, inputs[1], s[1], "scale"));
    SL_RETURN_IF_ERROR(expect_channel_vector(node_, inputs[2], s[1], "B"));
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{DType::kFloat32, s, Layout::kPlain});
    rr.inplace = {0};
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Shape& s = ctx.inputs[0].shape();
    const int64_t c = s[1], sp = s.stride(1), rows = s[0] * c;
    const float* x = ctx.inputs[0].data<float>();
    const float* scale = ctx.inputs[1].data<float>();
    const float* bias = ctx.inputs[2].data<float>();
    float* y = ctx.outputs[0].data<float>();
    parallel_chunks(rows, std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(sp, 1)), ctx.num_threads,
                    [&](int64_t lo, int64_t hi) {
                      for (int64_t r = lo; r < hi; ++r) {
                        float mean, inv;
                        row_stats(x + r * sp, sp, eps_, &mean, &inv);
                        const float a = inv * scale[r % c];
                        const float b = bias[r % c] - mean * a;
                        const float* xr = x + r * sp;
                        float* yr = y + r * sp;
                        for (int64_t i = 0; i < sp; ++i) yr[i] = vec::fmadd(xr[i], a, b);
                      }
                    });
    return ok_status();
  }

 private:
  graph::Node node_;
  float eps_;
};

class LrnKernel final : public Kernel {
 public:
  explicit LrnKernel(const graph::Node& node)
      : node_(node),
        alpha_(node.attr_float("alpha", 1e-4f)),
        beta_(node.attr_float("beta", 0.75f)),
        bias_(node.attr_float("bias", 1.f)),
        size_(node.attr_int("size", 0)) {}

  Status validate() const {
    if (size_ <= 0) return invalid_argument(node_prefix(node_) + "size must be a positive integer");
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    SL_RETURN_IF_ERROR(expect_float_inputs(node_, inputs, 1, 1));
    if (inputs[0].shape.rank() < 3)
      return invalid_argument(node_prefix(node_) + "input rank must be at least 3, got " + inputs[0].shape.to_string());
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{DType::kFloat32, inputs[0].shape, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Shape& s = ctx.inputs[0].shape();
    const int64_t c = s[1], sp = s.stride(1), rows = s[0] * c;
    const float* x = ctx.inputs[0].data<float>();
    float* y = ctx.outputs[0].data<float>();
    const int64_t before = (size_ - 1) / 2, after = size_ / 2;  // floor and ceil of (size-1)/2
    const float k = alpha_ / static_cast<float>(size_), bias = bias_, nbeta = -beta_;
    parallel_chunks(rows, std::max<int64_t>(1, kExpensiveGrain / std::max<int64_t>(sp * size_, 1)), ctx.num_threads,
                    [&](int64_t lo, int64_t hi) {
                      for (int64_t r = lo; r < hi; ++r) {
                        const int64_t ch = r % c, first = r - ch;  // row of channel 0 of this batch item
                        float* yr = y + r * sp;
                        // 1. Sum of squares over the channel window, accumulated in the output row.
                        for (int64_t i = 0; i < sp; ++i) yr[i] = 0.f;
                        const int64_t c_lo = std::max<int64_t>(0, ch - before), c_hi = std::min(c - 1, ch + after);
                        for (int64_t j = c_lo; j <= c_hi; ++j) {
                          const float* xj = x + (first + j) * sp;
                          for (int64_t i = 0; i < sp; ++i) yr[i] += xj[i] * xj[i];
                        }
                        // 2. y = x * (bias + alpha/size * sum)^-beta.
                        const float* xr = x + r * sp;
                        for (int64_t i = 0; i < sp; ++i)
                          yr[i] = xr[i] * vec::exp(nbeta * vec::log(vec::fmadd(k, yr[i], bias)));
                      }
                    });
    return ok_status();
  }

 private:
  graph::Node node_;
  float alpha_, beta_, bias_;
  int64_t size_;
};

// LayerNormalization, and RMSNormalization when the node is one (no B, no statistics outputs).
class LayerNormKernel final : public Kernel {
 public:
  explicit LayerNormKernel(const graph::Node& node)
      : node_(node),
        axis_(node.attr_int("axis", -1)),
        eps_(node.attr_float("epsilon", 1e-5f)),
        rms_(node.op_type == "RMSNormalization") {}

  Status validate() const {
    if (!rms_) return ok_status();
    // stash_type: the precision of the statistics; float32 is what this kernel computes in.
    const int64_t stash = node_.attr_int("stash_type", 1);
    if (stash != static_cast<int64_t>(DType::kFloat32))
      return unsupported(node_prefix(node_) + "stash_type " + std::to_string(stash) +
                         " is not supported (1, float32, is)");
    if (node_.inputs.size() > 2)
      return invalid_argument(node_prefix(node_) + "RMSNormalization takes X and Scale only");
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    SL_RETURN_IF_ERROR(expect_float_inputs(node_, inputs, 2, 3));
    const Shape& s = inputs[0].shape;
    const int64_t rank = static_cast<int64_t>(s.rank());
    SL_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(axis_, rank, node_.describe()));
    Shape norm;
    for (int64_t d = axis; d < rank; ++d) norm.push_back(s[static_cast<size_t>(d)]);
    for (size_t k = 1; k < inputs.size(); ++k) {
      if (!inputs[k].present()) continue;
      const char* what = k == 1 ? "Scale" : "B";
      Shape b;
      if (!broadcast_shapes(norm, inputs[k].shape, &b))
        return invalid_argument(node_prefix(node_) + what + " shape " + inputs[k].shape.to_string() +
                                " does not broadcast to the normalized shape " + norm.to_string());
      // Leading dims beyond the normalized ones must be 1: a Scale that varies per row is not supported.
      for (size_t d = 0; d + norm.rank() < b.rank(); ++d)
        if (b[d] != 1)
          return unsupported(node_prefix(node_) + what + " shape " + inputs[k].shape.to_string() +
                             " varies outside the normalized axes");
    }
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{DType::kFloat32, s, Layout::kPlain});
    Shape stat = s;
    for (int64_t d = axis; d < rank; ++d) stat[static_cast<size_t>(d)] = 1;
    for (size_t k = 1; k < (rms_ ? 1 : std::min<size_t>(requested_outputs(node_), 3)); ++k)
      rr.outputs.push_back(OutputInfo{DType::kFloat32, stat, Layout::kPlain});
    rr.workspace_bytes = 2 * static_cast<size_t>(norm.numel()) * sizeof(float);
    rr.inplace.assign(rr.outputs.size(), -1);
    rr.inplace[0] = 0;
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Shape& s = ctx.inputs[0].shape();
    SL_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(axis_, static_cast<int64_t>(s.rank()), node_.describe()));
    Shape norm;
    for (size_t d = static_cast<size_t>(axis); d < s.rank(); ++d) norm.push_back(s[d]);
    const int64_t len = norm.numel();
    const int64_t rows = len == 0 ? 0 : s.numel() / len;
    // Scale and B expanded to the normalized shape (usually already that shape: then a plain copy).
    auto* scale = static_cast<float*>(ctx.workspace);
    float* bias = scale + len;
    expand(ctx.inputs[1], norm, scale, 1.f);
    const bool has_b = ctx.inputs.size() > 2 && ctx.inputs[2].defined();
    if (has_b)
      expand(ctx.inputs[2], norm, bias, 0.f);
    else
      std::fill(bias, bias + len, 0.f);

    const float* x = ctx.inputs[0].data<float>();
    float* y = ctx.outputs[0].data<float>();
    float* mean_out = ctx.outputs.size() > 1 ? ctx.outputs[1].data<float>() : nullptr;
    float* inv_out = ctx.outputs.size() > 2 ? ctx.outputs[2].data<float>() : nullptr;
    parallel_chunks(rows, std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(len, 1)), ctx.num_threads,
                    [&](int64_t lo, int64_t hi) {
                      for (int64_t r = lo; r < hi; ++r) {
                        const float* xr = x + r * len;
                        float* yr = y + r * len;
                        if (rms_) {
                          const float ms = vec::reduce_sum_map(xr, len, [](float v) { return v * v; }) /
                                           static_cast<float>(std::max<int64_t>(len, 1));
                          const float inv = 1.f / std::sqrt(ms + eps_);
                          for (int64_t i = 0; i < len; ++i) yr[i] = xr[i] * inv * scale[i];
                          continue;
                        }
                        float mean, inv;
                        row_stats(xr, len, eps_, &mean, &inv);
                        for (int64_t i = 0; i < len; ++i) yr[i] = vec::fmadd((xr[i] - mean) * inv, scale[i], bias[i]);
                        if (mean_out) mean_out[r] = mean;
                        if (inv_out) inv_out[r] = inv;
                      }
                    });
    return ok_status();
  }

 private:
  // Writes t broadcast to `shape` (t right-aligned, dims 1 or equal) into dst.
  static void expand(const Tensor& t, const Shape& shape, float* dst, float fill) {
    const int64_t n = shape.numel();
    if (t.numel() == n) {
      std::memcpy(dst, t.raw(), static_cast<size_t>(n) * sizeof(float));
      return;
    }
    const float* src = t.data<float>();
    Shape ts;  // t's shape without the leading 1s reshape() allowed beyond the normalized rank
    const size_t extra = t.shape().rank() > shape.rank() ? t.shape().rank() - shape.rank() : 0;
    for (size_t d = extra; d < t.shape().rank(); ++d) ts.push_back(t.shape()[d]);
    for (int64_t i = 0; i < n; ++i) {
      int64_t rem = i, off = 0, stride = 1;
      for (size_t d = shape.rank(); d-- > 0;) {
        const int64_t coord = rem % shape[d];
        rem /= shape[d];
        const size_t lead = shape.rank() - ts.rank();
        if (d < lead) continue;
        const int64_t td = ts[d - lead];
        if (td != 1) off += coord * stride;
        stride *= td;
      }
      dst[i] = t.numel() == 0 ? fill : src[off];
    }
  }

  graph::Node node_;
  int64_t axis_;
  float eps_;
  bool rms_;
};

// (x - mean) / (std + 1e-9) with statistics over `axes` (default N, H, W), as the ONNX function.
class MvnKernel final : public Kernel {
 public:
  explicit MvnKernel(const graph::Node& node) : node_(node), axes_(node.attr_ints("axes", {0, 2, 3})) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    SL_RETURN_IF_ERROR(expect_float_inputs(node_, inputs, 1, 1));
    const int64_t rank = static_cast<int64_t>(inputs[0].shape.rank());
    if (rank > 32) return unsupported(node_prefix(node_) + "rank above 32");
    SL_ASSIGN_OR_RETURN(std::vector<int64_t> axes, normalize_axes(node_, axes_, rank));
    std::vector<bool> reduced(static_cast<size_t>(rank), false);
    for (int64_t a : axes) reduced[static_cast<size_t>(a)] = true;
    auto plan = std::make_shared<ReducePlan>(make_reduce_plan(inputs[0].shape, reduced));
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{DType::kFloat32, inputs[0].shape, Layout::kPlain});
    rr.inplace = {0};
    rr.state = std::move(plan);
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const auto* p = static_cast<const ReducePlan*>(ctx.state);
    if (!p) return internal_error(node_prefix(node_) + "run without reshape state");
    const float* x = ctx.inputs[0].data<float>();
    float* y = ctx.outputs[0].data<float>();
    const bool inner = p->inner_reduced();
    const int64_t run = inner ? p->inner() : 1;
    const float count = static_cast<float>(p->reduce_count);
    // Each kept element (a whole inner row when the inner dims are kept) is independent.
    const int64_t width = inner ? 1 : p->inner();
    const int64_t outer = p->out_numel / std::max<int64_t>(width, 1);
    parallel_chunks(outer, 1, ctx.num_threads, [&](int64_t lo, int64_t hi) {
      for (int64_t o = lo; o < hi; ++o) {
        for (int64_t j = 0; j < width; ++j) {
          const int64_t base = kept_offset(*p, o, !inner) + j;
          float sum = 0.f;
          for_each_reduced(*p, inner, [&](int64_t off) {
            for (int64_t i = 0; i < run; ++i) sum += x[base + off + i];
          });
          const float mean = sum / count;
          float sq = 0.f;
          for_each_reduced(*p, inner, [&](int64_t off) {
            for (int64_t i = 0; i < run; ++i) sq += (x[base + off + i] - mean) * (x[base + off + i] - mean);
          });
          const float inv = 1.f / (std::sqrt(sq / count) + 1e-9f);
          for_each_reduced(*p, inner, [&](int64_t off) {
            for (int64_t i = 0; i < run; ++i) y[base + off + i] = (x[base + off + i] - mean) * inv;
          });
        }
      }
    });
    return ok_status();
  }

 private:
  graph::Node node_;
  std::vector<int64_t> axes_;
};

template <typename K>
KernelFactory validated_factory() {
  return [](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
    auto k = std::make_unique<K>(args.node);
    if constexpr (requires { k->validate(); }) SL_RETURN_IF_ERROR(k->validate());
    return std::unique_ptr<Kernel>(std::move(k));
  };
}

}  // namespace

}  // namespace streamline::ops::cpu::math

namespace streamline::ops::cpu {

Status register_normalization(KernelRegistry& reg) {
  // Training mode (batch statistics) has its own kernel in normalization_more.cc.
  const KernelFactory inference = math::validated_factory<math::BatchNormKernel>();
  SL_RETURN_IF_ERROR(math::register_ops(reg, {"BatchNormalization"}, 7, INT_MAX,
                                        [inference](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
                                          if (args.node.attr_int("training_mode", 0) != 0)
                                            return make_batch_norm_training(args);
                                          return inference(args);
                                        }));
  SL_RETURN_IF_ERROR(math::register_ops(reg, {"InstanceNormalization"}, 6, INT_MAX,
                                        math::validated_factory<math::InstanceNormKernel>()));
  SL_RETURN_IF_ERROR(math::register_ops(reg, {"LRN"}, 1, INT_MAX, math::validated_factory<math::LrnKernel>()));
  SL_RETURN_IF_ERROR(
      math::register_ops(reg, {"LayerNormalization"}, 17, INT_MAX, math::validated_factory<math::LayerNormKernel>()));
  // The same op at any model opset, as the transformer passes make it from a decomposed LayerNorm.
  KernelDef fused;
  fused.op = "LayerNormalization";
  fused.domain = "streamline";
  fused.since_version = 1;
  fused.device = Device::kCpu;
  fused.dtype = DType::kUndefined;
  fused.provider = "cpu";
  fused.create = math::validated_factory<math::LayerNormKernel>();
  SL_RETURN_IF_ERROR(reg.add(std::move(fused)));
  SL_RETURN_IF_ERROR(
      math::register_ops(reg, {"RMSNormalization"}, 23, INT_MAX, math::validated_factory<math::LayerNormKernel>()));
  return math::register_ops(reg, {"MeanVarianceNormalization"}, 9, INT_MAX, math::validated_factory<math::MvnKernel>());
}

}  // namespace streamline::ops::cpu
