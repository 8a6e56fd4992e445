// Reduce* and ArgMax/ArgMin. Axes are an attribute up to opset 17 and input 1 from opset 18
// (ReduceSum from opset 13), read by reduce_axes() (ops/op_params.h) as on CUDA; ReduceMax/ReduceMin
// take int8/uint8 (opset 12) and bool (opset 20).
//
// Two loop shapes cover every axis set (see math_reduce.h for the grouping):
//   inner dims reduced: each output reduces contiguous runs with lane-parallel accumulators;
//   inner dims kept:    each output row accumulates input rows elementwise (vectorised across the row).

#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"
#include "ops/cpu/math_reduce.h"
#include "ops/cpu/math_vec.h"

namespace streamline::ops::cpu::math {
namespace {

enum class ReduceOp { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

bool int_capable(ReduceOp op) {
  return op == ReduceOp::kSum || op == ReduceOp::kMean || op == ReduceOp::kMax || op == ReduceOp::kMin ||
         op == ReduceOp::kProd;
}

template <typename T>
T wrapping_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename T>
T wrapping_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

// Accumulator for combining partial results: double for float data (keeps long sums accurate).
template <typename T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;

// Reduction of n contiguous elements: 16 independent lanes (vectorises without reassociation), folded
// into an Acc<T> every kBlock elements so rounding error does not grow with n.
template <typename T, typename Map, typename Combine>
Acc<T> reduce_run(const T* x, int64_t n, T init, Map map, Combine comb) {
  constexpr int kLanes = 16;
  constexpr int64_t kBlock = 1024;
  Acc<T> total = init;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t end = std::min(n, start + kBlock);
    T acc[kLanes];
    for (int j = 0; j < kLanes; ++j) acc[j] = init;
    int64_t i = start;
    for (; i + kLanes <= end; i += kLanes)
      for (int j = 0; j < kLanes; ++j) acc[j] = static_cast<T>(comb(acc[j], map(x[i + j])));
    for (; i < end; ++i) acc[0] = static_cast<T>(comb(acc[0], map(x[i])));
    for (int w = kLanes / 2; w > 0; w /= 2)
      for (int j = 0; j < w; ++j) acc[j] = static_cast<T>(comb(acc[j], acc[j + w]));
    total = comb(total, static_cast<Acc<T>>(acc[0]));
  }
  return total;
}

struct ReduceState {
  ReducePlan plan;
  bool identity = false;  // noop_with_empty_axes with no axes: output = input
};

class ReduceKernel final : public Kernel {
 public:
  ReduceKernel(const graph::Node& node, ReduceOp op) : node_(node), op_(op), attrs_(read_reduce_attrs(node)) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    if (inputs.empty() || !inputs[0].present()) return invalid_argument(node_prefix(node_) + "missing input");
    const DType dt = inputs[0].dtype;
    if (op_ == ReduceOp::kMax || op_ == ReduceOp::kMin) {
      SL_RETURN_IF_ERROR(check_dtype(
          node_, dt, {DType::kFloat32, DType::kInt32, DType::kInt64, DType::kInt8, DType::kUInt8, DType::kBool}));
    } else if (int_capable(op_)) {
      SL_RETURN_IF_ERROR(check_dtype(node_, dt, {DType::kFloat32, DType::kInt32, DType::kInt64}));
    } else
      SL_RETURN_IF_ERROR(check_dtype(node_, dt, {DType::kFloat32}));
    const Shape& in = inputs[0].shape;
    const int64_t rank = static_cast<int64_t>(in.rank());
    if (rank > 32) return unsupported(node_prefix(node_) + "rank above 32");

    SL_ASSIGN_OR_RETURN(ReduceAxes r, reduce_axes(attrs_, inputs, node_.describe()));
    auto state = std::make_shared<ReduceState>();
    state->identity = r.identity;
    const Shape& out = r.y;
    state->plan = make_reduce_plan(in, r.reduced);

    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{dt, out, Layout::kPlain});
    if (op_ == ReduceOp::kLogSumExp) rr.workspace_bytes = static_cast<size_t>(out.numel()) * sizeof(float);
    rr.state = std::move(state);
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const auto* st = static_cast<const ReduceState*>(ctx.state);
    if (!st) return internal_error(node_prefix(node_) + "run without reshape state");
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    if (st->identity) {
      if (y.raw() != x.raw()) std::memcpy(y.raw(), x.raw(), x.nbytes());
      return ok_status();
    }
    switch (x.dtype()) {
      case DType::kFloat32:
        run_float(ctx, st->plan);
        break;
      case DType::kInt32:
        run_int<int32_t>(ctx, st->plan);
        break;
      case DType::kInt64:
        run_int<int64_t>(ctx, st->plan);
        break;
      case DType::kInt8:
        run_int<int8_t>(ctx, st->plan);
        break;
      case DType::kUInt8:
      case DType::kBool:  // max is "any", min is "all" on 0/1 bytes
        run_int<uint8_t>(ctx, st->plan);
        break;
      default:
        return internal_error(node_prefix(node_) + "unexpected dtype");
    }
    return ok_status();
  }

 private:
  // Writes comb-reduction of map(x) into y for every output (before any finalisation). `comb` must
  // accept mixed T / Acc<T> arguments (generic lambdas).
  template <typename T, typename Map, typename Combine>
  static void reduce_all(const ReducePlan& p, const T* x, T* y, T init, Map map, Combine comb, int threads) {
    if (p.inner_reduced()) {
      const int64_t run = p.inner();
      const int64_t grain = std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(p.reduce_count, 1));
      parallel_chunks(p.out_numel, grain, threads, [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
          const T* base = x + kept_offset(p, o, false);
          Acc<T> acc = init;
          for_each_reduced(p, true,
                           [&](int64_t off) { acc = comb(acc, reduce_run(base + off, run, init, map, comb)); });
          y[o] = static_cast<T>(acc);
        }
      });
      return;
    }
    // Inner dims kept: rows of up to kChunk outputs accumulate input rows; every kBlock rows the
    // block's partial row is folded into the output row (two-level summation).
    constexpr int64_t kChunk = 512, kBlock = 128;
    const int64_t k = p.inner();
    const int64_t chunk = std::min<int64_t>(k, kChunk);
    const int64_t chunks = (k + chunk - 1) / chunk;
    const int64_t rows = p.out_numel / std::max<int64_t>(k, 1);
    const int64_t grain = std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(p.reduce_count * chunk, 1));
    parallel_chunks(rows * chunks, grain, threads, [&](int64_t b, int64_t e) {
      T part[kChunk];
      for (int64_t t = b; t < e; ++t) {
        const int64_t row = t / chunks, c0 = (t % chunks) * chunk, w = std::min(chunk, k - c0);
        const T* base = x + kept_offset(p, row, true) + c0;
        T* out = y + row * k + c0;
        for (int64_t j = 0; j < w; ++j) out[j] = part[j] = init;
        int64_t in_block = 0;
        for_each_reduced(p, false, [&](int64_t off) {
          const T* in = base + off;
          for (int64_t j = 0; j < w; ++j) part[j] = static_cast<T>(comb(part[j], map(in[j])));
          if (++in_block == kBlock) {
            for (int64_t j = 0; j < w; ++j) out[j] = static_cast<T>(comb(out[j], part[j]));
            for (int64_t j = 0; j < w; ++j) part[j] = init;
            in_block = 0;
          }
        });
        for (int64_t j = 0; j < w; ++j) out[j] = static_cast<T>(comb(out[j], part[j]));
      }
    });
  }

  void run_float(const RunContext& ctx, const ReducePlan& p) const {
    const float* x = ctx.inputs[0].data<float>();
    float* y = ctx.outputs[0].data<float>();
    const int n = ctx.num_threads;
    const int64_t out_n = ctx.outputs[0].numel();
    const auto ident = [](float v) { return v; };
    const auto add = [](auto a, auto b) { return a + b; };
    const auto mx = [](auto a, auto b) { return a > b ? a : b; };
    const auto mn = [](auto a, auto b) { return a < b ? a : b; };
    const float inf = std::numeric_limits<float>::infinity();
    switch (op_) {
      case ReduceOp::kSum:
      case ReduceOp::kMean:
      case ReduceOp::kLogSum:
        reduce_all(p, x, y, 0.f, ident, add, n);
        break;
      case ReduceOp::kSumSquare:
      case ReduceOp::kL2:
        reduce_all(
            p, x, y, 0.f, [](float v) { return v * v; }, add, n);
        break;
      case ReduceOp::kL1:
        reduce_all(
            p, x, y, 0.f, [](float v) { return std::fabs(v); }, add, n);
        break;
      case ReduceOp::kMax:
        reduce_all(p, x, y, -inf, ident, mx, n);
        break;
      case ReduceOp::kMin:
        reduce_all(p, x, y, inf, ident, mn, n);
        break;
      case ReduceOp::kProd:
        reduce_all(
            p, x, y, 1.f, ident, [](auto a, auto b) { return a * b; }, n);
        break;
      case ReduceOp::kLogSumExp:
        log_sum_exp(ctx, p);
        return;
    }
    const float count = static_cast<float>(p.reduce_count);
    parallel_chunks(out_n, kCheapGrain, n, [&](int64_t b, int64_t e) {
      switch (op_) {
        case ReduceOp::kMean:
          for (int64_t i = b; i < e; ++i) y[i] = y[i] / count;
          break;
        case ReduceOp::kL2:
          vec::sqrt_array(y + b, y + b, e - b);
          break;
        case ReduceOp::kLogSum:
          for (int64_t i = b; i < e; ++i) y[i] = vec::log(y[i]);
          break;
        default:
          break;
      }
    });
  }

  // log(sum(exp(x - max))) + max, with the per-output max kept in the workspace.
  void log_sum_exp(const RunContext& ctx, const ReducePlan& p) const {
    const float* x = ctx.inputs[0].data<float>();
    float* y = ctx.outputs[0].data<float>();
    auto* m = static_cast<float*>(ctx.workspace);
    const float inf = std::numeric_limits<float>::infinity();
    reduce_all(
        p, x, m, -inf, [](float v) { return v; }, [](auto a, auto b) { return a > b ? a : b; }, ctx.num_threads);
    if (p.inner_reduced()) {
      const int64_t run = p.inner();
      parallel_chunks(p.out_numel, std::max<int64_t>(1, kExpensiveGrain / std::max<int64_t>(p.reduce_count, 1)),
                      ctx.num_threads, [&](int64_t b, int64_t e) {
                        for (int64_t o = b; o < e; ++o) {
                          const float* base = x + kept_offset(p, o, false);
                          const float shift = std::isinf(m[o]) ? 0.f : m[o];
                          double acc = 0.0;
                          for_each_reduced(p, true, [&](int64_t off) {
                            acc +=
                                vec::reduce_sum_map(base + off, run, [shift](float v) { return vec::exp(v - shift); });
                          });
                          y[o] = static_cast<float>(std::log(acc)) + shift;
                        }
                      });
      return;
    }
    const int64_t k = p.inner();
    const int64_t rows = p.out_numel / std::max<int64_t>(k, 1);
    parallel_chunks(rows, std::max<int64_t>(1, kExpensiveGrain / std::max<int64_t>(p.reduce_count * k, 1)),
                    ctx.num_threads, [&](int64_t b, int64_t e) {
                      for (int64_t row = b; row < e; ++row) {
                        const float* base = x + kept_offset(p, row, true);
                        float* out = y + row * k;
                        float* shift = m + row * k;
                        for (int64_t j = 0; j < k; ++j) {
                          shift[j] = std::isinf(shift[j]) ? 0.f : shift[j];
                          out[j] = 0.f;
                        }
                        for_each_reduced(p, false, [&](int64_t off) {
                          const float* in = base + off;
                          for (int64_t j = 0; j < k; ++j) out[j] += vec::exp(in[j] - shift[j]);
                        });
                        for (int64_t j = 0; j < k; ++j) out[j] = std::log(out[j]) + shift[j];
                      }
                    });
  }

  template <typename T>
  void run_int(const RunContext& ctx, const ReducePlan& p) const {
    const T* x = ctx.inputs[0].data<T>();
    T* y = ctx.outputs[0].data<T>();
    const int n = ctx.num_threads;
    const auto ident = [](T v) { return v; };
    switch (op_) {
      case ReduceOp::kSum:
      case ReduceOp::kMean:
        reduce_all(p, x, y, T{0}, ident, wrapping_add<T>, n);
        break;
      case ReduceOp::kMax:
        reduce_all(
            p, x, y, std::numeric_limits<T>::lowest(), ident, [](T a, T b) { return a > b ? a : b; }, n);
        break;
      case ReduceOp::kMin:
        reduce_all(
            p, x, y, std::numeric_limits<T>::max(), ident, [](T a, T b) { return a < b ? a : b; }, n);
        break;
      case ReduceOp::kProd:
        reduce_all(p, x, y, T{1}, ident, wrapping_mul<T>, n);
        break;
      default:
        break;
    }
    if (op_ == ReduceOp::kMean && p.reduce_count > 0) {
      const T count = static_cast<T>(p.reduce_count);
      for (int64_t i = 0; i < ctx.outputs[0].numel(); ++i) y[i] = y[i] / count;
    }
  }

  graph::Node node_;
  ReduceOp op_;
  ReduceAttrs attrs_;
};

// ArgMax / ArgMin along one axis; the first extreme wins unless select_last_index.
class ArgReduceKernel final : public Kernel {
 public:
  ArgReduceKernel(const graph::Node& node, bool is_max)
      : node_(node),
        is_max_(is_max),
        axis_(node.attr_int("axis", 0)),
        keepdims_(node.attr_int("keepdims", 1) != 0),
        last_(node.attr_int("select_last_index", 0) != 0) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    if (inputs.size() != 1 || !inputs[0].present()) return invalid_argument(node_prefix(node_) + "expected 1 input");
    SL_RETURN_IF_ERROR(check_dtype(node_, inputs[0].dtype, {DType::kFloat32, DType::kInt32, DType::kInt64}));
    const Shape& in = inputs[0].shape;
    SL_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(axis_, static_cast<int64_t>(in.rank()), node_.describe()));
    if (in[static_cast<size_t>(axis)] == 0)
      return invalid_argument(node_prefix(node_) + "cannot take the arg of an empty axis");
    Shape out;
    for (size_t d = 0; d < in.rank(); ++d) {
      if (static_cast<int64_t>(d) != axis)
        out.push_back(in[d]);
      else if (keepdims_)
        out.push_back(1);
    }
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{DType::kInt64, out, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    switch (ctx.inputs[0].dtype()) {
      case DType::kFloat32:
        return run_typed<float>(ctx);
      case DType::kInt32:
        return run_typed<int32_t>(ctx);
      case DType::kInt64:
        return run_typed<int64_t>(ctx);
      default:
        return internal_error(node_prefix(node_) + "unexpected dtype");
    }
  }

 private:
  template <typename T>
  Status run_typed(const RunContext& ctx) const {
    const Shape& s = ctx.inputs[0].shape();
    SL_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(axis_, static_cast<int64_t>(s.rank()), node_.describe()));
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= s[d];
    for (size_t d = static_cast<size_t>(axis) + 1; d < s.rank(); ++d) inner *= s[d];
    const int64_t len = s[static_cast<size_t>(axis)];
    const T* x = ctx.inputs[0].data<T>();
    int64_t* y = ctx.outputs[0].data<int64_t>();
    // better(v, best): strictly more extreme, or equally extreme when the last index is wanted.
    const bool is_max = is_max_, last = last_;
    const auto better = [is_max, last](T v, T best) {
      return is_max ? (v > best || (last && v == best)) : (v < best || (last && v == best));
    };
    constexpr int64_t kTile = 64;
    const int64_t tiles = (inner + kTile - 1) / kTile;
    const int64_t grain = std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(len * std::min(inner, kTile), 1));
    parallel_chunks(outer * tiles, grain, ctx.num_threads, [&](int64_t b, int64_t e) {
      T best[kTile];
      int64_t arg[kTile];
      for (int64_t t = b; t < e; ++t) {
        const int64_t o = t / tiles, c0 = (t % tiles) * kTile, w = std::min(kTile, inner - c0);
        const T* base = x + o * len * inner + c0;
        for (int64_t j = 0; j < w; ++j) {
          best[j] = base[j];
          arg[j] = 0;
        }
        for (int64_t k = 1; k < len; ++k) {
          const T* row = base + k * inner;
          for (int64_t j = 0; j < w; ++j) {
            const bool take = better(row[j], best[j]);
            best[j] = take ? row[j] : best[j];
            arg[j] = take ? k : arg[j];
          }
        }
        for (int64_t j = 0; j < w; ++j) y[o * inner + c0 + j] = arg[j];
      }
    });
    return ok_status();
  }

  graph::Node node_;
  bool is_max_;
  int64_t axis_;
  bool keepdims_;
  bool last_;
};

struct ReduceSpec {
  const char* name;
  ReduceOp op;
};

constexpr ReduceSpec kReduceSpecs[] = {
    {"ReduceSum", ReduceOp::kSum},
    {"ReduceMean", ReduceOp::kMean},
    {"ReduceMax", ReduceOp::kMax},
    {"ReduceMin", ReduceOp::kMin},
    {"ReduceProd", ReduceOp::kProd},
    {"ReduceL1", ReduceOp::kL1},
    {"ReduceL2", ReduceOp::kL2},
    {"ReduceLogSum", ReduceOp::kLogSum},
    {"ReduceLogSumExp", ReduceOp::kLogSumExp},
    {"ReduceSumSquare", ReduceOp::kSumSquare},
};

}  // namespace

}  // namespace streamline::ops::cpu::math

namespace streamline::ops::cpu {

Status register_reduce(KernelRegistry& reg) {
  for (const math::ReduceSpec& spec : math::kReduceSpecs) {
    const math::ReduceOp op = spec.op;
    SL_RETURN_IF_ERROR(math::register_ops(
        reg, {spec.name}, 1, INT_MAX, [op](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
          return std::unique_ptr<Kernel>(std::make_unique<math::ReduceKernel>(args.node, op));
        }));
  }
  for (bool is_max : {true, false}) {
    SL_RETURN_IF_ERROR(math::register_ops(reg, {is_max ? "ArgMax" : "ArgMin"}, 1, INT_MAX,
                                          [is_max](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
                                            return std::unique_ptr<Kernel>(
                                                std::make_unique<math::ArgReduceKernel>(args.node, is_max));
                                          }));
  }
  return ok_status();
}

}  // namespace streamline::ops::cpu
