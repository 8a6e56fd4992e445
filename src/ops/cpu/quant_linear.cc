// Integer and quantised linear algebra: MatMulInteger, QLinearMatMul (opset 10), ConvInteger and
// QLinearConv (opset 10). Inputs are uint8 or int8; products accumulate in int32.
//
//   MatMulInteger  y[int32] = (A - a_zp) . (B - b_zp)           a_zp per-tensor or per-row of A,
//                                                                 b_zp per-tensor or per-column of B
//   QLinearMatMul  y = saturate(round((A - a_zp).(B - b_zp) * a_scale * b_scale / y_scale) + y_zp)
//   ConvInteger    y[int32] = conv(x - x_zp, w - w_zp)          w_zp per-tensor or per output channel
//   QLinearConv    y = saturate(round((conv(x - x_zp, w - w_zp) + B) * x_scale * w_scale / y_scale) + y_zp)
// MatMul follows NumPy's batch broadcasting; Conv handles 1 to 3 spatial dimensions, groups,
// dilations, strides, pads and auto_pad. Plain loops over zero-point-corrected int32 copies.

#include <cmath>
#include <vector>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"

namespace streamline::ops::cpu {
namespace {

bool is_q8(DType t) {
  return t == DType::kUInt8 || t == DType::kInt8;
}

inline int32_t q8_at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kInt8 ? t.data<int8_t>()[i] : t.data<uint8_t>()[i];
}

// Zero point (or scale) k of a per-tensor (one element) or per-channel tensor; `absent` when null.
inline double param_at(const Tensor* t, int64_t k, double absent) {
  if (!t) return absent;
  return load_f(t->dtype(), t->raw(), t->numel() == 1 ? 0 : k);
}

// Requantises an int32 accumulator to uint8/int8.
inline void store_q(const Tensor& y, int64_t i, double real, double zp) {
  const double lo = y.dtype() == DType::kInt8 ? -128 : 0, hi = y.dtype() == DType::kInt8 ? 127 : 255;
  const double v = std::min(hi, std::max(lo, std::nearbyint(real) + zp));
  if (y.dtype() == DType::kInt8)
    y.data<int8_t>()[i] = static_cast<int8_t>(v);
  else
    y.data<uint8_t>()[i] = static_cast<uint8_t>(v);
}

const Tensor* opt(const RunContext& ctx, size_t i) {
  return i < ctx.inputs.size() && ctx.inputs[i].defined() ? &ctx.inputs[i] : nullptr;
}

// ---------------------------------------------------------------------------------------------
// MatMulInteger / QLinearMatMul

struct MatDims {
  Shape out;
  int64_t m = 0, k = 0, n = 0, batch = 1;
  std::vector<int64_t> a_batch, b_batch;  // per output batch: offset (in matrices) into A and B
};

Result<MatDims> mat_dims(const Shape& a_in, const Shape& b_in, const std::string& desc) {
  Shape a = a_in, b = b_in;
  const bool a_vec = a.rank() == 1, b_vec = b.rank() == 1;
  if (a.rank() == 0 || b.rank() == 0) return invalid_argument(desc + ": operands must have rank >= 1");
  if (a_vec) a = Shape{1, a[0]};
  if (b_vec) b = Shape{b[0], 1};
  MatDims d;
  d.m = a[a.rank() - 2];
  d.k = a[a.rank() - 1];
  d.n = b[b.rank() - 1];
  if (b[b.rank() - 2] != d.k)
    return invalid_argument(desc + ": inner dimensions differ: " + a_in.to_string() + " . " + b_in.to_string());
  Shape ab(std::span<const int64_t>(a.data(), a.rank() - 2)), bb(std::span<const int64_t>(b.data(), b.rank() - 2));
  Shape batch;
  if (!broadcast_shapes(ab, bb, &batch)) return invalid_argument(desc + ": batch dimensions do not broadcast");
  d.batch = batch.numel();
  for (int64_t i = 0; i < d.batch; ++i) {
    int64_t rem = i, oa = 0, ob = 0, sa = 1, sb = 1;
    for (size_t j = batch.rank(); j-- > 0;) {
      const int64_t idx = rem % batch[j];
      rem /= batch[j];
      const size_t ja = j + ab.rank() - batch.rank(), jb = j + bb.rank() - batch.rank();
      if (j + ab.rank() >= batch.rank()) {
        if (ab[ja] != 1) oa += idx * sa;
        sa *= ab[ja];
      }
      if (j + bb.rank() >= batch.rank()) {
        if (bb[jb] != 1) ob += idx * sb;
        sb *= bb[jb];
      }
    }
    d.a_batch.push_back(oa);
    d.b_batch.push_back(ob);
  }
  d.out = batch;
  if (!a_vec) d.out.push_back(d.m);
  if (!b_vec) d.out.push_back(d.n);
  return d;
}

class IntMatMulKernel final : public DataKernel {
 public:
  IntMatMulKernel(const graph::Node& node, bool qlinear) : DataKernel(node), qlinear_(qlinear) {}
  Status init(const KernelCreateArgs&) { return ok_status(); }

  // Input positions of A, B and their zero points.
  size_t ia() const { return 0; }
  size_t ib() const { return qlinear_ ? 3 : 1; }
  size_t iazp() const { return qlinear_ ? 2 : 2; }
  size_t ibzp() const { return qlinear_ ? 5 : 3; }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    const size_t need = qlinear_ ? 8 : 2;
    if (in.size() < need) return invalid("expected " + std::to_string(need) + " inputs");
    if (!is_q8(in[ia()].dtype) || !is_q8(in[ib()].dtype)) return unsupported_error("A and B must be uint8 or int8");
    SL_ASSIGN_OR_RETURN(MatDims d, mat_dims(in[ia()].shape, in[ib()].shape, desc_));
    DType out = DType::kInt32;
    if (qlinear_) {
      if (!in[7].present() || !is_q8(in[7].dtype)) return invalid("y_zero_point must be uint8 or int8");
      out = in[7].dtype;
    }
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{out, d.out, Layout::kPlain});
    rr.workspace_bytes = static_cast<size_t>(d.m * d.k + d.k * d.n + d.m * d.n) * sizeof(int32_t);
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& a = ctx.inputs[ia()];
    const Tensor& b = ctx.inputs[ib()];
    SL_ASSIGN_OR_RETURN(MatDims d, mat_dims(a.shape(), b.shape(), desc_));
    const Tensor* azp = opt(ctx, iazp());
    const Tensor* bzp = opt(ctx, ibzp());
    if (azp && azp->numel() != 1 && azp->numel() != d.m) return invalid("a_zero_point must be scalar or per-row");
    if (bzp && bzp->numel() != 1 && bzp->numel() != d.n) return invalid("b_zero_point must be scalar or per-column");
    const Tensor* as = qlinear_ ? opt(ctx, 1) : nullptr;
    const Tensor* bs = qlinear_ ? opt(ctx, 4) : nullptr;
    const Tensor* ys = qlinear_ ? opt(ctx, 6) : nullptr;
    const Tensor* yzp = qlinear_ ? opt(ctx, 7) : nullptr;
    auto* pa = static_cast<int32_t*>(ctx.workspace);
    int32_t* pb = pa + d.m * d.k;
    int32_t* pc = pb + d.k * d.n;  // one accumulator row per output row
    Tensor& y = ctx.outputs[0];
    for (int64_t bi = 0; bi < d.batch; ++bi) {
      // Zero-point-corrected copies of this batch's matrices.
      for (int64_t i = 0; i < d.m; ++i)
        for (int64_t k = 0; k < d.k; ++k)
          pa[i * d.k + k] = q8_at(a, d.a_batch[static_cast<size_t>(bi)] * d.m * d.k + i * d.k + k) -
                            static_cast<int32_t>(param_at(azp, i, 0));
      for (int64_t k = 0; k < d.k; ++k)
        for (int64_t j = 0; j < d.n; ++j)
          pb[k * d.n + j] = q8_at(b, d.b_batch[static_cast<size_t>(bi)] * d.k * d.n + k * d.n + j) -
                            static_cast<int32_t>(param_at(bzp, j, 0));
      math::parallel_chunks(d.m, 16, ctx.num_threads, [&](int64_t r0, int64_t r1) {
        for (int64_t i = r0; i < r1; ++i) {
          int32_t* acc = pc + i * d.n;
          std::fill(acc, acc + d.n, 0);
          for (int64_t k = 0; k < d.k; ++k) {
            const int32_t av = pa[i * d.k + k];
            const int32_t* brow = pb + k * d.n;
            for (int64_t j = 0; j < d.n; ++j) acc[j] += av * brow[j];
          }
          const int64_t base = (bi * d.m + i) * d.n;
          for (int64_t j = 0; j < d.n; ++j) {
            if (!qlinear_) {
              y.data<int32_t>()[base + j] = acc[j];
              continue;
            }
            const double mult = param_at(as, i, 1) * param_at(bs, j, 1) / param_at(ys, 0, 1);
            store_q(y, base + j, acc[j] * mult, param_at(yzp, 0, 0));
          }
        }
      });
    }
    return ok_status();
  }

 private:
  bool qlinear_;
};

// ---------------------------------------------------------------------------------------------
// ConvInteger / QLinearConv

struct ConvGeom {
  int64_t n = 0, c = 0, m = 0, group = 1, cg = 0;
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, out[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, dil[3] = {1, 1, 1},
          pad[3] = {0, 0, 0};
  Shape out_shape;
};

class IntConvKernel final : public DataKernel {
 public:
  IntConvKernel(const graph::Node& node, bool qlinear) : DataKernel(node), qlinear_(qlinear) {}

  Status init(const KernelCreateArgs& a) {
    auto_pad_ = a.node.attr_string("auto_pad", "NOTSET");
    group_ = a.node.attr_int("group", 1);
    kernel_shape_ = a.node.attr_ints("kernel_shape");
    pads_ = a.node.attr_ints("pads");
    strides_ = a.node.attr_ints("strides");
    dilations_ = a.node.attr_ints("dilations");
    if (group_ < 1) return invalid("group must be >= 1");
    return ok_status();
  }

  size_t ix() const { return 0; }
  size_t iw() const { return qlinear_ ? 3 : 1; }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    const size_t need = qlinear_ ? 8 : 2;
    if (in.size() < need || !in[ix()].present() || !in[iw()].present()) return invalid("missing inputs");
    if (!is_q8(in[ix()].dtype) || !is_q8(in[iw()].dtype)) return unsupported_error("x and w must be uint8 or int8");
    SL_ASSIGN_OR_RETURN(ConvGeom g, geometry(in[ix()].shape, in[iw()].shape));
    DType out = DType::kInt32;
    if (qlinear_) {
      if (!in[7].present() || !is_q8(in[7].dtype)) return invalid("y_zero_point must be uint8 or int8");
      out = in[7].dtype;
    }
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{out, g.out_shape, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[ix()];
    const Tensor& w = ctx.inputs[iw()];
    SL_ASSIGN_OR_RETURN(ConvGeom g, geometry(x.shape(), w.shape()));
    const Tensor* xzp = opt(ctx, qlinear_ ? 2 : 2);
    const Tensor* wzp = opt(ctx, qlinear_ ? 5 : 3);
    const Tensor* xs = qlinear_ ? opt(ctx, 1) : nullptr;
    const Tensor* ws = qlinear_ ? opt(ctx, 4) : nullptr;
    const Tensor* ys = qlinear_ ? opt(ctx, 6) : nullptr;
    const Tensor* yzp = qlinear_ ? opt(ctx, 7) : nullptr;
    const Tensor* bias = qlinear_ ? opt(ctx, 8) : nullptr;
    if (wzp && wzp->numel() != 1 && wzp->numel() != g.m) return invalid("w_zero_point must be scalar or per channel");
    const int32_t xz = static_cast<int32_t>(param_at(xzp, 0, 0));
    const int64_t in_plane = g.in[0] * g.in[1] * g.in[2], k_plane = g.k[0] * g.k[1] * g.k[2];
    const int64_t out_plane = g.out[0] * g.out[1] * g.out[2];
    const int64_t mg = g.m / g.group;
    Tensor& y = ctx.outputs[0];
    math::parallel_chunks(g.n * g.m, 1, ctx.num_threads, [&](int64_t b0, int64_t b1) {
      for (int64_t nm = b0; nm < b1; ++nm) {
        const int64_t n = nm / g.m, m = nm % g.m, grp = m / mg;
        const int32_t wz = static_cast<int32_t>(param_at(wzp, m, 0));
        for (int64_t o = 0; o < out_plane; ++o) {
          const int64_t oz = o / (g.out[1] * g.out[2]), oy = (o / g.out[2]) % g.out[1], ox = o % g.out[2];
          int32_t acc = 0;
          for (int64_t c = 0; c < g.cg; ++c) {
            const int64_t xc = grp * g.cg + c;
            for (int64_t kz = 0; kz < g.k[0]; ++kz) {
              const int64_t iz = oz * g.stride[0] - g.pad[0] + kz * g.dil[0];
              if (iz < 0 || iz >= g.in[0]) continue;
              for (int64_t ky = 0; ky < g.k[1]; ++ky) {
                const int64_t iy = oy * g.stride[1] - g.pad[1] + ky * g.dil[1];
                if (iy < 0 || iy >= g.in[1]) continue;
                for (int64_t kx = 0; kx < g.k[2]; ++kx) {
                  const int64_t ixx = ox * g.stride[2] - g.pad[2] + kx * g.dil[2];
                  if (ixx < 0 || ixx >= g.in[2]) continue;
                  const int32_t xv = q8_at(x, (n * g.c + xc) * in_plane + (iz * g.in[1] + iy) * g.in[2] + ixx) - xz;
                  const int32_t wv = q8_at(w, (m * g.cg + c) * k_plane + (kz * g.k[1] + ky) * g.k[2] + kx) - wz;
                  acc += xv * wv;
                }
              }
            }
          }
          const int64_t yi = nm * out_plane + o;
          if (!qlinear_) {
            y.data<int32_t>()[yi] = acc;
            continue;
          }
          if (bias) acc += bias->data<int32_t>()[m];
          const double mult = param_at(xs, 0, 1) * param_at(ws, m, 1) / param_at(ys, 0, 1);
          store_q(y, yi, acc * mult, param_at(yzp, 0, 0));
        }
      }
    });
    return ok_status();
  }

 private:
  Result<ConvGeom> geometry(const Shape& xs, const Shape& ws) const {
    const int64_t spatial = static_cast<int64_t>(xs.rank()) - 2;
    if (spatial < 1 || spatial > 3) return unsupported_error("only 1 to 3 spatial dimensions");
    if (ws.rank() != xs.rank()) return invalid("w rank differs from x rank");
    ConvGeom g;
    g.n = xs[0];
    g.c = xs[1];
    g.m = ws[0];
    g.group = group_;
    g.cg = ws[1];
    if (g.c != g.cg * group_ || g.m % group_ != 0)
      return invalid("channels do not match group " + std::to_string(group_));
    const int64_t off = 3 - spatial;
    g.out_shape = Shape{g.n, g.m};
    for (int64_t d = 0; d < spatial; ++d) {
      const size_t di = static_cast<size_t>(d);
      const int64_t in = xs[di + 2];
      const int64_t k = kernel_shape_.empty() ? ws[di + 2] : kernel_shape_[di];
      const int64_t s = strides_.empty() ? 1 : strides_[di];
      const int64_t dl = dilations_.empty() ? 1 : dilations_[di];
      if (s < 1 || dl < 1 || k < 1) return invalid("bad kernel, stride or dilation");
      const int64_t ek = (k - 1) * dl + 1;
      int64_t pb = 0, pe = 0, out = 0;
      if (auto_pad_ == "NOTSET") {
        pb = pads_.empty() ? 0 : pads_[di];
        pe = pads_.empty() ? 0 : pads_[di + static_cast<size_t>(spatial)];
        out = (in + pb + pe - ek) / s + 1;
      } else if (auto_pad_ == "VALID") {
        out = (in - ek) / s + 1;
      } else if (auto_pad_ == "SAME_UPPER" || auto_pad_ == "SAME_LOWER") {
        out = (in + s - 1) / s;
        const int64_t total = std::max<int64_t>(0, (out - 1) * s + ek - in);
        pb = auto_pad_ == "SAME_UPPER" ? total / 2 : total - total / 2;
      } else {
        return invalid("unknown auto_pad '" + auto_pad_ + "'");
      }
      if (out < 0) out = 0;
      g.in[off + d] = in;
      g.k[off + d] = k;
      g.stride[off + d] = s;
      g.dil[off + d] = dl;
      g.pad[off + d] = pb;
      g.out[off + d] = out;
      g.out_shape.push_back(out);
    }
    return g;
  }

  bool qlinear_;
  std::string auto_pad_;
  int64_t group_ = 1;
  std::vector<int64_t> kernel_shape_, pads_, strides_, dilations_;
};

template <typename K>
KernelFactory q_factory(bool qlinear) {
  return [qlinear](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    auto k = std::make_unique<K>(a.node, qlinear);
    SL_RETURN_IF_ERROR(k->init(a));
    return std::unique_ptr<Kernel>(std::move(k));
  };
}

}  // namespace

Status register_quant_linear(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add_typed_def(reg, "MatMulInteger", 10, DType::kUndefined, q_factory<IntMatMulKernel>(false)));
  SL_RETURN_IF_ERROR(add_typed_def(reg, "QLinearMatMul", 10, DType::kUndefined, q_factory<IntMatMulKernel>(true)));
  SL_RETURN_IF_ERROR(add_typed_def(reg, "ConvInteger", 10, DType::kUndefined, q_factory<IntConvKernel>(false)));
  return add_typed_def(reg, "QLinearConv", 10, DType::kUndefined, q_factory<IntConvKernel>(true));
}

}  // namespace streamline::ops::cpu
