// Reference kernels for streamline's fused int8 ops (the formulas are in ops/cpu/quant_common.h
// and ops/cpu/qelementwise.cc): QConv (2-D, plain layout, explicit pads, pre_residual_clip), QMatMul and
// MatMulIntegerToFloat (A [..., K] times a 2-D B), QAdd, QMul, QLookup, QScaleShift, QGlobalAveragePool and
// QAveragePool. Every value goes
// through double and the activation is evaluated from its definition; no shortcuts.

#include <cmath>
#include <vector>

#include "ops/reference/ref_data_util.h"
#include "ops/reference/ref_math_util.h"
#include "ops/reference/reference.h"

namespace streamline::ops::reference {
namespace {

using math_util::prefix;
using math_util::read_f;
using math_util::read_i;
using math_util::write_f;
using math_util::write_i;

const Tensor* opt(const RunContext& ctx, size_t i) {
  return i < ctx.inputs.size() && ctx.inputs[i].defined() ? &ctx.inputs[i] : nullptr;
}
bool present(std::span<const TensorInfo> in, size_t i) {
  return i < in.size() && in[i].present();
}
double at(const Tensor* t, int64_t k, double absent) {
  if (!t) return absent;
  return read_f(*t, t->numel() == 1 ? 0 : k);
}

// The `activation` attribute applied to v.
double activate(const graph::Node& n, double v) {
  const std::string a = n.attr_string("activation", "");
  const std::vector<float> p = n.attr_floats("activation_params");
  auto param = [&](size_t i, double def) { return p.size() > i ? static_cast<double>(p[i]) : def; };
  if (a == "Relu") return v > 0 ? v : 0;
  if (a == "LeakyRelu") return v > 0 ? v : param(0, 0.01) * v;
  if (a == "Clip") return std::min(param(1, 3.4e38), std::max(param(0, -3.4e38), v));
  if (a == "Sigmoid") return 1 / (1 + std::exp(-v));
  if (a == "Tanh") return std::tanh(v);
  if (a == "HardSigmoid") return std::min(1.0, std::max(0.0, param(0, 0.2) * v + param(1, 0.5)));
  if (a == "Gelu") return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
  return v;
}

// Writes act(r) to element i of y: float, or quantised with y_scale / y_zp.
void store(const graph::Node& n, Tensor& y, int64_t i, double r, const Tensor* ys, const Tensor* yz) {
  const double a = activate(n, r);
  if (y.dtype() == DType::kFloat32) {
    write_f(y, i, a);
    return;
  }
  const double lo = y.dtype() == DType::kInt8 ? -128 : 0, hi = y.dtype() == DType::kInt8 ? 127 : 255;
  const double q = std::nearbyint(a / read_f(*ys, 0)) + (yz ? static_cast<double>(read_i(*yz, 0)) : 0.0);
  write_i(y, i, static_cast<int64_t>(std::min(hi, std::max(lo, q))));
}

DType out_dtype(std::span<const TensorInfo> in, size_t ys, size_t yz) {
  if (present(in, yz)) return in[yz].dtype;
  return present(in, ys) ? DType::kUInt8 : DType::kFloat32;
}

// streamline.QConv(X, xs, xz, W, ws, wz, ys, yz, B, Z, zs, zz).
class RefQConv final : public Kernel {
 public:
  explicit RefQConv(const graph::Node& node) : node_(node) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    const Shape& x = in[0].shape;
    const Shape& w = in[3].shape;
    if (x.rank() != 4 || node_.attr_string("auto_pad", "NOTSET") != "NOTSET")
      return unsupported(prefix(node_) + "reference handles 2-D explicit padding only");
    const auto p = ints("pads", {0, 0, 0, 0}), s = ints("strides", {1, 1}), d = ints("dilations", {1, 1});
    Shape out{x[0], w[0]};
    for (size_t k = 0; k < 2; ++k) out.push_back((x[k + 2] + p[k] + p[k + 2] - ((w[k + 2] - 1) * d[k] + 1)) / s[k] + 1);
    ReshapeResult rr;
    rr.outputs.push_back({out_dtype(in, 6, 7), out});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const Tensor& w = ctx.inputs[3];
    Tensor& y = ctx.outputs[0];
    const auto p = ints("pads", {0, 0, 0, 0}), s = ints("strides", {1, 1}), d = ints("dilations", {1, 1});
    const int64_t group = node_.attr_int("group", 1);
    const int64_t cg = w.shape()[1], mg = w.shape()[0] / group;
    const Tensor *xz = opt(ctx, 2), *wz = opt(ctx, 5), *bias = opt(ctx, 8), *z = opt(ctx, 9);
    for (int64_t i = 0; i < y.numel(); ++i) {
      const std::vector<int64_t> o = unravel(i, y.shape());
      const int64_t g = o[1] / mg;
      int64_t acc = 0;
      for (int64_t c = 0; c < cg; ++c)
        for (int64_t ky = 0; ky < w.shape()[2]; ++ky)
          for (int64_t kx = 0; kx < w.shape()[3]; ++kx) {
            const int64_t iy = o[2] * s[0] - p[0] + ky * d[0], ix = o[3] * s[1] - p[1] + kx * d[1];
            if (iy < 0 || ix < 0 || iy >= x.shape()[2] || ix >= x.shape()[3]) continue;
            const int64_t xv = read_i(x, ravel({o[0], g * cg + c, iy, ix}, x.shape())) - (xz ? read_i(*xz, 0) : 0);
            const int64_t wv =
                read_i(w, ravel({o[1], c, ky, kx}, w.shape())) - (wz ? read_i(*wz, wz->numel() == 1 ? 0 : o[1]) : 0);
            acc += xv * wv;
          }
      double r =
          read_f(ctx.inputs[1], 0) * at(&ctx.inputs[4], o[1], 1) * (static_cast<double>(acc) + at(bias, o[1], 0));
      if (z) {
        const std::vector<float> clip = node_.attr_floats("pre_residual_clip");
        if (clip.size() == 2) r = std::min<double>(clip[1], std::max<double>(clip[0], r));
        r += read_f(ctx.inputs[10], 0) *
             static_cast<double>(read_i(*z, i) - (opt(ctx, 11) ? read_i(ctx.inputs[11], 0) : 0));
      }
      store(node_, y, i, r, opt(ctx, 6), opt(ctx, 7));
    }
    return ok_status();
  }

 private:
  std::vector<int64_t> ints(const char* name, std::vector<int64_t> def) const {
    std::vector<int64_t> v = node_.attr_ints(name);
    return v.empty() ? def : v;
  }
  graph::Node node_;
};

// streamline.QMatMul(A, as, az, B, bs, bz, ys, yz, bias) and
// streamline.MatMulIntegerToFloat(A, B, as, bs, az, bz, bias).
class RefQMatMul final : public Kernel {
 public:
  explicit RefQMatMul(const graph::Node& node) : node_(node), to_float_(node.op_type == "MatMulIntegerToFloat") {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    const Shape& a = in[0].shape;
    const Shape& b = in[to_float_ ? 1 : 3].shape;
    if (b.rank() != 2 || a.rank() < 1) return unsupported(prefix(node_) + "reference needs a 2-D B");
    Shape out(std::span<const int64_t>(a.data(), a.rank() - 1));
    out.push_back(b[1]);
    ReshapeResult rr;
    rr.outputs.push_back({to_float_ ? DType::kFloat32 : out_dtype(in, 6, 7), out});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const size_t ib = to_float_ ? 1 : 3, ias = to_float_ ? 2 : 1, ibs = to_float_ ? 3 : 4;
    const size_t iaz = to_float_ ? 4 : 2, ibz = 5, ibias = to_float_ ? 6 : 8;
    const Tensor& a = ctx.inputs[0];
    const Tensor& b = ctx.inputs[ib];
    Tensor& y = ctx.outputs[0];
    const int64_t k = b.shape()[0], n = b.shape()[1];
    const Tensor *az = opt(ctx, iaz), *bz = opt(ctx, ibz), *bias = opt(ctx, ibias);
    for (int64_t i = 0; i < y.numel(); ++i) {
      const int64_t row = i / n, col = i % n;
      int64_t acc = 0;
      for (int64_t t = 0; t < k; ++t)
        acc += (read_i(a, row * k + t) - (az ? read_i(*az, 0) : 0)) *
               (read_i(b, t * n + col) - (bz ? read_i(*bz, bz->numel() == 1 ? 0 : col) : 0));
      const double scale = read_f(ctx.inputs[ias], 0) * at(&ctx.inputs[ibs], col, 1);
      const double r = to_float_ ? scale * static_cast<double>(acc) + at(bias, col, 0)
                                 : scale * (static_cast<double>(acc) + at(bias, col, 0));
      store(node_, y, i, r, to_float_ ? nullptr : opt(ctx, 6), to_float_ ? nullptr : opt(ctx, 7));
    }
    return ok_status();
  }

 private:
  graph::Node node_;
  bool to_float_;
};

// streamline.QAdd / QMul(A, as, az, B, bs, bz, ys, yz) (B broadcast NumPy-style),
// streamline.QGlobalAveragePool(X, xs, xz, ys, yz) and streamline.QLookup(X, table).
class RefQElementwise final : public Kernel {
 public:
  explicit RefQElementwise(const graph::Node& node)
      : node_(node), pool_(node.op_type == "QGlobalAveragePool"), lookup_(node.op_type == "QLookup") {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    ReshapeResult rr;
    if (lookup_) {
      rr.outputs.push_back({in[1].dtype, in[0].shape});
      return rr;
    }
    if (pool_) {
      Shape s{in[0].shape[0], in[0].shape[1]};
      for (size_t d = 2; d < in[0].shape.rank(); ++d) s.push_back(1);
      rr.outputs.push_back({in[4].dtype, s});
    } else {
      Shape out;
      if (!broadcast_shapes(in[0].shape, in[3].shape, &out) || out != in[0].shape)
        return unsupported(prefix(node_) + "B must broadcast to A's shape");
      rr.outputs.push_back({in[7].dtype, in[0].shape});
    }
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    auto zp = [&](size_t i) { return opt(ctx, i) ? static_cast<double>(read_i(ctx.inputs[i], 0)) : 0.0; };
    if (lookup_) {
      for (int64_t i = 0; i < y.numel(); ++i) {
        const int64_t code = read_i(x, i) + (x.dtype() == DType::kInt8 ? 128 : 0);
        write_i(y, i, read_i(ctx.inputs[1], code));
      }
      return ok_status();
    }
    if (pool_) {
      const int64_t plane = x.numel() / (x.shape()[0] * x.shape()[1]);
      for (int64_t i = 0; i < y.numel(); ++i) {
        double sum = 0;
        for (int64_t p = 0; p < plane; ++p) sum += read_f(ctx.inputs[1], 0) * (read_f(x, i * plane + p) - zp(2));
        store(node_, y, i, sum / static_cast<double>(plane), &ctx.inputs[3], &ctx.inputs[4]);
      }
      return ok_status();
    }
    const Tensor& b = ctx.inputs[3];
    const bool mul = node_.op_type == "QMul";
    for (int64_t i = 0; i < y.numel(); ++i) {
      const double av = read_f(ctx.inputs[1], 0) * (read_f(x, i) - zp(2));
      const int64_t bi = math_util::input_offset(y.shape(), i, b.shape());
      const double bv = read_f(ctx.inputs[4], 0) * (read_f(b, bi) - zp(5));
      store(node_, y, i, mul ? av * bv : av + bv, &ctx.inputs[6], &ctx.inputs[7]);
    }
    return ok_status();
  }

 private:
  graph::Node node_;
  bool pool_, lookup_;
};

// streamline.QScaleShift(X, xs, xz, scale, shift, ys, yz) (channel axis 1) and
// streamline.QAveragePool(X, xs, xz, ys, yz) (2-D, explicit pads, no ceil_mode).
class RefQChannelOps final : public Kernel {
 public:
  explicit RefQChannelOps(const graph::Node& node) : node_(node), pool_(node.op_type == "QAveragePool") {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    ReshapeResult rr;
    if (!pool_) {
      rr.outputs.push_back({in[6].dtype, in[0].shape});
      return rr;
    }
    const Shape& x = in[0].shape;
    if (x.rank() != 4 || node_.attr_int("ceil_mode", 0) != 0)
      return unsupported(prefix(node_) + "reference pools 2-D without ceil_mode");
    const auto k = node_.attr_ints("kernel_shape"), st = ints("strides", {1, 1}), p = ints("pads", {0, 0, 0, 0});
    Shape out{x[0], x[1]};
    for (size_t d = 0; d < 2; ++d) out.push_back((x[d + 2] + p[d] + p[d + 2] - k[d]) / st[d] + 1);
    rr.outputs.push_back({in[4].dtype, out});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    const double xs = read_f(ctx.inputs[1], 0), zx = opt(ctx, 2) ? static_cast<double>(read_i(ctx.inputs[2], 0)) : 0;
    for (int64_t i = 0; i < y.numel(); ++i) {
      const std::vector<int64_t> o = unravel(i, y.shape());
      if (!pool_) {
        const double v = read_f(ctx.inputs[3], o[1]) * xs * (read_f(x, i) - zx) + read_f(ctx.inputs[4], o[1]);
        store(node_, y, i, v, &ctx.inputs[5], &ctx.inputs[6]);
        continue;
      }
      const auto k = node_.attr_ints("kernel_shape"), st = ints("strides", {1, 1}), p = ints("pads", {0, 0, 0, 0});
      double sum = 0;
      int64_t inside = 0, padded = 0;
      for (int64_t a = 0; a < k[0]; ++a)
        for (int64_t b = 0; b < k[1]; ++b) {
          const int64_t iy = o[2] * st[0] - p[0] + a, ix = o[3] * st[1] - p[1] + b;
          if (iy < x.shape()[2] + p[2] && ix < x.shape()[3] + p[3]) ++padded;
          if (iy < 0 || ix < 0 || iy >= x.shape()[2] || ix >= x.shape()[3]) continue;
          sum += xs * (read_f(x, ravel({o[0], o[1], iy, ix}, x.shape())) - zx);
          ++inside;
        }
      const int64_t count = node_.attr_int("count_include_pad", 0) ? padded : inside;
      store(node_, y, i, sum / static_cast<double>(std::max<int64_t>(1, count)), &ctx.inputs[3], &ctx.inputs[4]);
    }
    return ok_status();
  }

 private:
  std::vector<int64_t> ints(const char* name, std::vector<int64_t> def) const {
    std::vector<int64_t> v = node_.attr_ints(name);
    return v.empty() ? def : v;
  }
  graph::Node node_;
  bool pool_;
};

template <typename K>
KernelDef def(const char* op) {
  KernelDef d;
  d.op = op;
  d.domain = "streamline";
  d.since_version = 1;
  d.provider = "reference";
  d.create = [](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<K>(a.node));
  };
  return d;
}

}  // namespace

Status register_quant_fused(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(reg.add(def<RefQConv>("QConv")));
  SL_RETURN_IF_ERROR(reg.add(def<RefQMatMul>("QMatMul")));
  SL_RETURN_IF_ERROR(reg.add(def<RefQMatMul>("MatMulIntegerToFloat")));
  SL_RETURN_IF_ERROR(reg.add(def<RefQElementwise>("QAdd")));
  SL_RETURN_IF_ERROR(reg.add(def<RefQElementwise>("QMul")));
  SL_RETURN_IF_ERROR(reg.add(def<RefQElementwise>("QLookup")));
  SL_RETURN_IF_ERROR(reg.add(def<RefQChannelOps>("QScaleShift")));
  SL_RETURN_IF_ERROR(reg.add(def<RefQChannelOps>("QAveragePool")));
  return reg.add(def<RefQElementwise>("QGlobalAveragePool"));
}

}  // namespace streamline::ops::reference
