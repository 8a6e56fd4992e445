// MatMul for the dtypes oneDNN's float32 kernel (matmul.cc) leaves out: float64, float16,
// bfloat16 (accumulated in double, rounded once per output) and int32, int64, uint32, uint64
// (accumulated in 64-bit integers, wrapping). NumPy semantics: batch dims broadcast, a 1-D operand
// is promoted to a matrix and its unit axis dropped from the result. Defs are keyed by exact dtype.
//
//   y[b, i, j] = sum_k a[b, i, k] * b[b, k, j]

#include <vector>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"

namespace streamline::ops::cpu {
namespace {

// Shapes of one MatMul: A and B as matrices (1-D promoted), the broadcast batch, the output.
struct MatMulGeom {
  int64_t m = 1, k = 1, n = 1, batches = 1;
  std::vector<int64_t> abatch, bbatch, ybatch;  // left-padded to the output's batch rank
  Shape y;
};

bool integral(DType t) {
  return t == DType::kInt32 || t == DType::kInt64 || t == DType::kUInt32 || t == DType::kUInt64;
}

class TypedMatMulKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  Status init(const KernelCreateArgs&) { return ok_status(); }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 2 || !in[0].present() || !in[1].present()) return invalid("expects A and B");
    if (in[0].dtype != in[1].dtype)
      return invalid(std::string("A is ") + dtype_name(in[0].dtype) + ", B is " + dtype_name(in[1].dtype));
    if (!is_float_dtype(in[0].dtype) && !integral(in[0].dtype))
      return unsupported_error(std::string("dtype ") + dtype_name(in[0].dtype));
    SL_ASSIGN_OR_RETURN(MatMulGeom g, geometry(in[0].shape, in[1].shape));
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, g.y, Layout::kPlain});
    rr.state = std::make_shared<MatMulGeom>(std::move(g));
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const MatMulGeom& g = *static_cast<const MatMulGeom*>(ctx.state);
    const Tensor &a = ctx.inputs[0], &b = ctx.inputs[1];
    Tensor& y = ctx.outputs[0];
    const DType dt = a.dtype();
    const bool ints = integral(dt);
    const size_t br = g.ybatch.size();
#pragma omp parallel for num_threads(omp_threads(ctx.num_threads)) if (y.numel() * g.k > 65536) schedule(static)
    for (int64_t bi = 0; bi < g.batches; ++bi) {
      // This output batch's slices of A and B (broadcast axes repeat their single slice).
      int64_t rem = bi, aoff = 0, boff = 0, astride = 1, bstride = 1;
      for (size_t i = br; i-- > 0;) {
        const int64_t idx = rem % g.ybatch[i];
        rem /= g.ybatch[i];
        aoff += (g.abatch[i] == 1 ? 0 : idx) * astride;
        boff += (g.bbatch[i] == 1 ? 0 : idx) * bstride;
        astride *= g.abatch[i];
        bstride *= g.bbatch[i];
      }
      const int64_t a0 = aoff * g.m * g.k, b0 = boff * g.k * g.n, y0 = bi * g.m * g.n;
      for (int64_t i = 0; i < g.m; ++i)
        for (int64_t j = 0; j < g.n; ++j) {
          if (ints) {
            uint64_t acc = 0;
            for (int64_t t = 0; t < g.k; ++t)
              acc += static_cast<uint64_t>(load_int(dt, a.raw(), a0 + i * g.k + t)) *
                     static_cast<uint64_t>(load_int(dt, b.raw(), b0 + t * g.n + j));
            store_wrapped(dt, y.raw(), y0 + i * g.n + j, acc);
          } else {
            double acc = 0;
            for (int64_t t = 0; t < g.k; ++t)
              acc += load_f(dt, a.raw(), a0 + i * g.k + t) * load_f(dt, b.raw(), b0 + t * g.n + j);
            store_f(dt, y.raw(), y0 + i * g.n + j, acc);
          }
        }
    }
    return ok_status();
  }

 private:
  static void store_wrapped(DType t, void* base, int64_t i, uint64_t v) {
    switch (t) {
      case DType::kInt32:
      case DType::kUInt32:
        static_cast<uint32_t*>(base)[i] = static_cast<uint32_t>(v);
        return;
      default:
        static_cast<uint64_t*>(base)[i] = v;
        return;
    }
  }

  Result<MatMulGeom> geometry(const Shape& a_in, const Shape& b_in) const {
    if (a_in.rank() < 1 || b_in.rank() < 1) return invalid("inputs must have rank 1 or more");
    const Shape as = a_in.rank() == 1 ? Shape{1, a_in[0]} : a_in;
    const Shape bs = b_in.rank() == 1 ? Shape{b_in[0], 1} : b_in;
    MatMulGeom g;
    g.m = as[as.rank() - 2];
    g.k = as[as.rank() - 1];
    g.n = bs[bs.rank() - 1];
    if (bs[bs.rank() - 2] != g.k)
      return invalid("inner dimensions of " + a_in.to_string() + " and " + b_in.to_string() + " differ");
    const size_t br = std::max(as.rank(), bs.rank()) - 2;
    g.abatch.assign(br, 1);
    g.bbatch.assign(br, 1);
    g.ybatch.assign(br, 1);
    for (size_t i = 0; i + 2 < as.rank(); ++i) g.abatch[br - (as.rank() - 2) + i] = as[i];
    for (size_t i = 0; i + 2 < bs.rank(); ++i) g.bbatch[br - (bs.rank() - 2) + i] = bs[i];
    for (size_t i = 0; i < br; ++i) {
      if (g.abatch[i] != g.bbatch[i] && g.abatch[i] != 1 && g.bbatch[i] != 1)
        return invalid("batch dims of " + a_in.to_string() + " and " + b_in.to_string() + " do not broadcast");
      g.ybatch[i] = std::max(g.abatch[i], g.bbatch[i]);
      g.batches *= g.ybatch[i];
      g.y.push_back(g.ybatch[i]);
    }
    if (a_in.rank() >= 2) g.y.push_back(g.m);
    if (b_in.rank() >= 2) g.y.push_back(g.n);
    return g;
  }
};

}  // namespace

Status register_matmul_types(KernelRegistry& reg) {
  for (DType t : {DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt32, DType::kInt64, DType::kUInt32,
                  DType::kUInt64})
    SL_RETURN_IF_ERROR(add_typed_def(reg, "MatMul", 1, t, make_factory<TypedMatMulKernel>()));
  return ok_status();
}

}  // namespace streamline::ops::cpu
