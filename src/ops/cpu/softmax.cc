// Softmax, LogSoftmax and Hardmax. Before opset 13 the input is flattened to 2-D at `axis` (default 1)
// and each row is normalised; from opset 13 only the `axis` dimension (default -1) is. float32 runs
// the vectorised loops below; float64, float16 and bfloat16 a plain loop in double.
//
// Contiguous rows (the last axis, or any pre-13 axis) use lane-parallel max/sum reductions; an inner
// axis is processed in tiles of columns so the loops still run over contiguous memory.

#include <cmath>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"
#include "ops/cpu/math_vec.h"

namespace streamline::ops::cpu::math {
namespace {

enum class SoftmaxKind { kSoftmax, kLogSoftmax, kHardmax };

constexpr int64_t kTile = 64;  // columns per tile when the axis is not innermost

struct Geometry {
  int64_t outer = 1;  // independent blocks
  int64_t len = 1;    // elements along the normalised axis
  int64_t inner = 1;  // stride between consecutive axis elements
};

void softmax_row(SoftmaxKind kind, const float* x, float* y, int64_t n) {
  if (n == 0) return;
  if (kind == SoftmaxKind::kHardmax) {
    int64_t arg = 0;
    float best = x[0];
    for (int64_t i = 1; i < n; ++i)
      if (x[i] > best) {
        best = x[i];
        arg = i;
      }
    for (int64_t i = 0; i < n; ++i) y[i] = 0.f;
    y[arg] = 1.f;
    return;
  }
  const float m = vec::reduce_max(x, n);
  if (kind == SoftmaxKind::kSoftmax) {
    const float inv = 1.f / vec::exp_shifted_sum(x, y, n, m);
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
  } else {
    const float s = vec::reduce_sum_map(x, n, [m](float v) { return vec::exp(v - m); });
    // (x - m) - log(s) rather than x - (m + log(s)): the latter rounds m + log(s) at m's scale.
    const float log_s = std::log(s);
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) - log_s;
  }
}

// One tile of `w` columns of a [len, inner] block starting at column offset 0 of x/y.
void softmax_tile(SoftmaxKind kind, const float* x, float* y, int64_t len, int64_t inner, int64_t w) {
  if (len == 0) return;
  float mx[kTile], sum[kTile];
  int64_t arg[kTile];
  for (int64_t j = 0; j < w; ++j) {
    mx[j] = x[j];
    arg[j] = 0;
  }
  for (int64_t k = 1; k < len; ++k) {
    const float* row = x + k * inner;
    for (int64_t j = 0; j < w; ++j) {
      const bool better = row[j] > mx[j];
      mx[j] = better ? row[j] : mx[j];
      arg[j] = better ? k : arg[j];
    }
  }
  if (kind == SoftmaxKind::kHardmax) {
    for (int64_t k = 0; k < len; ++k) {
      float* out = y + k * inner;
      for (int64_t j = 0; j < w; ++j) out[j] = arg[j] == k ? 1.f : 0.f;
    }
    return;
  }
  for (int64_t j = 0; j < w; ++j) sum[j] = 0.f;
  for (int64_t k = 0; k < len; ++k) {
    const float* row = x + k * inner;
    float* out = y + k * inner;
    for (int64_t j = 0; j < w; ++j) {
      const float e = vec::exp(row[j] - mx[j]);
      sum[j] += e;
      if (kind == SoftmaxKind::kSoftmax) out[j] = e;
    }
  }
  if (kind == SoftmaxKind::kSoftmax) {
    for (int64_t j = 0; j < w; ++j) sum[j] = 1.f / sum[j];
    for (int64_t k = 0; k < len; ++k) {
      float* out = y + k * inner;
      for (int64_t j = 0; j < w; ++j) out[j] *= sum[j];
    }
  } else {
    for (int64_t j = 0; j < w; ++j) sum[j] = std::log(sum[j]);
    for (int64_t k = 0; k < len; ++k) {
      const float* row = x + k * inner;
      float* out = y + k * inner;
      for (int64_t j = 0; j < w; ++j) out[j] = (row[j] - mx[j]) - sum[j];
    }
  }
}

class SoftmaxKernel final : public Kernel {
 public:
  SoftmaxKernel(const graph::Node& node, SoftmaxKind kind)
      : node_(node), kind_(kind), axis_(node.attr_int("axis", node.opset < 13 ? 1 : -1)) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    if (inputs.size() != 1 || !inputs[0].present()) return invalid_argument(node_prefix(node_) + "expected 1 input");
    SL_RETURN_IF_ERROR(
        check_dtype(node_, inputs[0].dtype, {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}));
    SL_RETURN_IF_ERROR(geometry(inputs[0].shape).status());
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{inputs[0].dtype, inputs[0].shape, Layout::kPlain});
    rr.inplace = {0};
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    SL_ASSIGN_OR_RETURN(Geometry g, geometry(ctx.inputs[0].shape()));
    if (ctx.inputs[0].dtype() != DType::kFloat32) {
      run_double(ctx, g);
      return ok_status();
    }
    const float* x = ctx.inputs[0].data<float>();
    float* y = ctx.outputs[0].data<float>();
    const SoftmaxKind kind = kind_;
    const int64_t block = g.len * g.inner;
    if (g.inner == 1) {
      const int64_t rows_per_task = std::max<int64_t>(1, kExpensiveGrain / std::max<int64_t>(g.len, 1));
      parallel_chunks(g.outer, rows_per_task, ctx.num_threads, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) softmax_row(kind, x + r * g.len, y + r * g.len, g.len);
      });
      return ok_status();
    }
    const int64_t tiles = (g.inner + kTile - 1) / kTile;
    const int64_t tasks = g.outer * tiles;
    const int64_t per_task = std::max<int64_t>(1, kExpensiveGrain / std::max<int64_t>(g.len * kTile, 1));
    parallel_chunks(tasks, per_task, ctx.num_threads, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t o = t / tiles, col = (t % tiles) * kTile;
        const int64_t off = o * block + col;
        softmax_tile(kind, x + off, y + off, g.len, g.inner, std::min(kTile, g.inner - col));
      }
    });
    return ok_status();
  }

 private:
  // Any floating dtype through double: one pass for the max (and Hardmax's argmax), one for the sum.
  void run_double(const RunContext& ctx, const Geometry& g) const {
    const Tensor& xt = ctx.inputs[0];
    Tensor& yt = ctx.outputs[0];
    const DType dt = xt.dtype();
    for (int64_t o = 0; o < g.outer; ++o)
      for (int64_t i = 0; i < g.inner; ++i) {
        const int64_t base = o * g.len * g.inner + i;
        if (g.len == 0) continue;
        double mx = load_f(dt, xt.raw(), base);
        int64_t arg = 0;
        for (int64_t k = 1; k < g.len; ++k) {
          const double v = load_f(dt, xt.raw(), base + k * g.inner);
          if (v > mx) {
            mx = v;
            arg = k;
          }
        }
        double sum = 0;
        for (int64_t k = 0; k < g.len && kind_ != SoftmaxKind::kHardmax; ++k)
          sum += std::exp(load_f(dt, xt.raw(), base + k * g.inner) - mx);
        for (int64_t k = 0; k < g.len; ++k) {
          const int64_t e = base + k * g.inner;
          const double v = load_f(dt, xt.raw(), e) - mx;
          const double r = kind_ == SoftmaxKind::kHardmax   ? (k == arg ? 1.0 : 0.0)
                           : kind_ == SoftmaxKind::kSoftmax ? std::exp(v) / sum
                                                            : v - std::log(sum);
          store_f(dt, yt.raw(), e, r);
        }
      }
  }

  Result<Geometry> geometry(const Shape& s) const {
    const int64_t rank = static_cast<int64_t>(s.rank());
    Geometry g;
    if (rank == 0) return g;  // a scalar is its own single-element row
    SL_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(axis_, rank, node_.describe()));
    for (int64_t d = 0; d < axis; ++d) g.outer *= s[d];
    if (node_.opset < 13) {
      for (int64_t d = axis; d < rank; ++d) g.len *= s[d];
    } else {
      g.len = s[axis];
      for (int64_t d = axis + 1; d < rank; ++d) g.inner *= s[d];
    }
    return g;
  }

  graph::Node node_;
  SoftmaxKind kind_;
  int64_t axis_;
};

KernelFactory softmax_factory(SoftmaxKind kind) {
  return [kind](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<SoftmaxKernel>(args.node, kind));
  };
}

}  // namespace

}  // namespace streamline::ops::cpu::math

namespace streamline::ops::cpu {

Status register_softmax(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(
      math::register_ops(reg, {"Softmax"}, 1, INT_MAX, math::softmax_factory(math::SoftmaxKind::kSoftmax)));
  SL_RETURN_IF_ERROR(
      math::register_ops(reg, {"LogSoftmax"}, 1, INT_MAX, math::softmax_factory(math::SoftmaxKind::kLogSoftmax)));
  return math::register_ops(reg, {"Hardmax"}, 1, INT_MAX, math::softmax_factory(math::SoftmaxKind::kHardmax));
}

}  // namespace streamline::ops::cpu
