// Reference Adagrad, Momentum and Adam (ai.onnx.preview.training): the spec's update rules written
// per element in double, one group at a time.

#include <cmath>

#include "ops/reference/ref_math_util.h"
#include "ops/reference/reference.h"

namespace streamline::ops::reference {
namespace {

using math_util::read_f;
using math_util::write_f;

class RefOptimizerKernel final : public Kernel {
 public:
  explicit RefOptimizerKernel(const graph::Node& node) : node_(node) {}

  size_t per_group() const { return node_.op_type == "Adam" ? 4 : 3; }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    const size_t n = (in.size() - 2) / per_group();
    ReshapeResult rr;
    for (size_t s = 0; s + 1 < per_group(); ++s)
      for (size_t g = 0; g < n; ++g) rr.outputs.push_back({in[2 + g].dtype, in[2 + g].shape});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const std::string& op = node_.op_type;
    const size_t n = (ctx.inputs.size() - 2) / per_group();
    const double r = read_f(ctx.inputs[0], 0), t = read_f(ctx.inputs[1], 0);
    const double norm = node_.attr_float("norm_coefficient", 0.f);
    for (size_t g = 0; g < n; ++g) {
      const Tensor& x = ctx.inputs[2 + g];
      for (int64_t i = 0; i < x.numel(); ++i) {
        const double xv = read_f(x, i);
        const double grad = norm * xv + read_f(ctx.inputs[2 + n + g], i);
        const double s1 = read_f(ctx.inputs[2 + 2 * n + g], i);
        if (op == "Adagrad") {
          const double decay = node_.attr_float("decay_factor", 0.f), eps = node_.attr_float("epsilon", 0.f);
          const double h = s1 + grad * grad;
          const double lr = r / (1 + t * decay);
          write_f(ctx.outputs[g], i, xv - lr * grad / (std::sqrt(h) + eps));
          write_f(ctx.outputs[n + g], i, h);
        } else if (op == "Momentum") {
          const double alpha = node_.attr_float("alpha", 0.f), beta = node_.attr_float("beta", 0.f);
          const double v = alpha * s1 + (t > 0 ? beta : 1.0) * grad;
          const bool nesterov = node_.attr_string("mode", "standard") == "nesterov";
          write_f(ctx.outputs[g], i, nesterov ? xv - r * (grad + alpha * v) : xv - r * v);
          write_f(ctx.outputs[n + g], i, v);
        } else {
          const double alpha = node_.attr_float("alpha", 0.9f), beta = node_.attr_float("beta", 0.999f);
          const double eps = node_.attr_float("epsilon", 1e-6f), post = node_.attr_float("norm_coefficient_post", 0.f);
          const double h0 = read_f(ctx.inputs[2 + 3 * n + g], i);
          const double v = alpha * s1 + (1 - alpha) * grad;
          const double h = beta * h0 + (1 - beta) * grad * grad;
          double lr = r;
          if (t > 0) lr = r * std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t));
          write_f(ctx.outputs[g], i, (1 - post) * (xv - lr * v / (std::sqrt(h) + eps)));
          write_f(ctx.outputs[n + g], i, v);
          write_f(ctx.outputs[2 * n + g], i, h);
        }
      }
    }
    return ok_status();
  }

 private:
  graph::Node node_;
};

}  // namespace

Status register_optimizer(KernelRegistry& reg) {
  for (const char* op : {"Adagrad", "Momentum", "Adam"}) {
    KernelDef def;
    def.op = op;
    def.domain = "ai.onnx.preview.training";
    def.since_version = 1;
    def.provider = "reference";
    def.create = [](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<RefOptimizerKernel>(a.node));
    };
    SL_RETURN_IF_ERROR(reg.add(std::move(def)));
  }
  return ok_status();
}

}  // namespace streamline::ops::reference
