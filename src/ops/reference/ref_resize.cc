// Reference Resize (opset 10 onwards, without antialias) and Upsample (opsets 7-9), written after the
// ONNX reference implementation: every output element maps each axis to a fractional input coordinate,
// picks the neighbours on each axis (ratio in (0, 1], edge-padded), and sums the tensor product of the
// per-axis coefficients. Nearest mode works for any dtype; linear and cubic for float32.

#include <cmath>
#include <cstring>

#include "ops/reference/ref_data_util.h"

namespace streamline::ops::reference {
namespace {

struct ResizeRefParams {
  std::vector<double> scale, roi_start, roi_end;
};

class ResizeRef final : public Kernel {
 public:
  ResizeRef(const graph::Node& n, bool upsample) : node_(n), upsample_(upsample) {
    legacy_ = upsample || n.opset < 11;
    mode_ = n.attr_string("mode", "nearest");
    if (mode_ == "bilinear") mode_ = "linear";
    coord_ = legacy_ ? "asymmetric" : n.attr_string("coordinate_transformation_mode", "half_pixel");
    nearest_ = legacy_ ? "floor" : n.attr_string("nearest_mode", "round_prefer_floor");
    a_ = n.attr_float("cubic_coeff_a", -0.75f);
    exclude_ = n.attr_int("exclude_outside", 0) != 0;
    extrapolation_ = n.attr_float("extrapolation_value", 0.f);
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    const Shape& s = in[0].shape;
    const size_t r = s.rank();
    std::vector<double> scales;
    std::vector<int64_t> sizes;
    std::vector<double> roi;
    auto doubles = [](const TensorInfo& t) {
      std::vector<double> v;
      for (int64_t i = 0; i < t.value->numel(); ++i) v.push_back(element_as_double(*t.value, i));
      return v;
    };
    auto have = [&](size_t i) { return i < in.size() && in[i].present() && in[i].shape.numel() > 0; };
    if (upsample_ && node_.opset < 9) {
      for (float f : node_.attr_floats("scales")) scales.push_back(f);
    } else if (legacy_) {
      if (!in[1].value) return unsupported("reference Resize needs constant scales");
      scales = doubles(in[1]);
    } else {
      if (have(3)) {
        SL_ASSIGN_OR_RETURN(sizes, ref_ints(in[3], "sizes"));
      } else if (have(2)) {
        if (!in[2].value) return unsupported("reference Resize needs constant scales");
        scales = doubles(in[2]);
      }
      if (have(1) && in[1].value) roi = doubles(in[1]);
    }
    auto p = std::make_shared<ResizeRefParams>();
    p->scale.assign(r, 1.0);
    p->roi_start.assign(r, 0.0);
    p->roi_end.assign(r, 1.0);
    if (roi.size() == 2 * r) {
      for (size_t d = 0; d < r; ++d) {
        p->roi_start[d] = roi[d];
        p->roi_end[d] = roi[r + d];
      }
    }
    Shape out = s;
    if (!sizes.empty()) {
      if (sizes.size() != r) return invalid_argument(node_.describe() + ": sizes rank mismatch");
      for (size_t d = 0; d < r; ++d) {
        out[d] = sizes[d];
        p->scale[d] = static_cast<double>(sizes[d]) / static_cast<double>(s[d]);
      }
    } else {
      if (scales.size() != r) return invalid_argument(node_.describe() + ": scales rank mismatch");
      for (size_t d = 0; d < r; ++d) {
        p->scale[d] = scales[d];
        double len = static_cast<double>(s[d]) * scales[d];
        if (coord_ == "tf_crop_and_resize") len *= p->roi_end[d] - p->roi_start[d];
        out[d] = static_cast<int64_t>(std::floor(len));
      }
    }
    ReshapeResult res;
    res.outputs.push_back({in[0].dtype, out, Layout::kPlain});
    res.state = p;
    return res;
  }

  Status run(const RunContext& ctx) const override {
    const auto& p = *static_cast<const ResizeRefParams*>(ctx.state);
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    const size_t r = x.shape().rank();
    Tensor extrap = Tensor::empty(x.dtype(), Shape{});
    if (x.dtype() == DType::kFloat32) *extrap.data<float>() = extrapolation_;
    for (int64_t i = 0; i < y.numel(); ++i) {
      const std::vector<int64_t> oidx = unravel(i, y.shape());
      // Per axis: the neighbour indices (edge-clamped) and their coefficients.
      std::vector<std::vector<int64_t>> nb(r);
      std::vector<std::vector<double>> co(r);
      bool outside = false;
      for (size_t d = 0; d < r; ++d) {
        const int64_t in_len = x.shape()[d];
        const double xo =
            coordinate(static_cast<double>(oidx[d]), p.scale[d], in_len, y.shape()[d], p.roi_start[d], p.roi_end[d]);
        if (coord_ == "tf_crop_and_resize" && (xo < 0 || xo > static_cast<double>(in_len - 1))) outside = true;
        const bool integral = xo == std::floor(xo);
        const double ratio = integral ? 1.0 : xo - std::floor(xo);
        const int64_t left = static_cast<int64_t>(integral ? xo - 1 : std::floor(xo));
        std::vector<double> c = coefficients(ratio);
        const int64_t n = static_cast<int64_t>(c.size());
        const int64_t first = left - (n / 2 - 1);
        for (int64_t k = 0; k < n; ++k) nb[d].push_back(first + k);
        if (exclude_ && mode_ != "nearest") {
          double sum = 0;
          for (int64_t k = 0; k < n; ++k) {
            if (nb[d][static_cast<size_t>(k)] < 0 || nb[d][static_cast<size_t>(k)] >= in_len)
              c[static_cast<size_t>(k)] = 0;
            sum += c[static_cast<size_t>(k)];
          }
          for (double& v : c) v /= sum;
        }
        for (int64_t& v : nb[d]) v = std::min(std::max<int64_t>(v, 0), in_len - 1);
        co[d] = c;
      }
      if (outside) {
        copy_element(extrap, 0, y, i);
        continue;
      }
      if (mode_ == "nearest") {
        std::vector<int64_t> iidx(r);
        for (size_t d = 0; d < r; ++d) iidx[d] = co[d][0] != 0 ? nb[d][0] : nb[d][1];
        copy_element(x, ravel(iidx, x.shape()), y, i);
        continue;
      }
      // Sum over every combination of neighbours.
      double acc = 0;
      std::vector<size_t> pick(r, 0);
      while (true) {
        double w = 1;
        std::vector<int64_t> iidx(r);
        for (size_t d = 0; d < r; ++d) {
          w *= co[d][pick[d]];
          iidx[d] = nb[d][pick[d]];
        }
        acc += w * x.data<float>()[ravel(iidx, x.shape())];
        bool done = true;
        for (size_t d = r; d-- > 0;) {
          if (++pick[d] < co[d].size()) {
            done = false;
            break;
          }
          pick[d] = 0;
        }
        if (done) break;
      }
      y.data<float>()[i] = static_cast<float>(acc);
    }
    return ok_status();
  }

 private:
  double coordinate(double xr, double scale, int64_t in_len, int64_t out_len, double roi0, double roi1) const {
    const double li = static_cast<double>(in_len);
    if (coord_ == "asymmetric") return xr / scale;
    if (coord_ == "tf_half_pixel_for_nn") return (xr + 0.5) / scale;
    if (coord_ == "pytorch_half_pixel") return out_len > 1 ? (xr + 0.5) / scale - 0.5 : 0.0;
    if (coord_ == "align_corners") {
      const double lo = scale * li;
      return lo == 1.0 ? 0.0 : xr * (li - 1) / (lo - 1);
    }
    if (coord_ == "tf_crop_and_resize") {
      if (out_len == 1) return (roi1 - roi0) * (li - 1) / 2 + roi0 * (li - 1);
      return xr * (roi1 - roi0) * (li - 1) / static_cast<double>(out_len - 1) + roi0 * (li - 1);
    }
    if (coord_ == "half_pixel_symmetric") {
      const double adjustment = static_cast<double>(out_len) / (scale * li);
      return li / 2 * (1 - adjustment) + (xr + 0.5) / scale - 0.5;
    }
    return (xr + 0.5) / scale - 0.5;  // half_pixel
  }

  std::vector<double> coefficients(double ratio) const {
    if (mode_ == "linear") return {1 - ratio, ratio};
    if (mode_ == "cubic") {
      const double a = a_;
      const double t0 = ratio + 1, t1 = ratio, t2 = 1 - ratio, t3 = 2 - ratio;
      auto far = [a](double t) { return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a; };
      auto near = [a](double t) { return ((a + 2) * t - (a + 3)) * t * t + 1; };
      return {far(t0), near(t1), near(t2), far(t3)};
    }
    if (ratio == 1.0) return {0, 1};
    if (nearest_ == "round_prefer_ceil") return {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
    if (nearest_ == "floor") return {1, 0};
    if (nearest_ == "ceil") return {0, 1};
    return {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};
  }

  graph::Node node_;
  bool upsample_ = false;
  bool legacy_ = false;
  std::string mode_, coord_, nearest_;
  double a_ = -0.75;
  bool exclude_ = false;
  float extrapolation_ = 0.f;
};

}  // namespace

Status register_resize(KernelRegistry& reg) {
  for (const bool upsample : {false, true}) {
    KernelDef def;
    def.op = upsample ? "Upsample" : "Resize";
    def.since_version = upsample ? 7 : 10;
    def.end_version = upsample ? 9 : INT_MAX;
    def.provider = "reference";
    def.create = [upsample](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(new ResizeRef(a.node, upsample));
    };
    SL_RETURN_IF_ERROR(reg.add(std::move(def)));
  }
  return ok_status();
}

}  // namespace streamline::ops::reference
