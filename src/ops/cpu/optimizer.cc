// Training-step operators of the ai.onnx.preview.training domain (opset 1): Adagrad, Momentum and
// Adam. Each updates n tensors at once: inputs R (learning rate), T (step count), then n X's, n G's
// and the n (Adagrad, Momentum) or 2n (Adam) state tensors; outputs the new X's then the new states.
//
//   g = norm_coefficient * x + grad
//   Adagrad   h' = h + g^2;  x' = x - R / (1 + T * decay_factor) * g / (sqrt(h') + epsilon)
//   Momentum  v' = alpha * v + (T > 0 ? beta : 1) * g;  x' = x - R * v' (standard)
//                                                     or x - R * (g + alpha * v') (nesterov)
//   Adam      v' = alpha * v + (1 - alpha) * g;  h' = beta * h + (1 - beta) * g^2
//             r = T > 0 ? R * sqrt(1 - beta^T) / (1 - alpha^T) : R
//             x' = (1 - norm_coefficient_post) * (x - r * v' / (sqrt(h') + epsilon))
// float32 and float64; arithmetic in double.

#include <cmath>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"

namespace streamline::ops::cpu {
namespace {

enum class Opt { kAdagrad, kMomentum, kAdam };

constexpr const char* kTrainingDomain = "ai.onnx.preview.training";

class OptimizerKernel final : public DataKernel {
 public:
  OptimizerKernel(const graph::Node& node, Opt opt) : DataKernel(node), opt_(opt) {}

  Status init(const KernelCreateArgs& a) {
    const graph::Node& n = a.node;
    norm_ = n.attr_float("norm_coefficient", 0.f);
    if (opt_ == Opt::kAdagrad) {
      decay_ = n.attr_float("decay_factor", 0.f);
      epsilon_ = n.attr_float("epsilon", 0.f);
    } else if (opt_ == Opt::kMomentum) {
      alpha_ = n.attr_float("alpha", 0.f);
      beta_ = n.attr_float("beta", 0.f);
      const std::string mode = n.attr_string("mode", "standard");
      if (mode != "standard" && mode != "nesterov") return invalid("unknown mode '" + mode + "'");
      nesterov_ = mode == "nesterov";
    } else {
      alpha_ = n.attr_float("alpha", 0.9f);
      beta_ = n.attr_float("beta", 0.999f);
      epsilon_ = n.attr_float("epsilon", 1e-6f);
      norm_post_ = n.attr_float("norm_coefficient_post", 0.f);
    }
    const size_t per = opt_ == Opt::kAdam ? 4 : 3;
    if (n.inputs.size() < 2 + per || (n.inputs.size() - 2) % per != 0)
      return invalid("expected R, T and groups of " + std::to_string(per) + " tensors");
    groups_ = (n.inputs.size() - 2) / per;
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    for (const TensorInfo& t : in)
      if (!t.present()) return invalid("every input is required");
    if (in[0].shape.numel() != 1 || in[1].shape.numel() != 1) return invalid("R and T must be scalars");
    const size_t states = opt_ == Opt::kAdam ? 2 : 1;
    ReshapeResult rr;
    for (size_t s = 0; s <= states; ++s)
      for (size_t g = 0; g < groups_; ++g) {
        const TensorInfo& x = in[2 + g];
        const TensorInfo& t = in[2 + (s + 1) * groups_ + g];  // the gradient, then each state
        if (x.dtype != DType::kFloat32 && x.dtype != DType::kFloat64) return unsupported_error("only float32/float64");
        if (t.shape != x.shape || t.dtype != x.dtype) return invalid("group tensors must share X's shape and dtype");
      }
    for (size_t s = 0; s <= states; ++s)
      for (size_t g = 0; g < groups_; ++g)
        rr.outputs.push_back(OutputInfo{in[2 + g].dtype, in[2 + g].shape, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const double r = load_f(ctx.inputs[0].dtype(), ctx.inputs[0].raw(), 0);
    const double t = load_f(ctx.inputs[1].dtype(), ctx.inputs[1].raw(), 0);
    const size_t n = groups_;
    for (size_t g = 0; g < n; ++g) {
      const Tensor& x = ctx.inputs[2 + g];
      const Tensor& grad = ctx.inputs[2 + n + g];
      const Tensor& s1 = ctx.inputs[2 + 2 * n + g];
      const Tensor* s2 = opt_ == Opt::kAdam ? &ctx.inputs[2 + 3 * n + g] : nullptr;
      Tensor* x_out = output(ctx, g);
      Tensor* s1_out = output(ctx, n + g);
      Tensor* s2_out = opt_ == Opt::kAdam ? output(ctx, 2 * n + g) : nullptr;
      const DType dt = x.dtype();
      for (int64_t i = 0; i < x.numel(); ++i) {
        const double xv = load_f(dt, x.raw(), i);
        const double gv = norm_ * xv + load_f(dt, grad.raw(), i);
        const double a = load_f(dt, s1.raw(), i);
        double x_new = xv, st1 = a, st2 = 0;
        switch (opt_) {
          case Opt::kAdagrad: {
            st1 = a + gv * gv;
            x_new = xv - r / (1.0 + t * decay_) * gv / (std::sqrt(st1) + epsilon_);
            break;
          }
          case Opt::kMomentum: {
            st1 = alpha_ * a + (t > 0 ? beta_ : 1.0) * gv;
            x_new = nesterov_ ? xv - r * (gv + alpha_ * st1) : xv - r * st1;
            break;
          }
          case Opt::kAdam: {
            const double h = load_f(dt, s2->raw(), i);
            st1 = alpha_ * a + (1.0 - alpha_) * gv;
            st2 = beta_ * h + (1.0 - beta_) * gv * gv;
            const double ra = t > 0 ? r * std::sqrt(1.0 - std::pow(beta_, t)) / (1.0 - std::pow(alpha_, t)) : r;
            x_new = (1.0 - norm_post_) * (xv - ra * st1 / (std::sqrt(st2) + epsilon_));
            break;
          }
        }
        if (x_out) store_f(dt, x_out->raw(), i, x_new);
        if (s1_out) store_f(dt, s1_out->raw(), i, st1);
        if (s2_out) store_f(dt, s2_out->raw(), i, st2);
      }
    }
    return ok_status();
  }

 private:
  static Tensor* output(const RunContext& ctx, size_t i) {
    return i < ctx.outputs.size() && ctx.outputs[i].defined() ? &ctx.outputs[i] : nullptr;
  }

  Opt opt_;
  size_t groups_ = 1;
  double norm_ = 0, decay_ = 0, epsilon_ = 0, alpha_ = 0, beta_ = 0, norm_post_ = 0;
  bool nesterov_ = false;
};

KernelFactory optimizer_factory(Opt opt) {
  return [opt](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    auto k = std::make_unique<OptimizerKernel>(a.node, opt);
    SL_RETURN_IF_ERROR(k->init(a));
    return std::unique_ptr<Kernel>(std::move(k));
  };
}

}  // namespace

Status register_optimizer(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(
      add_typed_def(reg, "Adagrad", 1, DType::kUndefined, optimizer_factory(Opt::kAdagrad), kTrainingDomain));
  SL_RETURN_IF_ERROR(
      add_typed_def(reg, "Momentum", 1, DType::kUndefined, optimizer_factory(Opt::kMomentum), kTrainingDomain));
  return add_typed_def(reg, "Adam", 1, DType::kUndefined, optimizer_factory(Opt::kAdam), kTrainingDomain);
}

}  // namespace streamline::ops::cpu
