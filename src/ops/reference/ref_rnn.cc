// Reference RNN, GRU and LSTM: the spec's equations step by step in double, one batch row and one
// gate at a time, with every attribute the CPU kernels accept.

#include <algorithm>
#include <cctype>
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

struct Act {
  std::string name;
  double alpha = 0, beta = 0;
};

double act(const Act& a, double x) {
  const std::string& n = a.name;
  if (n == "relu") return std::max(0.0, x);
  if (n == "tanh") return std::tanh(x);
  if (n == "sigmoid") return 1.0 / (1.0 + std::exp(-x));
  if (n == "affine") return a.alpha * x + a.beta;
  if (n == "leakyrelu") return x >= 0 ? x : a.alpha * x;
  if (n == "thresholdedrelu") return x > a.alpha ? x : 0.0;
  if (n == "scaledtanh") return a.alpha * std::tanh(a.beta * x);
  if (n == "hardsigmoid") return std::min(1.0, std::max(0.0, a.alpha * x + a.beta));
  if (n == "elu") return x >= 0 ? x : a.alpha * (std::exp(x) - 1.0);
  if (n == "softsign") return x / (1.0 + std::fabs(x));
  if (n == "softplus") return std::log(1.0 + std::exp(x));
  return x;
}

class RefRecurrentKernel final : public Kernel {
 public:
  RefRecurrentKernel(const graph::Node& node, int gates) : node_(node), gates_(gates) {}

  int64_t dirs() const { return node_.attr_string("direction", "forward") == "bidirectional" ? 2 : 1; }
  int64_t layout() const { return node_.attr_int("layout", 0); }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 3) return invalid_argument(prefix(node_) + "expected X, W, R");
    const Shape& x = in[0].shape;
    const int64_t h = node_.attr_int("hidden_size", in[2].shape[2]);
    const int64_t seq = layout() == 0 ? x[0] : x[1], batch = layout() == 0 ? x[1] : x[0];
    ReshapeResult rr;
    rr.outputs.push_back(
        OutputInfo{DType::kFloat32, layout() == 0 ? Shape{seq, dirs(), batch, h} : Shape{batch, seq, dirs(), h}});
    for (size_t o = 1; o < node_.outputs.size(); ++o)
      rr.outputs.push_back(
          OutputInfo{DType::kFloat32, layout() == 0 ? Shape{dirs(), batch, h} : Shape{batch, dirs(), h}});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const Tensor& w = ctx.inputs[1];
    const Tensor& r = ctx.inputs[2];
    auto opt = [&](size_t i) -> const Tensor* {
      return i < ctx.inputs.size() && ctx.inputs[i].defined() ? &ctx.inputs[i] : nullptr;
    };
    const bool lstm = gates_ == 4, gru = gates_ == 3;
    const int64_t lay = layout();
    const int64_t seq = lay == 0 ? x.shape()[0] : x.shape()[1], batch = lay == 0 ? x.shape()[1] : x.shape()[0];
    const int64_t in_size = x.shape()[2], h = r.shape()[2], nd = dirs(), g = gates_;
    // Activations, with alpha/beta consumed in order.
    std::vector<std::string> names;
    if (auto it = node_.attrs.find("activations"); it != node_.attrs.end()) names = it->second.strings;
    const size_t per = lstm ? 3 : gru ? 2 : 1;
    if (names.empty())
      names = lstm  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
              : gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                    : std::vector<std::string>{"Tanh"};
    if (names.size() == per && nd == 2) {
      const std::vector<std::string> once = names;
      names.insert(names.end(), once.begin(), once.end());
    }
    std::vector<float> alphas = node_.attr_floats("activation_alpha"), betas = node_.attr_floats("activation_beta");
    size_t ia = 0, ib = 0;
    std::vector<Act> acts;
    for (std::string n : names) {
      std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      Act a{n, 0, 0};
      const bool ua = n == "affine" || n == "leakyrelu" || n == "thresholdedrelu" || n == "scaledtanh" ||
                      n == "hardsigmoid" || n == "elu";
      const bool ub = n == "affine" || n == "scaledtanh" || n == "hardsigmoid";
      a.alpha = n == "leakyrelu" ? 0.01 : n == "hardsigmoid" ? 0.2 : 1.0;
      a.beta = n == "hardsigmoid" ? 0.5 : n == "scaledtanh" ? 1.0 : 0.0;
      if (ua && ia < alphas.size()) a.alpha = alphas[ia++];
      if (ub && ib < betas.size()) a.beta = betas[ib++];
      acts.push_back(a);
    }
    const bool has_clip = node_.has_attr("clip");
    const double clip = node_.attr_float("clip", 0.f);
    auto cl = [&](double v) { return has_clip ? std::min(clip, std::max(-clip, v)) : v; };
    const bool lbr = node_.attr_int("linear_before_reset", 0) != 0;
    const bool input_forget = node_.attr_int("input_forget", 0) != 0;
    const std::string direction = node_.attr_string("direction", "forward");

    auto xval = [&](int64_t t, int64_t b, int64_t k) {
      return read_f(x, (lay == 0 ? (t * batch + b) : (b * seq + t)) * in_size + k);
    };
    auto state_index = [&](int64_t d, int64_t b, int64_t j) {
      return (lay == 0 ? (d * batch + b) : (b * nd + d)) * h + j;
    };
    for (int64_t i = 0; i < ctx.outputs[0].numel(); ++i) write_f(ctx.outputs[0], i, 0.0);

    for (int64_t d = 0; d < nd; ++d) {
      const bool reverse = direction == "reverse" || d == 1;
      const Act* a = acts.data() + d * static_cast<int64_t>(per);
      for (int64_t b = 0; b < batch; ++b) {
        const int64_t len = opt(4) ? read_i(*opt(4), b) : seq;
        std::vector<double> hs(static_cast<size_t>(h)), cs(static_cast<size_t>(h));
        for (int64_t j = 0; j < h; ++j) {
          hs[static_cast<size_t>(j)] = opt(5) ? read_f(*opt(5), state_index(d, b, j)) : 0.0;
          cs[static_cast<size_t>(j)] = lstm && opt(6) ? read_f(*opt(6), state_index(d, b, j)) : 0.0;
        }
        // Gate pre-activation k (0-based gate index) for unit j: x.W^T + Wb (+ h.R^T + Rb unless `no_rec`).
        auto xpart = [&](int64_t t, int64_t gate, int64_t j) {
          double s = 0;
          for (int64_t k = 0; k < in_size; ++k) s += xval(t, b, k) * read_f(w, ((d * g + gate) * h + j) * in_size + k);
          if (opt(3)) s += read_f(*opt(3), d * 2 * g * h + gate * h + j);
          return s;
        };
        auto hpart = [&](const std::vector<double>& hv, int64_t gate, int64_t j) {
          double s = 0;
          for (int64_t k = 0; k < h; ++k) s += hv[static_cast<size_t>(k)] * read_f(r, ((d * g + gate) * h + j) * h + k);
          if (opt(3)) s += read_f(*opt(3), d * 2 * g * h + g * h + gate * h + j);
          return s;
        };
        for (int64_t s = 0; s < len; ++s) {
          const int64_t t = reverse ? len - 1 - s : s;
          std::vector<double> nh(static_cast<size_t>(h)), nc(static_cast<size_t>(h));
          if (g == 1) {
            for (int64_t j = 0; j < h; ++j)
              nh[static_cast<size_t>(j)] = act(a[0], cl(xpart(t, 0, j) + hpart(hs, 0, j)));
          } else if (gru) {
            std::vector<double> z(static_cast<size_t>(h)), rr(static_cast<size_t>(h)), rh(static_cast<size_t>(h));
            for (int64_t j = 0; j < h; ++j) {
              z[static_cast<size_t>(j)] = act(a[0], cl(xpart(t, 0, j) + hpart(hs, 0, j)));
              rr[static_cast<size_t>(j)] = act(a[0], cl(xpart(t, 1, j) + hpart(hs, 1, j)));
              rh[static_cast<size_t>(j)] = rr[static_cast<size_t>(j)] * hs[static_cast<size_t>(j)];
            }
            for (int64_t j = 0; j < h; ++j) {
              const double pre = lbr ? xpart(t, 2, j) + rr[static_cast<size_t>(j)] * hpart(hs, 2, j)
                                     : xpart(t, 2, j) + hpart(rh, 2, j);
              const double hh = act(a[1], cl(pre));
              nh[static_cast<size_t>(j)] =
                  (1 - z[static_cast<size_t>(j)]) * hh + z[static_cast<size_t>(j)] * hs[static_cast<size_t>(j)];
            }
          } else {
            const Tensor* p = opt(7);
            for (int64_t j = 0; j < h; ++j) {
              const double cp = cs[static_cast<size_t>(j)];
              const double pi = p ? read_f(*p, d * 3 * h + j) : 0, po = p ? read_f(*p, d * 3 * h + h + j) : 0,
                           pf = p ? read_f(*p, d * 3 * h + 2 * h + j) : 0;
              const double it = act(a[0], cl(xpart(t, 0, j) + hpart(hs, 0, j) + pi * cp));
              const double ft = input_forget ? 1 - it : act(a[0], cl(xpart(t, 2, j) + hpart(hs, 2, j) + pf * cp));
              const double ct = act(a[1], cl(xpart(t, 3, j) + hpart(hs, 3, j)));
              const double c = ft * cp + it * ct;
              const double ot = act(a[0], cl(xpart(t, 1, j) + hpart(hs, 1, j) + po * c));
              nc[static_cast<size_t>(j)] = c;
              nh[static_cast<size_t>(j)] = ot * act(a[2], c);
            }
            cs = nc;
          }
          hs = nh;
          for (int64_t j = 0; j < h; ++j) {
            const int64_t off = lay == 0 ? ((t * nd + d) * batch + b) * h + j : ((b * seq + t) * nd + d) * h + j;
            write_f(ctx.outputs[0], off, hs[static_cast<size_t>(j)]);
          }
        }
        for (size_t o = 1; o < ctx.outputs.size(); ++o)
          if (ctx.outputs[o].defined())
            for (int64_t j = 0; j < h; ++j)
              write_f(ctx.outputs[o], state_index(d, b, j), (o == 1 ? hs : cs)[static_cast<size_t>(j)]);
      }
    }
    return ok_status();
  }

 private:
  graph::Node node_;
  int gates_;
};

KernelFactory factory(int gates) {
  return [gates](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<RefRecurrentKernel>(a.node, gates));
  };
}

}  // namespace

Status register_rnn(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(math_util::add_ref(reg, "RNN", 7, factory(1)));
  SL_RETURN_IF_ERROR(math_util::add_ref(reg, "GRU", 7, factory(3)));
  return math_util::add_ref(reg, "LSTM", 7, factory(4));
}

}  // namespace streamline::ops::reference
