// Reference MaxPool, AveragePool, GlobalMaxPool and GlobalAveragePool: one loop over every output
// and its window, per the ONNX specs. 1-D and 2-D pools run as 3-D ones with unit leading axes.
//
// AveragePool divides by the taps inside the input (count_include_pad = 0) or inside the padded
// input [-pad_begin, in + pad_end) (count_include_pad = 1). In ceil_mode a window that would start
// in the end padding is dropped.

#include <cfloat>

#include "ops/reference/ref_nn_util.h"
#include "ops/reference/reference.h"

namespace streamline::ops::reference {
namespace {

struct PoolGeom3 {
  int64_t n = 0, c = 0;
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, pl[3] = {0, 0, 0}, pr[3] = {0, 0, 0};
  Shape y;
};

class RefPool final : public RefKernel {
 public:
  explicit RefPool(const graph::Node& node) : RefKernel(node) {
    global_ = node.op_type == "GlobalMaxPool" || node.op_type == "GlobalAveragePool";
    max_ = node.op_type == "MaxPool" || node.op_type == "GlobalMaxPool";
  }

  Status init() {
    if (node_.outputs.size() > 1 && node_.outputs[1] != graph::kNoValue)
      return unsupported(node_.describe() + ": the Indices output is not supported");
    return ok_status();
  }

 protected:
  Result<PoolGeom3> geometry(const Shape& x) const {
    const std::string who = node_.describe();
    if (x.rank() < 3 || x.rank() > 5) return unsupported(who + ": input must be rank 3 to 5");
    const size_t nsp = x.rank() - 2, off = 3 - nsp;
    PoolGeom3 g;
    g.n = x[0];
    g.c = x[1];
    g.y = Shape{g.n, g.c};
    const std::string auto_pad = node_.attr_string("auto_pad", "NOTSET");
    const bool ceil_mode = node_.attr_int("ceil_mode", 0) != 0;
    std::vector<int64_t> kshape(nsp, 1), strides(nsp, 1), dil(nsp, 1), pads(2 * nsp, 0);
    if (!global_) {
      kshape = node_.attr_ints("kernel_shape");
      if (kshape.size() != nsp) return invalid_argument(who + ": kernel_shape must have one value per spatial axis");
      SL_ASSIGN_OR_RETURN(strides, ints_attr(node_, "strides", nsp, 1));
      SL_ASSIGN_OR_RETURN(dil, ints_attr(node_, "dilations", nsp, 1));
      SL_ASSIGN_OR_RETURN(pads, ints_attr(node_, "pads", 2 * nsp, 0));
    }
    for (size_t i = 0; i < nsp; ++i) {
      const size_t j = i + off;
      g.in[j] = x[i + 2];
      if (global_) {
        g.k[j] = g.in[j];
        g.y.push_back(1);
        continue;
      }
      g.k[j] = kshape[i];
      g.s[j] = strides[i];
      g.d[j] = dil[i];
      const int64_t dk = (g.k[j] - 1) * g.d[j] + 1;
      if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        g.out[j] = (g.in[j] + g.s[j] - 1) / g.s[j];
        const int64_t total = std::max<int64_t>(0, (g.out[j] - 1) * g.s[j] + dk - g.in[j]);
        g.pl[j] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        g.pr[j] = total - g.pl[j];
      } else {
        if (auto_pad != "VALID") {
          g.pl[j] = pads[i];
          g.pr[j] = pads[i + nsp];
        }
        const int64_t span = g.in[j] + g.pl[j] + g.pr[j] - dk;
        if (span < 0) return invalid_argument(who + ": kernel larger than padded input");
        if (ceil_mode) {
          g.out[j] = static_cast<int64_t>(std::ceil(static_cast<double>(span) / g.s[j])) + 1;
          if ((g.out[j] - 1) * g.s[j] >= g.in[j] + g.pl[j]) --g.out[j];
        } else {
          g.out[j] = span / g.s[j] + 1;
        }
      }
      if (g.out[j] < 1) return invalid_argument(who + ": non-positive output size");
      g.y.push_back(g.out[j]);
    }
    return g;
  }

  Result<std::vector<Shape>> shapes(const std::vector<Shape>& in, const std::vector<bool>& present) const override {
    if (in.empty() || !present[0]) return invalid_argument(node_.describe() + ": needs input X");
    SL_ASSIGN_OR_RETURN(PoolGeom3 g, geometry(in[0]));
    return std::vector<Shape>{g.y};
  }

  Status compute(std::span<const Tensor> in, std::span<Tensor> out) const override {
    SL_ASSIGN_OR_RETURN(PoolGeom3 g, geometry(in[0].shape()));
    const bool include_pad = node_.attr_int("count_include_pad", 0) != 0;
    const float* x = in[0].data<float>();
    float* y = out[0].data<float>();
    const int64_t in_sp = g.in[0] * g.in[1] * g.in[2];
    int64_t yi = 0;
    for (int64_t nc = 0; nc < g.n * g.c; ++nc) {
      const float* xc = x + nc * in_sp;
      for (int64_t o0 = 0; o0 < g.out[0]; ++o0)
        for (int64_t o1 = 0; o1 < g.out[1]; ++o1)
          for (int64_t o2 = 0; o2 < g.out[2]; ++o2) {
            float best = -FLT_MAX;
            double sum = 0.0;
            int64_t inside = 0, padded = 0;
            for (int64_t k0 = 0; k0 < g.k[0]; ++k0) {
              const int64_t i0 = o0 * g.s[0] - g.pl[0] + k0 * g.d[0];
              for (int64_t k1 = 0; k1 < g.k[1]; ++k1) {
                const int64_t i1 = o1 * g.s[1] - g.pl[1] + k1 * g.d[1];
                for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
                  const int64_t i2 = o2 * g.s[2] - g.pl[2] + k2 * g.d[2];
                  const bool in_padded = i0 < g.in[0] + g.pr[0] && i1 < g.in[1] + g.pr[1] && i2 < g.in[2] + g.pr[2];
                  if (in_padded) ++padded;
                  if (i0 < 0 || i0 >= g.in[0] || i1 < 0 || i1 >= g.in[1] || i2 < 0 || i2 >= g.in[2]) continue;
                  const float v = xc[(i0 * g.in[1] + i1) * g.in[2] + i2];
                  best = std::max(best, v);
                  sum += v;
                  ++inside;
                }
              }
            }
            if (max_) {
              y[yi++] = best;
            } else {
              const int64_t count = include_pad ? padded : inside;
              y[yi++] = count > 0 ? static_cast<float>(sum / static_cast<double>(count)) : 0.f;
            }
          }
    }
    return ok_status();
  }

 private:
  bool global_ = false;
  bool max_ = false;
};

}  // namespace

Status register_pool(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(reg.add(ref_def<RefPool>("MaxPool", "", 1)));
  SL_RETURN_IF_ERROR(reg.add(ref_def<RefPool>("AveragePool", "", 1)));
  SL_RETURN_IF_ERROR(reg.add(ref_def<RefPool>("GlobalMaxPool", "", 1)));
  SL_RETURN_IF_ERROR(reg.add(ref_def<RefPool>("GlobalAveragePool", "", 1)));
  return ok_status();
}

}  // namespace streamline::ops::reference
