// Reference Conv, streamline.FusedConv and ConvTranspose: direct loops over every output (Conv)
// or every input tap (ConvTranspose), following the ONNX operator specs. 1-D and 2-D convolutions
// run as 3-D ones with leading unit spatial axes.

#include "ops/reference/ref_ew.h"
#include "ops/reference/ref_nn_util.h"
#include "ops/reference/reference.h"

namespace streamline::ops::reference {
namespace {

// Geometry in 3-D form: spatial arrays indexed 0..2, 1-D/2-D padded at the front with size-1 axes.
struct Geom3 {
  int64_t n = 0, c = 0, m = 0, group = 1;
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, pl[3] = {0, 0, 0};
  Shape y;
};

class RefConv final : public RefKernel {
 public:
  RefConv(const graph::Node& node, bool transposed) : RefKernel(node), transposed_(transposed) {}
  explicit RefConv(const graph::Node& node) : RefConv(node, node.op_type == "ConvTranspose") {}

  Status init() {
    SL_ASSIGN_OR_RETURN(act_, RefActivation::parse(node_));
    if (node_.domain != "streamline") act_ = RefActivation{};
    SL_ASSIGN_OR_RETURN(epilogue_, graph::read_program_attrs(node_));
    x_scale_ = node_.domain == "streamline" && node_.attr_int("x_scale", 0) != 0;
    return ok_status();
  }

 protected:
  Result<Geom3> geometry(const Shape& x, const Shape& w) const {
    const std::string who = node_.describe();
    if (x.rank() < 3 || x.rank() > 5) return unsupported(who + ": input must be rank 3 to 5");
    if (w.rank() != x.rank()) return invalid_argument(who + ": weight rank does not match input rank");
    const size_t nsp = x.rank() - 2, off = 3 - nsp;
    Geom3 g;
    g.n = x[0];
    g.c = x[1];
    g.group = node_.attr_int("group", 1);
    if (g.group < 1 || g.c % g.group != 0) return invalid_argument(who + ": group does not divide input channels");
    if (!transposed_) {
      g.m = w[0];
      if (w[1] * g.group != g.c || g.m % g.group != 0)
        return invalid_argument(who + ": weight shape does not match channels and group");
    } else {
      if (w[0] != g.c) return invalid_argument(who + ": weight shape does not match input channels");
      g.m = w[1] * g.group;
    }
    SL_ASSIGN_OR_RETURN(auto strides, ints_attr(node_, "strides", nsp, 1));
    SL_ASSIGN_OR_RETURN(auto dil, ints_attr(node_, "dilations", nsp, 1));
    SL_ASSIGN_OR_RETURN(auto pads, ints_attr(node_, "pads", 2 * nsp, 0));
    SL_ASSIGN_OR_RETURN(auto opad, ints_attr(node_, "output_padding", nsp, 0));
    std::vector<int64_t> oshape = node_.attr_ints("output_shape");
    if (oshape.size() == nsp + 2) oshape.erase(oshape.begin(), oshape.begin() + 2);
    if (!oshape.empty() && oshape.size() != nsp) return invalid_argument(who + ": bad output_shape");
    const std::vector<int64_t> kshape = node_.attr_ints("kernel_shape");
    const std::string auto_pad = node_.attr_string("auto_pad", "NOTSET");
    const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
    g.y = Shape{g.n, g.m};
    for (size_t i = 0; i < nsp; ++i) {
      const size_t j = i + off;
      g.in[j] = x[i + 2];
      g.k[j] = w[i + 2];
      if (!kshape.empty() && (kshape.size() != nsp || kshape[i] != g.k[j]))
        return invalid_argument(who + ": kernel_shape does not match the weights");
      g.s[j] = strides[i];
      g.d[j] = dil[i];
      if (g.s[j] < 1 || g.d[j] < 1) return invalid_argument(who + ": strides and dilations must be positive");
      const int64_t dk = (g.k[j] - 1) * g.d[j] + 1;
      int64_t pl = pads[i], pr = pads[i + nsp];
      if (auto_pad == "VALID") pl = pr = 0;
      if (!transposed_) {
        if (same) {
          // Output ceil(in / stride); the odd padding unit goes to the end for SAME_UPPER.
          g.out[j] = (g.in[j] + g.s[j] - 1) / g.s[j];
          const int64_t total = std::max<int64_t>(0, (g.out[j] - 1) * g.s[j] + dk - g.in[j]);
          pl = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        } else {
          if (g.in[j] + pl + pr < dk) return invalid_argument(who + ": kernel larger than padded input");
          g.out[j] = (g.in[j] + pl + pr - dk) / g.s[j] + 1;
        }
      } else {
        const int64_t full = g.s[j] * (g.in[j] - 1) + opad[i] + dk;
        if (!oshape.empty() || same) {
          g.out[j] = oshape.empty() ? g.in[j] * g.s[j] : oshape[i];
          const int64_t total = full - g.out[j];
          pl = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        } else {
          g.out[j] = full - pl - pr;
        }
      }
      if (g.out[j] < 1) return invalid_argument(who + ": non-positive output size");
      g.pl[j] = pl;
      g.y.push_back(g.out[j]);
    }
    return g;
  }

  Result<std::vector<Shape>> shapes(const std::vector<Shape>& in, const std::vector<bool>& present) const override {
    if (in.size() < 2 || !present[0] || !present[1]) return invalid_argument(node_.describe() + ": needs X and W");
    SL_ASSIGN_OR_RETURN(Geom3 g, geometry(in[0], in[1]));
    if (present.size() > 2 && present[2] && (in[2].rank() != 1 || in[2][0] != g.m))
      return invalid_argument(node_.describe() + ": bias must be [M]");
    if (present.size() > 3 && present[3] && in[3] != g.y)
      return invalid_argument(node_.describe() + ": residual must have the output's shape");
    if (x_scale_ && (present.size() < 5 || !present[4] || !scale_fits(in[4], g)))
      return invalid_argument(node_.describe() + ": x_scale needs input 4 of shape [1 or N, C, 1...]");
    return std::vector<Shape>{g.y};
  }

  Status compute(std::span<const Tensor> in, std::span<Tensor> out) const override {
    SL_ASSIGN_OR_RETURN(Geom3 g, geometry(in[0].shape(), in[1].shape()));
    const float* x = in[0].data<float>();
    // x_scale: the convolution reads X with each image's channels times S.
    std::vector<float> scaled;
    if (x_scale_) {
      if (in.size() < 5 || !in[4].defined() || !scale_fits(in[4].shape(), g))
        return invalid_argument(node_.describe() + ": x_scale needs input 4 of shape [1 or N, C, 1...]");
      const float* sv = in[4].data<float>();
      const int64_t sp = in[0].shape().numel() / std::max<int64_t>(1, g.n * g.c);
      scaled.resize(static_cast<size_t>(in[0].shape().numel()));
      for (int64_t n = 0; n < g.n; ++n)
        for (int64_t c = 0; c < g.c; ++c) {
          const float f = sv[(in[4].shape()[0] == 1 ? 0 : n) * g.c + c];
          for (int64_t p = 0; p < sp; ++p)
            scaled[static_cast<size_t>((n * g.c + c) * sp + p)] = x[(n * g.c + c) * sp + p] * f;
        }
      x = scaled.data();
    }
    const float* w = in[1].data<float>();
    const float* b = in.size() > 2 && in[2].defined() ? in[2].data<float>() : nullptr;
    const float* z = in.size() > 3 && in[3].defined() ? in[3].data<float>() : nullptr;
    float* y = out[0].data<float>();
    const int64_t cg = g.c / g.group, mg = g.m / g.group;
    const int64_t in_sp = g.in[0] * g.in[1] * g.in[2], out_sp = g.out[0] * g.out[1] * g.out[2];
    const int64_t k_sp = g.k[0] * g.k[1] * g.k[2];
    // Output starts at the bias.
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t m = 0; m < g.m; ++m)
        for (int64_t p = 0; p < out_sp; ++p) y[(n * g.m + m) * out_sp + p] = b ? b[m] : 0.f;
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t grp = 0; grp < g.group; ++grp)
        for (int64_t ml = 0; ml < mg; ++ml)
          for (int64_t cl = 0; cl < cg; ++cl) {
            const int64_t m = grp * mg + ml, c = grp * cg + cl;
            const float* xc = x + (n * g.c + c) * in_sp;
            float* ym = y + (n * g.m + m) * out_sp;
            // Conv weights [M, C/g, k]; ConvTranspose weights [C, M/g, k].
            const float* wk = transposed_ ? w + (c * mg + ml) * k_sp : w + (m * cg + cl) * k_sp;
            for (int64_t k0 = 0; k0 < g.k[0]; ++k0)
              for (int64_t k1 = 0; k1 < g.k[1]; ++k1)
                for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
                  const float wv = wk[(k0 * g.k[1] + k1) * g.k[2] + k2];
                  if (!transposed_) {
                    for (int64_t o0 = 0; o0 < g.out[0]; ++o0) {
                      const int64_t i0 = o0 * g.s[0] - g.pl[0] + k0 * g.d[0];
                      if (i0 < 0 || i0 >= g.in[0]) continue;
                      for (int64_t o1 = 0; o1 < g.out[1]; ++o1) {
                        const int64_t i1 = o1 * g.s[1] - g.pl[1] + k1 * g.d[1];
                        if (i1 < 0 || i1 >= g.in[1]) continue;
                        for (int64_t o2 = 0; o2 < g.out[2]; ++o2) {
                          const int64_t i2 = o2 * g.s[2] - g.pl[2] + k2 * g.d[2];
                          if (i2 < 0 || i2 >= g.in[2]) continue;
                          ym[(o0 * g.out[1] + o1) * g.out[2] + o2] += wv * xc[(i0 * g.in[1] + i1) * g.in[2] + i2];
                        }
                      }
                    }
                  } else {
                    for (int64_t i0 = 0; i0 < g.in[0]; ++i0) {
                      const int64_t o0 = i0 * g.s[0] - g.pl[0] + k0 * g.d[0];
                      if (o0 < 0 || o0 >= g.out[0]) continue;
                      for (int64_t i1 = 0; i1 < g.in[1]; ++i1) {
                        const int64_t o1 = i1 * g.s[1] - g.pl[1] + k1 * g.d[1];
                        if (o1 < 0 || o1 >= g.out[1]) continue;
                        for (int64_t i2 = 0; i2 < g.in[2]; ++i2) {
                          const int64_t o2 = i2 * g.s[2] - g.pl[2] + k2 * g.d[2];
                          if (o2 < 0 || o2 >= g.out[2]) continue;
                          ym[(o0 * g.out[1] + o1) * g.out[2] + o2] += wv * xc[(i0 * g.in[1] + i1) * g.in[2] + i2];
                        }
                      }
                    }
                  }
                }
          }
    const int64_t total = g.y.numel();
    for (int64_t i = 0; i < total; ++i) y[i] = act_(z ? y[i] + z[i] : y[i]);
    const size_t first_extra = graph::conv_epilogue_first_input(node_);
    if (epilogue_ && in.size() >= first_extra) ref_apply_program(*epilogue_, y, g.y, in.subspan(first_extra));
    return ok_status();
  }

 private:
  // S of x_scale: [1 or N, C] followed by unit axes, as many as X has spatial ones.
  static bool scale_fits(const Shape& s, const Geom3& g) {
    if (s.rank() < 3 || (s[0] != 1 && s[0] != g.n) || s[1] != g.c) return false;
    for (size_t i = 2; i < s.rank(); ++i)
      if (s[i] != 1) return false;
    return true;
  }

  bool transposed_;
  bool x_scale_ = false;  // streamline.FusedConv x_scale: input 4 scales X's channels
  RefActivation act_;
  std::optional<graph::EwProgram> epilogue_;  // streamline.FusedConv's ew_* attributes
};

}  // namespace

Status register_conv(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(reg.add(ref_def<RefConv>("Conv", "", 1)));
  SL_RETURN_IF_ERROR(reg.add(ref_def<RefConv>("FusedConv", "streamline", 1)));
  SL_RETURN_IF_ERROR(reg.add(ref_def<RefConv>("ConvTranspose", "", 1)));
  return ok_status();
}

}  // namespace streamline::ops::reference
