// Plain-loop integer and quantised linear algebra: MatMulInteger, QLinearMatMul, streamline.QMatMul,
// streamline.MatMulIntegerToFloat, ConvInteger, QLinearConv and streamline.QConv (formulas in
// quant_common.h). Inputs are uint8 or int8 with any zero points; products accumulate in int32.
// These kernels take every case the oneDNN kernels (qconv.cc, qmatmul.cc) do not: run-time
// weights or scales, uint8 weights with zero points, per-row zero points, batched weights, 1-D and
// 3-D convolutions. MatMul follows NumPy's batch broadcasting; Conv handles 1 to 3 spatial
// dimensions, groups, dilations, strides, pads and auto_pad, on plain or (2-D) channels-last data.

#include <cmath>
#include <vector>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"
#include "ops/cpu/quant_common.h"

namespace streamline::ops::cpu {

QSlots conv_slots(QOpKind kind) {
  QSlots s;
  if (kind == QOpKind::kInteger) {
    s.w = 1;
    s.x_zp = 2;
    s.w_zp = 3;
    return s;
  }
  s = QSlots{0, 1, 2, 3, 4, 5, 6, 7, 8, -1, -1, -1};
  if (kind == QOpKind::kFused) {
    s.z = 9;
    s.z_scale = 10;
    s.z_zp = 11;
  }
  return s;
}

QSlots matmul_slots(QOpKind kind) {
  QSlots s;
  switch (kind) {
    case QOpKind::kInteger:
      s.w = 1;
      s.x_zp = 2;
      s.w_zp = 3;
      break;
    case QOpKind::kToFloat:
      s.w = 1;
      s.x_scale = 2;
      s.w_scale = 3;
      s.x_zp = 4;
      s.w_zp = 5;
      s.bias = 6;
      break;
    default:
      s = QSlots{0, 1, 2, 3, 4, 5, 6, 7, -1, -1, -1, -1};
      if (kind == QOpKind::kFused) s.bias = 8;
      break;
  }
  return s;
}

double param_value(const Tensor& t, int64_t k) {
  return load_f(t.dtype(), t.raw(), t.numel() == 1 ? 0 : k);
}

const Tensor* slot_tensor(std::span<const Tensor> inputs, int slot) {
  if (slot < 0 || static_cast<size_t>(slot) >= inputs.size()) return nullptr;
  const Tensor& t = inputs[static_cast<size_t>(slot)];
  return t.defined() ? &t : nullptr;
}

const Tensor* slot_constant(std::span<const TensorInfo> infos, int slot) {
  if (slot < 0 || static_cast<size_t>(slot) >= infos.size()) return nullptr;
  return infos[static_cast<size_t>(slot)].present() ? infos[static_cast<size_t>(slot)].value : nullptr;
}

bool slot_present(std::span<const TensorInfo> infos, int slot) {
  return slot >= 0 && static_cast<size_t>(slot) < infos.size() && infos[static_cast<size_t>(slot)].present();
}

float apply_activation(const ActivationAttrs& a, float v) {
  switch (a.kind) {
    case ActivationKind::kRelu:
      return v > 0.f ? v : 0.f;
    case ActivationKind::kLeakyRelu:
      return v > 0.f ? v : a.alpha * v;
    case ActivationKind::kClip:
      return std::min(a.beta, std::max(a.alpha, v));
    case ActivationKind::kSigmoid:
      return 1.f / (1.f + std::exp(-v));
    case ActivationKind::kHardSigmoid:
      return std::min(1.f, std::max(0.f, a.alpha * v + a.beta));
    case ActivationKind::kTanh:
      return std::tanh(v);
    case ActivationKind::kGelu:
      return 0.5f * v * (1.f + std::erf(v * 0.70710678118654752f));
    default:
      return v;
  }
}

bool activation_scales(const ActivationAttrs& a) {
  return a.kind == ActivationKind::kNone || a.kind == ActivationKind::kRelu || a.kind == ActivationKind::kLeakyRelu ||
         a.kind == ActivationKind::kClip;
}

QEpilogue read_epilogue(QOpKind kind, const QSlots& s, std::span<const Tensor> inputs, const ActivationAttrs& act) {
  QEpilogue e;
  e.act = act;
  if (kind == QOpKind::kInteger) return e;
  e.out = DType::kFloat32;
  if (const Tensor* ys = slot_tensor(inputs, s.y_scale)) {
    e.y_scale = param_value(*ys, 0);
    const Tensor* yz = slot_tensor(inputs, s.y_zp);
    e.out = yz ? yz->dtype() : DType::kUInt8;
    e.y_zp = yz ? static_cast<int32_t>(param_value(*yz, 0)) : 0;
  }
  if (const Tensor* z = slot_tensor(inputs, s.z)) {
    (void)z;
    const Tensor* zs = slot_tensor(inputs, s.z_scale);
    const Tensor* zz = slot_tensor(inputs, s.z_zp);
    e.z_scale = zs ? param_value(*zs, 0) : 1.0;
    e.z_zp = zz ? static_cast<int32_t>(param_value(*zz, 0)) : 0;
  }
  return e;
}

namespace {

inline int32_t q8_at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kInt8 ? t.data<int8_t>()[i] : t.data<uint8_t>()[i];
}

inline double param_at(const Tensor* t, int64_t k, double absent) {
  return t ? param_value(*t, k) : absent;
}

// Writes the epilogue's result for real value r (or the raw accumulator for int32 outputs).
inline void store_out(const QEpilogue& e, Tensor& y, int64_t i, int64_t acc, double r) {
  switch (e.out) {
    case DType::kInt32:
      y.data<int32_t>()[i] = static_cast<int32_t>(acc);
      break;
    case DType::kFloat32:
      y.data<float>()[i] = static_cast<float>(e.activated(r));
      break;
    case DType::kInt8:
      y.data<int8_t>()[i] = static_cast<int8_t>(e.quantize(r));
      break;
    default:
      y.data<uint8_t>()[i] = static_cast<uint8_t>(e.quantize(r));
      break;
  }
}

// The output dtype reshape reports for `kind` (see quant_common.h).
Result<DType> out_dtype(QOpKind kind, const QSlots& s, std::span<const TensorInfo> in, const std::string& who) {
  if (kind == QOpKind::kInteger) return DType::kInt32;
  if (kind == QOpKind::kToFloat) return DType::kFloat32;
  if (slot_present(in, s.y_zp)) {
    const DType t = in[static_cast<size_t>(s.y_zp)].dtype;
    if (!is_q8(t)) return invalid_argument(who + ": y_zero_point must be uint8 or int8");
    return t;
  }
  if (kind == QOpKind::kQLinear) return invalid_argument(who + ": missing y_zero_point");
  return slot_present(in, s.y_scale) ? DType::kUInt8 : DType::kFloat32;
}

// ---------------------------------------------------------------------------------------------
// Matrix products

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
  IntMatMulKernel(const graph::Node& node, QOpKind kind) : DataKernel(node), kind_(kind), s_(matmul_slots(kind)) {}

  Status init(const KernelCreateArgs& a) {
    if (kind_ == QOpKind::kFused || kind_ == QOpKind::kToFloat) {
      SL_ASSIGN_OR_RETURN(act_, read_activation(a.node, /*allow_gelu=*/true));
    }
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (!slot_present(in, s_.x) || !slot_present(in, s_.w)) return invalid("missing A or B");
    const DType at = in[static_cast<size_t>(s_.x)].dtype, bt = in[static_cast<size_t>(s_.w)].dtype;
    if (!is_q8(at) || !is_q8(bt)) return unsupported_error("A and B must be uint8 or int8");
    if (kind_ != QOpKind::kInteger && !slot_present(in, s_.x_scale)) return invalid("missing a_scale");
    SL_ASSIGN_OR_RETURN(MatDims d,
                        mat_dims(in[static_cast<size_t>(s_.x)].shape, in[static_cast<size_t>(s_.w)].shape, desc_));
    SL_ASSIGN_OR_RETURN(DType out, out_dtype(kind_, s_, in, desc_));
    if (slot_present(in, s_.bias) && in[static_cast<size_t>(s_.bias)].shape.numel() != d.n)
      return invalid("bias must have N = " + std::to_string(d.n) + " elements");
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{out, d.out, Layout::kPlain});
    rr.workspace_bytes = static_cast<size_t>(d.m * d.k + d.k * d.n + d.m * d.n) * sizeof(int32_t);
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& a = ctx.inputs[static_cast<size_t>(s_.x)];
    const Tensor& b = ctx.inputs[static_cast<size_t>(s_.w)];
    SL_ASSIGN_OR_RETURN(MatDims d, mat_dims(a.shape(), b.shape(), desc_));
    const Tensor* azp = slot_tensor(ctx.inputs, s_.x_zp);
    const Tensor* bzp = slot_tensor(ctx.inputs, s_.w_zp);
    if (azp && azp->numel() != 1 && azp->numel() != d.m) return invalid("a_zero_point must be scalar or per-row");
    if (bzp && bzp->numel() != 1 && bzp->numel() != d.n) return invalid("b_zero_point must be scalar or per-column");
    const Tensor* as = slot_tensor(ctx.inputs, s_.x_scale);
    const Tensor* bs = slot_tensor(ctx.inputs, s_.w_scale);
    const Tensor* bias = slot_tensor(ctx.inputs, s_.bias);
    const QEpilogue e = read_epilogue(kind_, s_, ctx.inputs, act_);
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
            double r = 0.0;
            if (e.out != DType::kInt32) {
              const double scale = param_at(as, i, 1) * param_at(bs, j, 1);
              if (kind_ == QOpKind::kToFloat)
                r = scale * acc[j] + param_at(bias, j, 0);
              else
                r = scale * (static_cast<double>(acc[j]) + param_at(bias, j, 0));
            }
            store_out(e, y, base + j, acc[j], r);
          }
        }
      });
    }
    return ok_status();
  }

 private:
  QOpKind kind_;
  QSlots s_;
  ActivationAttrs act_;
};

// ---------------------------------------------------------------------------------------------
// Convolutions

struct ConvGeom {
  int64_t n = 0, c = 0, m = 0, group = 1, cg = 0;
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, out[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, dil[3] = {1, 1, 1},
          pad[3] = {0, 0, 0};
  Shape out_shape;
};

// Offset of element (n, c, z, y, x) of an activation with `g`'s sizes (`in` or `out` side).
inline int64_t act_offset(bool channels_last, int64_t n, int64_t ch, int64_t c, int64_t z, int64_t y, int64_t x,
                          const int64_t* sz) {
  const int64_t sp = (z * sz[1] + y) * sz[2] + x;
  return channels_last ? (n * sz[0] * sz[1] * sz[2] + sp) * c + ch : (n * c + ch) * sz[0] * sz[1] * sz[2] + sp;
}

class IntConvKernel final : public DataKernel {
 public:
  IntConvKernel(const graph::Node& node, QOpKind kind) : DataKernel(node), kind_(kind), s_(conv_slots(kind)) {}

  Status init(const KernelCreateArgs& a) {
    auto_pad_ = a.node.attr_string("auto_pad", "NOTSET");
    group_ = a.node.attr_int("group", 1);
    kernel_shape_ = a.node.attr_ints("kernel_shape");
    pads_ = a.node.attr_ints("pads");
    strides_ = a.node.attr_ints("strides");
    dilations_ = a.node.attr_ints("dilations");
    if (group_ < 1) return invalid("group must be >= 1");
    if (kind_ == QOpKind::kFused) {
      SL_ASSIGN_OR_RETURN(act_, read_activation(a.node, /*allow_gelu=*/true));
      clip_ = a.node.attr_floats("pre_residual_clip");
    }
    return ok_status();
  }

  LayoutSupport layout_support() const override { return LayoutSupport::kAny; }
  bool accepts(std::span<const TensorInfo> in) const override {
    return slot_present(in, s_.x) && in[static_cast<size_t>(s_.x)].shape.rank() == 4;
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (!slot_present(in, s_.x) || !slot_present(in, s_.w)) return invalid("missing inputs");
    const TensorInfo& x = in[static_cast<size_t>(s_.x)];
    const TensorInfo& w = in[static_cast<size_t>(s_.w)];
    if (!is_q8(x.dtype) || !is_q8(w.dtype)) return unsupported_error("x and w must be uint8 or int8");
    if (w.layout != Layout::kPlain) return invalid("weights must be plain");
    if (x.layout == Layout::kBlocked8) return unsupported_error("nChw8c activations");
    SL_ASSIGN_OR_RETURN(ConvGeom g, geometry(x.shape, w.shape));
    SL_ASSIGN_OR_RETURN(DType out, out_dtype(kind_, s_, in, desc_));
    if (slot_present(in, s_.bias) && in[static_cast<size_t>(s_.bias)].shape.numel() != g.m)
      return invalid("bias must have M = " + std::to_string(g.m) + " elements");
    if (slot_present(in, s_.z)) {
      const TensorInfo& z = in[static_cast<size_t>(s_.z)];
      if (z.shape != g.out_shape || !is_q8(z.dtype))
        return invalid("residual Z must be 8-bit with the output's shape " + g.out_shape.to_string());
      if (z.layout != x.layout) return invalid("residual Z must have the input's layout");
    }
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{out, g.out_shape, x.layout});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[static_cast<size_t>(s_.x)];
    const Tensor& w = ctx.inputs[static_cast<size_t>(s_.w)];
    SL_ASSIGN_OR_RETURN(ConvGeom g, geometry(x.shape(), w.shape()));
    const Tensor* xzp = slot_tensor(ctx.inputs, s_.x_zp);
    const Tensor* wzp = slot_tensor(ctx.inputs, s_.w_zp);
    const Tensor* xs = slot_tensor(ctx.inputs, s_.x_scale);
    const Tensor* ws = slot_tensor(ctx.inputs, s_.w_scale);
    const Tensor* bias = slot_tensor(ctx.inputs, s_.bias);
    const Tensor* z = slot_tensor(ctx.inputs, s_.z);
    if (wzp && wzp->numel() != 1 && wzp->numel() != g.m) return invalid("w_zero_point must be scalar or per channel");
    QEpilogue e = read_epilogue(kind_, s_, ctx.inputs, act_);
    if (clip_.size() == 2) {
      e.clip_lo = clip_[0];
      e.clip_hi = clip_[1];
    }
    const bool cl = x.layout() == Layout::kChannelsLast;
    const int32_t xz = static_cast<int32_t>(param_at(xzp, 0, 0));
    const int64_t k_plane = g.k[0] * g.k[1] * g.k[2];
    const int64_t out_plane = g.out[0] * g.out[1] * g.out[2];
    const int64_t mg = g.m / g.group;
    Tensor& y = ctx.outputs[0];
    math::parallel_chunks(g.n * g.m, 1, ctx.num_threads, [&](int64_t b0, int64_t b1) {
      for (int64_t nm = b0; nm < b1; ++nm) {
        const int64_t n = nm / g.m, m = nm % g.m, grp = m / mg;
        const int32_t wz = static_cast<int32_t>(param_at(wzp, m, 0));
        const double acc_scale = param_at(xs, 0, 1) * param_at(ws, m, 1);
        for (int64_t o = 0; o < out_plane; ++o) {
          const int64_t oz = o / (g.out[1] * g.out[2]), oy = (o / g.out[2]) % g.out[1], ox = o % g.out[2];
          int64_t acc = 0;
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
                  const int32_t xv = q8_at(x, act_offset(cl, n, xc, g.c, iz, iy, ixx, g.in)) - xz;
                  const int32_t wv = q8_at(w, (m * g.cg + c) * k_plane + (kz * g.k[1] + ky) * g.k[2] + kx) - wz;
                  acc += xv * wv;
                }
              }
            }
          }
          const int64_t yi = act_offset(cl, n, m, g.m, oz, oy, ox, g.out);
          double r = 0.0;
          if (e.out != DType::kInt32) {
            const int32_t zv = z ? q8_at(*z, yi) : e.z_zp;
            r = acc_scale * (static_cast<double>(acc) + param_at(bias, m, 0));
            if (z) r = std::min(e.clip_hi, std::max(e.clip_lo, r)) + e.z_scale * static_cast<double>(zv - e.z_zp);
          }
          store_out(e, y, yi, acc, r);
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

  QOpKind kind_;
  QSlots s_;
  ActivationAttrs act_;
  std::vector<float> clip_;  // pre_residual_clip
  std::string auto_pad_;
  int64_t group_ = 1;
  std::vector<int64_t> kernel_shape_, pads_, strides_, dilations_;
};

template <typename K>
Result<std::unique_ptr<Kernel>> make_plain(const KernelCreateArgs& a, QOpKind kind) {
  auto k = std::make_unique<K>(a.node, kind);
  SL_RETURN_IF_ERROR(k->init(a));
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace

Result<std::unique_ptr<Kernel>> make_plain_qconv(const KernelCreateArgs& args, QOpKind kind) {
  return make_plain<IntConvKernel>(args, kind);
}

Result<std::unique_ptr<Kernel>> make_plain_qmatmul(const KernelCreateArgs& args, QOpKind kind) {
  return make_plain<IntMatMulKernel>(args, kind);
}

}  // namespace streamline::ops::cpu
