// Reference NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: the spec's formulas as plain loops
// in double, one pass per step (log-softmax of the whole tensor, gather, weight, reduce).

#include <cmath>
#include <vector>

#include "ops/reference/ref_math_util.h"
#include "ops/reference/reference.h"

namespace streamline::ops::reference {
namespace {

using math_util::prefix;
using math_util::read_f;
using math_util::read_i;
using math_util::write_f;

class RefLossKernel final : public Kernel {
 public:
  RefLossKernel(const graph::Node& node, bool softmax) : node_(node), softmax_(softmax) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 2 || in[0].shape.rank() < 2) return invalid_argument(prefix(node_) + "bad inputs");
    const std::string r = node_.attr_string("reduction", "mean");
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, r == "none" ? in[1].shape : Shape{}, Layout::kPlain});
    if (node_.outputs.size() > 1) rr.outputs.push_back(OutputInfo{in[0].dtype, in[0].shape, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const Tensor& t = ctx.inputs[1];
    const bool has_w = ctx.inputs.size() > 2 && ctx.inputs[2].defined();
    const int64_t n = x.shape()[0], c = x.shape()[1];
    const int64_t d = x.numel() / std::max<int64_t>(1, n * c);
    // Step 1: the log-probabilities (the input itself for NegativeLogLikelihoodLoss).
    std::vector<double> lp(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) lp[static_cast<size_t>(i)] = read_f(x, i);
    if (softmax_) {
      for (int64_t b = 0; b < n; ++b)
        for (int64_t k = 0; k < d; ++k) {
          double mx = -INFINITY;
          for (int64_t j = 0; j < c; ++j) mx = std::max(mx, lp[static_cast<size_t>((b * c + j) * d + k)]);
          double s = 0;
          for (int64_t j = 0; j < c; ++j) s += std::exp(lp[static_cast<size_t>((b * c + j) * d + k)] - mx);
          for (int64_t j = 0; j < c; ++j) {
            double& v = lp[static_cast<size_t>((b * c + j) * d + k)];
            v = v - mx - std::log(s);
          }
        }
      if (ctx.outputs.size() > 1 && ctx.outputs[1].defined())
        for (int64_t i = 0; i < x.numel(); ++i) write_f(ctx.outputs[1], i, lp[static_cast<size_t>(i)]);
    }
    // Step 2: gather the target's entry and weight it.
    const bool has_ii = node_.has_attr("ignore_index");
    const int64_t ii = node_.attr_int("ignore_index", 0);
    std::vector<double> loss(static_cast<size_t>(n * d)), w(static_cast<size_t>(n * d));
    for (int64_t b = 0; b < n; ++b)
      for (int64_t k = 0; k < d; ++k) {
        const int64_t label = read_i(t, b * d + k);
        const size_t o = static_cast<size_t>(b * d + k);
        if (has_ii && label == ii) continue;
        if (label < 0 || label >= c) return invalid_argument(prefix(node_) + "target out of range");
        w[o] = has_w ? read_f(ctx.inputs[2], label) : 1.0;
        loss[o] = -lp[static_cast<size_t>((b * c + label) * d + k)] * w[o];
      }
    // Step 3: reduce.
    const std::string r = node_.attr_string("reduction", "mean");
    Tensor& y = ctx.outputs[0];
    if (r == "none") {
      for (size_t i = 0; i < loss.size(); ++i) write_f(y, static_cast<int64_t>(i), loss[i]);
      return ok_status();
    }
    double sum = 0, wsum = 0;
    for (size_t i = 0; i < loss.size(); ++i) {
      sum += loss[i];
      wsum += w[i];
    }
    if (r == "mean") sum = (has_w || has_ii) ? sum / wsum : sum / static_cast<double>(loss.size());
    write_f(y, 0, sum);
    return ok_status();
  }

 private:
  graph::Node node_;
  bool softmax_;
};

KernelFactory factory(bool softmax) {
  return [softmax](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<RefLossKernel>(a.node, softmax));
  };
}

}  // namespace

Status register_loss(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(math_util::add_ref(reg, "NegativeLogLikelihoodLoss", 12, factory(false)));
  return math_util::add_ref(reg, "SoftmaxCrossEntropyLoss", 12, factory(true));
}

}  // namespace streamline::ops::reference
