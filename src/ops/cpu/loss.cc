// Loss operators: NegativeLogLikelihoodLoss (opset 12/13) and SoftmaxCrossEntropyLoss (opset 12/13).
//
// Both see the input as [N, C, D] with D the product of the dimensions after C, and the target as
// [N, D]. The per-element loss is -input[n, target[n, d], d] (after a log-softmax over C for
// SoftmaxCrossEntropyLoss), scaled by weight[target] when a weight is given; a target equal to
// `ignore_index` gives loss 0 and weight 0. reduction "none" keeps the target's shape, "sum" adds,
// "mean" divides the sum by the sum of the weights used (the element count when unweighted).
// Arithmetic is in double for every input dtype, so float16 inputs lose nothing in the sums.

#include <cmath>
#include <limits>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"

namespace streamline::ops::cpu {
namespace {

enum class Reduction { kNone, kSum, kMean };

class LossKernel final : public DataKernel {
 public:
  LossKernel(const graph::Node& node, bool softmax)
      : DataKernel(node), softmax_(softmax), outputs_(node.outputs.size()) {}

  Status init(const KernelCreateArgs& a) {
    const std::string r = a.node.attr_string("reduction", "mean");
    if (r == "none")
      reduction_ = Reduction::kNone;
    else if (r == "sum")
      reduction_ = Reduction::kSum;
    else if (r == "mean")
      reduction_ = Reduction::kMean;
    else
      return invalid("unknown reduction '" + r + "'");
    has_ignore_ = a.node.has_attr("ignore_index");
    ignore_ = a.node.attr_int("ignore_index", 0);
    if (outputs_ > (softmax_ ? 2u : 1u)) return invalid("too many outputs");
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 2 || !in[0].present() || !in[1].present()) return invalid("expected input and target");
    const TensorInfo& x = in[0];
    const TensorInfo& t = in[1];
    if (!is_float_dtype(x.dtype)) return unsupported_error(std::string("input dtype ") + dtype_name(x.dtype));
    if (t.dtype != DType::kInt32 && t.dtype != DType::kInt64) return invalid("target must be int32 or int64");
    if (x.shape.rank() < 2) return invalid("input must have rank >= 2, got " + x.shape.to_string());
    if (t.shape.rank() + 1 != x.shape.rank()) return invalid("target rank must be input rank - 1");
    for (size_t i = 0; i < t.shape.rank(); ++i) {
      const size_t xi = i == 0 ? 0 : i + 1;
      if (t.shape[i] != x.shape[xi])
        return invalid("target shape " + t.shape.to_string() + " does not match input " + x.shape.to_string());
    }
    if (in.size() > 2 && in[2].present()) {
      if (in[2].dtype != x.dtype) return invalid("weight dtype differs from the input's");
      if (in[2].shape.rank() != 1 || in[2].shape[0] != x.shape[1])
        return invalid("weight must have shape [C] = [" + std::to_string(x.shape[1]) + "]");
    }
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{x.dtype, reduction_ == Reduction::kNone ? t.shape : Shape{}, Layout::kPlain});
    if (outputs_ > 1) rr.outputs.push_back(OutputInfo{x.dtype, x.shape, Layout::kPlain});
    const int64_t nd = t.shape.numel();
    rr.workspace_bytes = static_cast<size_t>(2 * nd) * sizeof(double);
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const Tensor& target = ctx.inputs[1];
    const Tensor* weight = ctx.inputs.size() > 2 && ctx.inputs[2].defined() ? &ctx.inputs[2] : nullptr;
    Tensor* log_prob = ctx.outputs.size() > 1 && ctx.outputs[1].defined() ? &ctx.outputs[1] : nullptr;
    const DType dt = x.dtype();
    const int64_t n_batch = x.shape()[0], classes = x.shape()[1];
    const int64_t inner = x.shape().numel() / std::max<int64_t>(1, n_batch * classes);
    const int64_t cols = n_batch * inner;
    double* loss = static_cast<double*>(ctx.workspace);
    double* wsum = loss + cols;
    bool bad_target = false;
    int64_t bad_value = 0;

    math::parallel_chunks(cols, 256, ctx.num_threads, [&](int64_t b, int64_t e) {
      for (int64_t col = b; col < e; ++col) {
        const int64_t n = col / inner, d = col % inner;
        const int64_t base = n * classes * inner + d;
        double lse = 0.0, mx = 0.0;
        if (softmax_) {
          mx = -std::numeric_limits<double>::infinity();
          for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, load_f(dt, x.raw(), base + c * inner));
          double s = 0.0;
          for (int64_t c = 0; c < classes; ++c) s += std::exp(load_f(dt, x.raw(), base + c * inner) - mx);
          lse = std::log(s);
          if (log_prob)
            for (int64_t c = 0; c < classes; ++c)
              store_f(dt, log_prob->raw(), base + c * inner, (load_f(dt, x.raw(), base + c * inner) - mx) - lse);
        }
        const int64_t t = load_index(target, col);
        if (has_ignore_ && t == ignore_) {
          loss[col] = 0.0;
          wsum[col] = 0.0;
          continue;
        }
        if (t < 0 || t >= classes) {
#pragma omp critical(sl_loss_bad_target)
          {
            bad_target = true;
            bad_value = t;
          }
          loss[col] = 0.0;
          wsum[col] = 0.0;
          continue;
        }
        double v = load_f(dt, x.raw(), base + t * inner);
        if (softmax_) v = (v - mx) - lse;
        const double w = weight ? load_f(dt, weight->raw(), t) : 1.0;
        loss[col] = -v * w;
        wsum[col] = w;
      }
    });
    if (bad_target)
      return invalid("target value " + std::to_string(bad_value) + " is outside [0, " + std::to_string(classes) + ")");

    Tensor& y = ctx.outputs[0];
    if (reduction_ == Reduction::kNone) {
      for (int64_t i = 0; i < cols; ++i) store_f(dt, y.raw(), i, loss[i]);
      return ok_status();
    }
    double total = 0.0, weights = 0.0;
    for (int64_t i = 0; i < cols; ++i) {
      total += loss[i];
      weights += wsum[i];
    }
    if (reduction_ == Reduction::kMean) {
      const bool weighted = weight != nullptr || has_ignore_;
      total = weighted ? total / weights : total / static_cast<double>(cols);
    }
    store_f(dt, y.raw(), 0, total);
    return ok_status();
  }

 private:
  bool softmax_;
  size_t outputs_;
  Reduction reduction_ = Reduction::kMean;
  bool has_ignore_ = false;
  int64_t ignore_ = 0;
};

KernelFactory loss_factory(bool softmax) {
  return [softmax](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    auto k = std::make_unique<LossKernel>(a.node, softmax);
    SL_RETURN_IF_ERROR(k->init(a));
    return std::unique_ptr<Kernel>(std::move(k));
  };
}

}  // namespace

Status register_loss(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add_typed_def(reg, "NegativeLogLikelihoodLoss", 12, DType::kUndefined, loss_factory(false)));
  return add_typed_def(reg, "SoftmaxCrossEntropyLoss", 12, DType::kUndefined, loss_factory(true));
}

}  // namespace streamline::ops::cpu
