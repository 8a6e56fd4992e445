// Reference quantisation kernels: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
// MatMulInteger, QLinearMatMul (2-D and batched, same batch shape or broadcast), ConvInteger and
// QLinearConv (2-D). Written from the spec's formulas with unravelled indices, no shortcuts.

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

double sat(double v, DType t) {
  return t == DType::kInt8 ? std::min(127.0, std::max(-128.0, v)) : std::min(255.0, std::max(0.0, v));
}

class RefQuantKernel final : public Kernel {
 public:
  explicit RefQuantKernel(const graph::Node& node) : node_(node) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    const std::string& op = node_.op_type;
    ReshapeResult rr;
    if (op == "QuantizeLinear") {
      rr.outputs.push_back({in.size() > 2 && in[2].present() ? in[2].dtype : DType::kUInt8, in[0].shape});
    } else if (op == "DequantizeLinear") {
      rr.outputs.push_back({DType::kFloat32, in[0].shape});
    } else {
      rr.outputs.push_back({DType::kUInt8, in[0].shape});
      rr.outputs.push_back({DType::kFloat32, Shape{}});
      rr.outputs.push_back({DType::kUInt8, Shape{}});
    }
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const std::string& op = node_.op_type;
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    if (op == "DynamicQuantizeLinear") {
      float lo = 0, hi = 0;
      for (int64_t i = 0; i < x.numel(); ++i) {
        lo = std::min(lo, x.data<float>()[i]);
        hi = std::max(hi, x.data<float>()[i]);
      }
      const float scale = (hi - lo) / 255.f;
      const float zp = scale == 0 ? 0.f : std::nearbyint(static_cast<float>(sat(0.f - lo / scale, DType::kUInt8)));
      for (int64_t i = 0; i < x.numel(); ++i)
        write_i(
            y, i,
            scale == 0 ? 0 : static_cast<int64_t>(sat(std::nearbyint(x.data<float>()[i] / scale) + zp, DType::kUInt8)));
      write_f(ctx.outputs[1], 0, scale);
      write_i(ctx.outputs[2], 0, static_cast<int64_t>(zp));
      return ok_status();
    }
    const Tensor& scale = ctx.inputs[1];
    const Tensor* zp = opt(ctx, 2);
    const int64_t rank = static_cast<int64_t>(x.shape().rank());
    int64_t axis = node_.attr_int("axis", 1);
    if (axis < 0) axis += rank;
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t k = 0;
      if (scale.numel() > 1) k = unravel(i, x.shape())[static_cast<size_t>(axis)];
      const float s = static_cast<float>(read_f(scale, k));
      const float z = zp ? static_cast<float>(read_i(*zp, k)) : 0.f;
      if (op == "QuantizeLinear")
        write_i(y, i, static_cast<int64_t>(sat(std::nearbyint(static_cast<float>(read_f(x, i)) / s) + z, y.dtype())));
      else
        write_f(y, i, static_cast<float>(static_cast<float>(read_f(x, i)) - z) * s);
    }
    return ok_status();
  }

 private:
  graph::Node node_;
};

class RefIntMatMulKernel final : public Kernel {
 public:
  explicit RefIntMatMulKernel(const graph::Node& node) : node_(node), q_(node.op_type == "QLinearMatMul") {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    const Shape& a = in[0].shape;
    const Shape& b = in[q_ ? 3 : 1].shape;
    if (a.rank() < 2 || b.rank() < 2) return unsupported(prefix(node_) + "reference needs rank >= 2");
    Shape ab(std::span<const int64_t>(a.data(), a.rank() - 2)), bb(std::span<const int64_t>(b.data(), b.rank() - 2)),
        out;
    if (!broadcast_shapes(ab, bb, &out)) return invalid_argument(prefix(node_) + "batch dims");
    out.push_back(a[a.rank() - 2]);
    out.push_back(b[b.rank() - 1]);
    ReshapeResult rr;
    rr.outputs.push_back({q_ ? in[7].dtype : DType::kInt32, out});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& a = ctx.inputs[0];
    const Tensor& b = ctx.inputs[q_ ? 3 : 1];
    const Tensor* azp = opt(ctx, 2);
    const Tensor* bzp = opt(ctx, q_ ? 5 : 3);
    Tensor& y = ctx.outputs[0];
    const Shape& ys = y.shape();
    const int64_t k = a.shape()[a.shape().rank() - 1];
    for (int64_t i = 0; i < y.numel(); ++i) {
      std::vector<int64_t> idx = unravel(i, ys);
      const int64_t r = idx[idx.size() - 2], c = idx[idx.size() - 1];
      // Index into A/B: broadcast batch dims right-aligned.
      auto batch_index = [&](const Shape& s, int64_t row, int64_t col) {
        std::vector<int64_t> j(s.rank());
        for (size_t d = 0; d + 2 < s.rank(); ++d) {
          const size_t od = d + (ys.rank() - s.rank());
          j[d] = s[d] == 1 ? 0 : idx[od];
        }
        j[s.rank() - 2] = row;
        j[s.rank() - 1] = col;
        return ravel(j, s);
      };
      int64_t acc = 0;
      for (int64_t t = 0; t < k; ++t) {
        const int64_t av =
            read_i(a, batch_index(a.shape(), r, t)) - (azp ? read_i(*azp, azp->numel() == 1 ? 0 : r) : 0);
        const int64_t bv =
            read_i(b, batch_index(b.shape(), t, c)) - (bzp ? read_i(*bzp, bzp->numel() == 1 ? 0 : c) : 0);
        acc += av * bv;
      }
      if (!q_) {
        write_i(y, i, acc);
        continue;
      }
      const double as = read_f(ctx.inputs[1], ctx.inputs[1].numel() == 1 ? 0 : r);
      const double bs = read_f(ctx.inputs[4], ctx.inputs[4].numel() == 1 ? 0 : c);
      const double v = std::nearbyint(static_cast<double>(acc) * (as * bs / read_f(ctx.inputs[6], 0))) +
                       static_cast<double>(read_i(ctx.inputs[7], 0));
      write_i(y, i, static_cast<int64_t>(sat(v, y.dtype())));
    }
    return ok_status();
  }

 private:
  graph::Node node_;
  bool q_;
};

// 2-D only (x [N, C, H, W]); pads, strides, dilations and group from attributes.
class RefIntConvKernel final : public Kernel {
 public:
  explicit RefIntConvKernel(const graph::Node& node) : node_(node), q_(node.op_type == "QLinearConv") {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    const Shape& x = in[0].shape;
    const Shape& w = in[q_ ? 3 : 1].shape;
    if (x.rank() != 4 || node_.attr_string("auto_pad", "NOTSET") != "NOTSET")
      return unsupported(prefix(node_) + "reference handles 2-D explicit padding only");
    const auto p = pads(), s = attr("strides"), d = attr("dilations");
    Shape out{x[0], w[0]};
    for (size_t k = 0; k < 2; ++k) out.push_back((x[k + 2] + p[k] + p[k + 2] - ((w[k + 2] - 1) * d[k] + 1)) / s[k] + 1);
    ReshapeResult rr;
    rr.outputs.push_back({q_ ? in[7].dtype : DType::kInt32, out});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const Tensor& w = ctx.inputs[q_ ? 3 : 1];
    const Tensor* xzp = opt(ctx, 2);
    const Tensor* wzp = opt(ctx, q_ ? 5 : 3);
    Tensor& y = ctx.outputs[0];
    const auto p = pads(), s = attr("strides"), d = attr("dilations");
    const int64_t group = node_.attr_int("group", 1);
    const int64_t cg = w.shape()[1], mg = w.shape()[0] / group;
    for (int64_t i = 0; i < y.numel(); ++i) {
      const std::vector<int64_t> o = unravel(i, y.shape());
      int64_t acc = 0;
      const int64_t g = o[1] / mg;
      for (int64_t c = 0; c < cg; ++c)
        for (int64_t ky = 0; ky < w.shape()[2]; ++ky)
          for (int64_t kx = 0; kx < w.shape()[3]; ++kx) {
            const int64_t iy = o[2] * s[0] - p[0] + ky * d[0], ix = o[3] * s[1] - p[1] + kx * d[1];
            if (iy < 0 || ix < 0 || iy >= x.shape()[2] || ix >= x.shape()[3]) continue;
            const int64_t xv = read_i(x, ravel({o[0], g * cg + c, iy, ix}, x.shape())) - (xzp ? read_i(*xzp, 0) : 0);
            const int64_t wv =
                read_i(w, ravel({o[1], c, ky, kx}, w.shape())) - (wzp ? read_i(*wzp, wzp->numel() == 1 ? 0 : o[1]) : 0);
            acc += xv * wv;
          }
      if (!q_) {
        write_i(y, i, acc);
        continue;
      }
      if (opt(ctx, 8)) acc += read_i(ctx.inputs[8], o[1]);
      const double ws = read_f(ctx.inputs[4], ctx.inputs[4].numel() == 1 ? 0 : o[1]);
      const double v =
          std::nearbyint(static_cast<double>(acc) * (read_f(ctx.inputs[1], 0) * ws / read_f(ctx.inputs[6], 0))) +
          static_cast<double>(read_i(ctx.inputs[7], 0));
      write_i(y, i, static_cast<int64_t>(sat(v, y.dtype())));
    }
    return ok_status();
  }

 private:
  std::vector<int64_t> attr(const char* name) const {
    std::vector<int64_t> v = node_.attr_ints(name);
    return v.empty() ? std::vector<int64_t>{1, 1} : v;
  }
  std::vector<int64_t> pads() const {
    std::vector<int64_t> v = node_.attr_ints("pads");
    return v.empty() ? std::vector<int64_t>{0, 0, 0, 0} : v;
  }
  graph::Node node_;
  bool q_;
};

template <typename K>
KernelFactory factory() {
  return [](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<K>(a.node));
  };
}

}  // namespace

Status register_quant(KernelRegistry& reg) {
  using math_util::add_ref;
  for (const char* op : {"QuantizeLinear", "DequantizeLinear"})
    SL_RETURN_IF_ERROR(add_ref(reg, op, 10, factory<RefQuantKernel>()));
  SL_RETURN_IF_ERROR(add_ref(reg, "DynamicQuantizeLinear", 11, factory<RefQuantKernel>()));
  for (const char* op : {"MatMulInteger", "QLinearMatMul"})
    SL_RETURN_IF_ERROR(add_ref(reg, op, 10, factory<RefIntMatMulKernel>()));
  for (const char* op : {"ConvInteger", "QLinearConv"})
    SL_RETURN_IF_ERROR(add_ref(reg, op, 10, factory<RefIntConvKernel>()));
  return ok_status();
}

}  // namespace streamline::ops::reference
