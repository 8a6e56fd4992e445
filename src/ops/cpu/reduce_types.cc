// Reductions (ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare) for float64, float16 and
// bfloat16, which the float32/int kernels of reduce.cc leave out. Defs are keyed by exact dtype.
//
// One pass over the input accumulates in double into a per-output workspace (a first pass finds the
// maxima for ReduceLogSumExp); a reduction over an empty extent gives the identity (0, 1, -inf, inf).

#include <cmath>
#include <limits>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"
#include "ops/op_params.h"

namespace streamline::ops::cpu {
namespace {

enum class Red { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

class TypedReduceKernel final : public DataKernel {
 public:
  TypedReduceKernel(const graph::Node& node, Red op) : DataKernel(node), op_(op) {}

  Status init(const KernelCreateArgs& a) {
    attrs_ = read_reduce_attrs(a.node);
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    SL_ASSIGN_OR_RETURN(ReduceAxes r, reduce_axes(attrs_, in, desc_));
    std::vector<bool>& reduced = r.reduced;
    const Shape& out = r.y;
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, out, Layout::kPlain});
    rr.workspace_bytes = static_cast<size_t>(2 * std::max<int64_t>(out.numel(), 1)) * sizeof(double);
    auto st = std::make_shared<std::vector<bool>>(std::move(reduced));
    rr.state = st;
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const auto& reduced = *static_cast<const std::vector<bool>*>(ctx.state);
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    const DType dt = x.dtype();
    const Shape& s = x.shape();
    const int rank = static_cast<int>(s.rank());
    if (rank > kMaxDataRank) return unsupported_error("rank too large");
    // Output strides per input dimension (0 on reduced dimensions).
    int64_t ostride[kMaxDataRank] = {};
    int64_t stride = 1, count = 1;
    for (int d = rank - 1; d >= 0; --d) {
      if (reduced[static_cast<size_t>(d)]) {
        count *= s[static_cast<size_t>(d)];
        continue;
      }
      ostride[d] = stride;
      stride *= s[static_cast<size_t>(d)];
    }
    const int64_t n_out = y.numel();
    double* acc = static_cast<double*>(ctx.workspace);
    double* mx = acc + std::max<int64_t>(n_out, 1);
    const double init = op_ == Red::kMax || op_ == Red::kLogSumExp ? -INFINITY
                        : op_ == Red::kMin                         ? INFINITY
                        : op_ == Red::kProd                        ? 1.0
                                                                   : 0.0;
    for (int64_t o = 0; o < n_out; ++o) {
      acc[o] = op_ == Red::kLogSumExp ? 0.0 : init;
      mx[o] = -INFINITY;
    }
    auto for_each = [&](auto&& f) {
      int64_t idx[kMaxDataRank] = {};
      int64_t o = 0;
      for (int64_t i = 0; i < x.numel(); ++i) {
        f(o, load_f(dt, x.raw(), i));
        for (int d = rank - 1; d >= 0; --d) {
          o += ostride[d];
          if (++idx[d] < s[static_cast<size_t>(d)]) break;
          o -= ostride[d] * idx[d];
          idx[d] = 0;
        }
      }
    };
    if (op_ == Red::kLogSumExp) for_each([&](int64_t o, double v) { mx[o] = std::max(mx[o], v); });
    for_each([&](int64_t o, double v) {
      switch (op_) {
        case Red::kSum:
        case Red::kMean:
        case Red::kLogSum:
          acc[o] += v;
          break;
        case Red::kMax:
          acc[o] = std::isnan(v) ? v : std::max(acc[o], v);
          break;
        case Red::kMin:
          acc[o] = std::isnan(v) ? v : std::min(acc[o], v);
          break;
        case Red::kProd:
          acc[o] *= v;
          break;
        case Red::kL1:
          acc[o] += std::fabs(v);
          break;
        case Red::kL2:
        case Red::kSumSquare:
          acc[o] += v * v;
          break;
        case Red::kLogSumExp:
          acc[o] += std::isinf(mx[o]) ? std::exp(v) : std::exp(v - mx[o]);
          break;
      }
    });
    for (int64_t o = 0; o < n_out; ++o) {
      double v = acc[o];
      if (op_ == Red::kMean) v /= static_cast<double>(count);
      if (op_ == Red::kL2) v = std::sqrt(v);
      if (op_ == Red::kLogSum) v = std::log(v);
      if (op_ == Red::kLogSumExp) v = std::log(v) + (std::isinf(mx[o]) ? 0.0 : mx[o]);
      store_f(y.dtype(), y.raw(), o, v);
    }
    return ok_status();
  }

 private:
  Red op_;
  ReduceAttrs attrs_;
};

struct Spec {
  const char* name;
  Red op;
};

constexpr Spec kSpecs[] = {
    {"ReduceSum", Red::kSum},
    {"ReduceMean", Red::kMean},
    {"ReduceMax", Red::kMax},
    {"ReduceMin", Red::kMin},
    {"ReduceProd", Red::kProd},
    {"ReduceL1", Red::kL1},
    {"ReduceL2", Red::kL2},
    {"ReduceLogSum", Red::kLogSum},
    {"ReduceLogSumExp", Red::kLogSumExp},
    {"ReduceSumSquare", Red::kSumSquare},
};

}  // namespace

Status register_reduce_types(KernelRegistry& reg) {
  for (const Spec& s : kSpecs) {
    const Red op = s.op;
    for (DType t : {DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
      SL_RETURN_IF_ERROR(
          add_typed_def(reg, s.name, 1, t, [op](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
            auto k = std::make_unique<TypedReduceKernel>(a.node, op);
            SL_RETURN_IF_ERROR(k->init(a));
            return std::unique_ptr<Kernel>(std::move(k));
          }));
    }
  }
  return ok_status();
}

}  // namespace streamline::ops::cpu
