// Pools that oneDNN's float32 primitive does not cover, as direct window loops: LpPool (opsets 1, 2,
// 11, and 18 with ceil_mode and dilations) and GlobalLpPool for the floating types; MaxPool and
// AveragePool for int8/uint8 (MaxPool), float16, bfloat16 and float64; MaxPool's Indices output
// for any dtype (make_direct_pool, used by the float32 def when the node asks for Indices, and by
// the 8-bit MaxPool def of qelementwise.cc for what its own kernel does not serve).
//
// Windows follow op_params' pool_axes (auto_pad, pads, strides, dilations, ceil_mode). Per output:
//   max   the largest tap inside the input; Indices is its offset in X (row-major, or with
//         storage_order = 1 column-major within each [spatial] plane);
//   avg   the mean of the taps inside the input, or with count_include_pad of the taps inside the
//         padded input;
//   lp    (sum over the taps inside the input of |x|^p)^(1/p).
// 1-D and 2-D pools run as 3-D ones with unit leading axes.

#include "ops/cpu/pool_direct.h"

#include <cmath>
#include <limits>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"
#include "ops/op_params.h"

namespace streamline::ops::cpu {
namespace {

enum class Kind { kMax, kAvg, kLp };

struct Geom3 {
  int64_t n = 0, c = 0;
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, pl[3] = {0, 0, 0}, pe[3] = {0, 0, 0};
  Shape y;
};

class DirectPoolKernel final : public DataKernel {
 public:
  DirectPoolKernel(const graph::Node& node, Kind kind, bool global) : DataKernel(node), kind_(kind), global_(global) {}

  Status init(const KernelCreateArgs& a) {
    const graph::Node& node = a.node;
    SL_ASSIGN_OR_RETURN(attrs_, read_pool_attrs(node, global_, desc_));
    indices_ = node.outputs.size() > 1 && node.outputs[1] != graph::kNoValue;
    if (indices_ && kind_ != Kind::kMax) return invalid("only MaxPool has an Indices output");
    column_major_ = node.attr_int("storage_order", 0) != 0;
    if (kind_ == Kind::kLp) {
      // LpPool-1 had p as a float attribute; from opset 2 it is an int.
      auto it = node.attrs.find("p");
      p_ = 2.0;
      if (it != node.attrs.end())
        p_ = it->second.kind == graph::Attribute::Kind::kFloat ? it->second.f : static_cast<double>(it->second.i);
      if (!(p_ > 0)) return invalid("p must be positive");
    }
    if (kind_ == Kind::kLp && opset_ < 18 && (attrs_.ceil_mode || !attrs_.dilations.empty()))
      return invalid("ceil_mode and dilations need LpPool-18 (the model imports opset " + std::to_string(opset_) + ")");
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid("needs input X");
    const DType dt = in[0].dtype;
    const bool ok = is_float_dtype(dt) || (kind_ == Kind::kMax && (dt == DType::kInt8 || dt == DType::kUInt8));
    if (!ok) return unsupported_error(std::string("dtype ") + dtype_name(dt));
    SL_ASSIGN_OR_RETURN(Geom3 g, geometry(in[0].shape));
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{dt, g.y, Layout::kPlain});
    if (indices_) rr.outputs.push_back(OutputInfo{DType::kInt64, g.y, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    SL_ASSIGN_OR_RETURN(Geom3 g, geometry(ctx.inputs[0].shape()));
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    int64_t* idx = indices_ && ctx.outputs.size() > 1 ? ctx.outputs[1].data<int64_t>() : nullptr;
    const DType dt = x.dtype();
    const int64_t plane = g.in[0] * g.in[1] * g.in[2];
    const int64_t outs = g.out[0] * g.out[1] * g.out[2];
    const bool include_pad = attrs_.count_include_pad;
#pragma omp parallel for num_threads(omp_threads(ctx.num_threads)) if (g.n * g.c * outs > 4096) schedule(static)
    for (int64_t nc = 0; nc < g.n * g.c; ++nc) {
      const int64_t base = nc * plane;
      for (int64_t o = 0; o < outs; ++o) {
        const int64_t o0 = o / (g.out[1] * g.out[2]), o1 = (o / g.out[2]) % g.out[1], o2 = o % g.out[2];
        double best = -std::numeric_limits<double>::infinity(), acc = 0.0;
        int64_t best_at = -1, inside = 0, padded = 0;
        for (int64_t k0 = 0; k0 < g.k[0]; ++k0) {
          const int64_t i0 = o0 * g.s[0] - g.pl[0] + k0 * g.d[0];
          for (int64_t k1 = 0; k1 < g.k[1]; ++k1) {
            const int64_t i1 = o1 * g.s[1] - g.pl[1] + k1 * g.d[1];
            for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
              const int64_t i2 = o2 * g.s[2] - g.pl[2] + k2 * g.d[2];
              if (i0 < g.in[0] + g.pe[0] && i1 < g.in[1] + g.pe[1] && i2 < g.in[2] + g.pe[2]) ++padded;
              if (i0 < 0 || i1 < 0 || i2 < 0 || i0 >= g.in[0] || i1 >= g.in[1] || i2 >= g.in[2]) continue;
              const int64_t at = (i0 * g.in[1] + i1) * g.in[2] + i2;
              const double v = load_f(dt, x.raw(), base + at);
              ++inside;
              if (kind_ == Kind::kMax) {
                if (best_at < 0 || v > best) {
                  best = v;
                  best_at = at;
                }
              } else if (kind_ == Kind::kAvg) {
                acc += v;
              } else {
                acc += std::pow(std::fabs(v), p_);
              }
            }
          }
        }
        const int64_t yi = nc * outs + o;
        double r = 0.0;
        if (kind_ == Kind::kMax) {
          r = best;
        } else if (kind_ == Kind::kAvg) {
          const int64_t count = include_pad ? padded : inside;
          r = count > 0 ? acc / static_cast<double>(count) : 0.0;
        } else {
          r = std::pow(acc, 1.0 / p_);
        }
        store_f(y.dtype(), y.raw(), yi, r);
        if (idx) idx[yi] = nc * plane + index_in_plane(g, best_at);
      }
    }
    return ok_status();
  }

 private:
  // A row-major offset in the [spatial] plane, re-expressed column-major when storage_order = 1.
  int64_t index_in_plane(const Geom3& g, int64_t at) const {
    if (!column_major_ || at < 0) return at;
    const int64_t i2 = at % g.in[2], i1 = (at / g.in[2]) % g.in[1], i0 = at / (g.in[1] * g.in[2]);
    // Spatial axes of the original rank, last varying slowest.
    return (i2 * g.in[1] + i1) * g.in[0] + i0;
  }

  Result<Geom3> geometry(const Shape& x) const {
    if (x.rank() < 3 || x.rank() > 5) return unsupported_error("input must be rank 3 to 5");
    SL_ASSIGN_OR_RETURN(std::vector<PoolAxis> axes, pool_axes(attrs_, x, global_, desc_));
    const size_t nsp = x.rank() - 2, off = 3 - nsp;
    Geom3 g;
    g.n = x[0];
    g.c = x[1];
    g.y = Shape{g.n, g.c};
    for (size_t i = 0; i < nsp; ++i) {
      const PoolAxis& a = axes[i];
      const size_t j = i + off;
      g.in[j] = a.in;
      g.k[j] = a.k;
      g.s[j] = a.s;
      g.d[j] = a.d;
      g.pl[j] = a.pad_begin;
      g.pe[j] = a.pad_end;
      g.out[j] = a.out;
      g.y.push_back(a.out);
    }
    return g;
  }

  Kind kind_;
  bool global_;
  PoolAttrs attrs_;
  bool indices_ = false;
  bool column_major_ = false;
  double p_ = 2.0;
};

KernelFactory factory(Kind kind, bool global) {
  return [kind, global](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    auto k = std::make_unique<DirectPoolKernel>(a.node, kind, global);
    SL_RETURN_IF_ERROR(k->init(a));
    return std::unique_ptr<Kernel>(std::move(k));
  };
}

}  // namespace

Result<std::unique_ptr<Kernel>> make_direct_pool(const KernelCreateArgs& args) {
  const std::string& op = args.node.op_type;
  const Kind kind = op == "MaxPool" ? Kind::kMax : op == "AveragePool" ? Kind::kAvg : Kind::kLp;
  return factory(kind, op == "GlobalLpPool")(args);
}

Status register_pool_direct(KernelRegistry& reg) {
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    SL_RETURN_IF_ERROR(add_typed_def(reg, "LpPool", 1, t, factory(Kind::kLp, false)));
    SL_RETURN_IF_ERROR(add_typed_def(reg, "GlobalLpPool", 1, t, factory(Kind::kLp, true)));
    if (t == DType::kFloat32) continue;  // float32 max/avg pools run on oneDNN (pool.cc)
    SL_RETURN_IF_ERROR(add_typed_def(reg, "MaxPool", 1, t, factory(Kind::kMax, false)));
    SL_RETURN_IF_ERROR(add_typed_def(reg, "AveragePool", 1, t, factory(Kind::kAvg, false)));
  }
  // int8/uint8 MaxPool is registered with the int8 kernels (qelementwise.cc), which send the
  // pools QMaxPoolKernel does not serve (not 2-D, or with Indices) to make_direct_pool.
  return ok_status();
}

}  // namespace streamline::ops::cpu
