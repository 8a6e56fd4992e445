// CUDA Gemm, streamline.FusedGemm and MatMul through cuBLASLt, fp32 with fp32 compute (no TF32, so
// results match the CPU kernels to float rounding). Bias (a Gemm C of shape [N] or [1,N] with
// beta 1) and Relu run in the cuBLASLt epilogue; any other C is broadcast into the output first
// and accumulated with beta.
//
// Row-major to column-major: cuBLASLt is column-major, and a row-major [M,N] matrix is the
// column-major [N,M] one, so Y = A·B is computed as Yᵀ = Bᵀ·Aᵀ with B in cuBLASLt's first slot.

#include <algorithm>
#include <cstdint>
#include <memory>

#include "core/cuda/cuda_status.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/launch.h"

namespace streamline::ops::cuda {
namespace {

// cuBLASLt scratch reserved per run (its heuristics pick an algorithm that fits).
constexpr size_t kLtWorkspaceBytes = size_t{4} << 20;

// A row-major problem: for each of `batch` items, Y[M,N] = op(A)·op(B).
struct GemmGeometry {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_y = 0;  // elements between batch items; 0 = shared
};

struct Epilogue {
  const float* bias = nullptr;  // N elements, added to every row
  bool relu = false;
};

template <typename T, cublasStatus_t (*Destroy)(T)>
struct LtDeleter {
  void operator()(T p) const { (void)Destroy(p); }
};
using OpDesc = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulDesc_t>,
                               LtDeleter<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>>;
using LtLayout = std::unique_ptr<std::remove_pointer_t<cublasLtMatrixLayout_t>,
                                 LtDeleter<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>>;
using Pref = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>,
                             LtDeleter<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>>;

// The largest power of two (at most 256) dividing the address and the batch stride in bytes.
uint32_t alignment_of(const void* p, int64_t stride_elems) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(p) | static_cast<uintptr_t>(stride_elems * 4);
  uint32_t a = 256;
  while (a > 4 && v % a != 0) a >>= 1;
  return a;
}

Result<LtLayout> make_layout(uint64_t rows, uint64_t cols, int64_t ld, const GemmGeometry& g, int64_t stride,
                             const std::string& who) {
  cublasLtMatrixLayout_t raw = nullptr;
  SL_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&raw, CUDA_R_32F, rows, cols, ld), who);
  LtLayout l(raw);
  if (g.batch > 1) {
    const int32_t count = static_cast<int32_t>(g.batch);
    SL_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)), who);
    SL_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)),
        who);
  }
  return l;
}

// Y = alpha·op(A)·op(B) + beta·Y (+ bias, then Relu), enqueued on `stream`. With beta != 0, Y must
// already hold C.
Status lt_matmul(const GemmGeometry& g, const float* a, const float* b, float* y, float alpha, float beta,
                 const Epilogue& ep, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                 const std::string& who) {
  if (g.batch > INT32_MAX) return unsupported(who + ": batch of " + std::to_string(g.batch) + " is too large");
  SL_ASSIGN_OR_RETURN(cublasLtHandle_t lt, cublaslt_handle());
  cublasLtMatmulDesc_t op_raw = nullptr;
  SL_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&op_raw, CUBLAS_COMPUTE_32F, CUDA_R_32F), who);
  OpDesc op(op_raw);
  // Slot 1 is our B, slot 2 our A (see the header comment).
  const cublasOperation_t t1 = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t t2 = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  SL_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(op_raw, CUBLASLT_MATMUL_DESC_TRANSA, &t1, sizeof(t1)), who);
  SL_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(op_raw, CUBLASLT_MATMUL_DESC_TRANSB, &t2, sizeof(t2)), who);
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  if (ep.bias != nullptr)
    epi = ep.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  else if (ep.relu)
    epi = CUBLASLT_EPILOGUE_RELU;
  SL_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(op_raw, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)),
                            who);
  if (ep.bias != nullptr) {
    const void* bias = ep.bias;
    SL_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(op_raw, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)), who);
  }
  // Column-major views: B row-major [K,N] is N x K (ld N); transposed [N,K] is K x N (ld K).
  SL_ASSIGN_OR_RETURN(LtLayout l1, g.trans_b ? make_layout(g.k, g.n, g.k, g, g.stride_b, who)
                                             : make_layout(g.n, g.k, g.n, g, g.stride_b, who));
  SL_ASSIGN_OR_RETURN(LtLayout l2, g.trans_a ? make_layout(g.m, g.k, g.m, g, g.stride_a, who)
                                             : make_layout(g.k, g.m, g.k, g, g.stride_a, who));
  SL_ASSIGN_OR_RETURN(LtLayout ly, make_layout(g.n, g.m, g.n, g, g.stride_y, who));

  cublasLtMatmulPreference_t pref_raw = nullptr;
  SL_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref_raw), who);
  Pref pref(pref_raw);
  const uint64_t ws = workspace != nullptr ? workspace_bytes : 0;
  SL_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulPreferenceSetAttribute(pref_raw, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)), who);
  const uint32_t al1 = alignment_of(b, g.stride_b), al2 = alignment_of(a, g.stride_a),
                 aly = alignment_of(y, g.stride_y);
  SL_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulPreferenceSetAttribute(pref_raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al1, sizeof(al1)),
      who);
  SL_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulPreferenceSetAttribute(pref_raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al2, sizeof(al2)),
      who);
  SL_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulPreferenceSetAttribute(pref_raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &aly, sizeof(aly)),
      who);
  SL_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulPreferenceSetAttribute(pref_raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &aly, sizeof(aly)),
      who);

  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  SL_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulAlgoGetHeuristic(lt, op_raw, l1.get(), l2.get(), ly.get(), ly.get(), pref_raw, 1, &heur, &found),
      who);
  if (found == 0)
    return unsupported(who + ": cuBLASLt has no algorithm for M=" + std::to_string(g.m) + " N=" + std::to_string(g.n) +
                       " K=" + std::to_string(g.k) + " batch " + std::to_string(g.batch));
  SL_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(lt, op_raw, &alpha, b, l1.get(), a, l2.get(), &beta, y, ly.get(), y,
                                           ly.get(), &heur.algo, workspace, ws, stream),
                            who);
  return ok_status();
}

// Copies `c` (broadcastable to `y_shape`, right-aligned) into y.
Status broadcast_into(const Tensor& c, float* y, const Shape& y_shape, cudaStream_t stream, const std::string& who) {
  StridedCopyDims d;
  d.rank = static_cast<int32_t>(y_shape.rank());
  int64_t s = 1;
  for (size_t k = y_shape.rank(); k-- > 0;) {
    d.out[k] = y_shape[k];
    const size_t off = y_shape.rank() - c.shape().rank();
    const int64_t cd = k >= off ? c.shape()[k - off] : 1;
    d.in_stride[k] = cd == 1 ? 0 : s;
    s *= cd;
  }
  SL_CUDA_RETURN_IF_ERROR(launch_strided_copy(dev_in(c), y, y_shape.numel(), d, stream), who);
  return ok_status();
}

class GemmKernel final : public Kernel {
 public:
  GemmKernel(const graph::Node& n, bool relu)
      : alpha_(n.attr_float("alpha", 1.f)),
        beta_(n.attr_float("beta", 1.f)),
        trans_a_(n.attr_int("transA", 0) != 0),
        trans_b_(n.attr_int("transB", 0) != 0),
        relu_(relu),
        who_(n.describe()) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 2 || !in[0].present() || !in[1].present()) return invalid_argument(who_ + ": needs A and B");
    for (size_t i = 0; i < in.size(); ++i)
      if (in[i].present() && (in[i].dtype != DType::kFloat32 || in[i].layout != Layout::kPlain))
        return unsupported(who_ + ": the CUDA kernel takes plain float32 tensors");
    SL_ASSIGN_OR_RETURN(GemmGeometry g, geometry(in[0].shape, in[1].shape));
    if (in.size() > 2 && in[2].present()) {
      const Shape& c = in[2].shape;
      bool ok = c.rank() <= 2;
      for (size_t k = 0; ok && k < c.rank(); ++k) {
        const int64_t want = k + 2 - c.rank() == 0 ? g.m : g.n;
        ok = c[k] == 1 || c[k] == want;
      }
      if (!ok) return invalid_argument(who_ + ": C " + c.to_string() + " does not broadcast to the output");
    }
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{DType::kFloat32, Shape{g.m, g.n}});
    rr.workspace_bytes = kLtWorkspaceBytes;
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    SL_ASSIGN_OR_RETURN(GemmGeometry g, geometry(ctx.inputs[0].shape(), ctx.inputs[1].shape()));
    const Tensor& y = ctx.outputs[0];
    if (y.numel() == 0) return ok_status();
    const bool has_c = ctx.inputs.size() > 2 && ctx.inputs[2].defined() && beta_ != 0.f;
    Epilogue ep;
    ep.relu = relu_;
    float beta = 0.f;
    if (has_c) {
      const Shape& c = ctx.inputs[2].shape();
      const bool row_bias = c.numel() == g.n && (c.rank() == 1 || (c.rank() == 2 && c[0] == 1));
      if (row_bias && beta_ == 1.f) {
        ep.bias = dev_in(ctx.inputs[2]);
      } else {
        SL_RETURN_IF_ERROR(broadcast_into(ctx.inputs[2], dev_out(y), y.shape(), stream_of(ctx), who_));
        beta = beta_;
      }
    }
    return lt_matmul(g, dev_in(ctx.inputs[0]), dev_in(ctx.inputs[1]), dev_out(y), alpha_, beta, ep, ctx.workspace,
                     kLtWorkspaceBytes, stream_of(ctx), who_);
  }

 private:
  Result<GemmGeometry> geometry(const Shape& a, const Shape& b) const {
    if (a.rank() != 2 || b.rank() != 2) return invalid_argument(who_ + ": A and B must be 2-D");
    GemmGeometry g;
    g.trans_a = trans_a_;
    g.trans_b = trans_b_;
    g.m = trans_a_ ? a[1] : a[0];
    g.k = trans_a_ ? a[0] : a[1];
    const int64_t kb = trans_b_ ? b[1] : b[0];
    g.n = trans_b_ ? b[0] : b[1];
    if (g.k != kb)
      return invalid_argument(who_ + ": inner dimensions differ (" + a.to_string() + ", " + b.to_string() + ")");
    if (g.k == 0) return unsupported(who_ + ": the CUDA kernel needs K > 0");
    return g;
  }

  float alpha_, beta_;
  bool trans_a_, trans_b_, relu_;
  std::string who_;
};

// MatMul's output shape and how it maps onto one cuBLASLt call.
struct MatMulPlan {
  Shape y;
  GemmGeometry g;
};

Result<MatMulPlan> plan_matmul(const Shape& a, const Shape& b, const std::string& who) {
  if (a.rank() == 0 || b.rank() == 0) return invalid_argument(who + ": MatMul inputs must have rank >= 1");
  const size_t ra = a.rank(), rb = b.rank();
  MatMulPlan p;
  GemmGeometry& g = p.g;
  g.m = ra == 1 ? 1 : a[ra - 2];
  g.k = a[ra - 1];
  const int64_t kb = rb == 1 ? b[0] : b[rb - 2];
  g.n = rb == 1 ? 1 : b[rb - 1];
  if (g.k != kb)
    return invalid_argument(who + ": inner dimensions differ (" + a.to_string() + ", " + b.to_string() + ")");
  if (g.k == 0) return unsupported(who + ": the CUDA kernel needs K > 0");
  // Batch dims, right-aligned and broadcast.
  const size_t ba = ra > 2 ? ra - 2 : 0, bb = rb > 2 ? rb - 2 : 0, rank = std::max(ba, bb);
  Shape batch_a, batch_b;
  batch_a.resize(rank, 1);
  batch_b.resize(rank, 1);
  for (size_t i = 0; i < ba; ++i) batch_a[rank - ba + i] = a[i];
  for (size_t i = 0; i < bb; ++i) batch_b[rank - bb + i] = b[i];
  for (size_t i = 0; i < rank; ++i) {
    if (batch_a[i] != batch_b[i] && batch_a[i] != 1 && batch_b[i] != 1)
      return invalid_argument(who + ": batch dims of " + a.to_string() + " and " + b.to_string() + " do not broadcast");
    p.y.push_back(batch_a[i] == 1 ? batch_b[i] : batch_a[i]);
  }
  if (ra > 1) p.y.push_back(g.m);
  if (rb > 1) p.y.push_back(g.n);
  const int64_t na = batch_a.numel(), nb = batch_b.numel();
  if (nb == 1) {
    g.m *= na;  // B is shared: fold A's batch into its rows
  } else if (na == 1) {
    g.batch = nb;
    g.stride_a = 0;
    g.stride_b = g.k * g.n;
    g.stride_y = g.m * g.n;
  } else if (batch_a == batch_b) {
    g.batch = na;
    g.stride_a = g.m * g.k;
    g.stride_b = g.k * g.n;
    g.stride_y = g.m * g.n;
  } else {
    return unsupported(who + ": the CUDA MatMul does not broadcast batch dims on both sides (" + a.to_string() + ", " +
                       b.to_string() + ")");
  }
  return p;
}

class MatMulKernel final : public Kernel {
 public:
  explicit MatMulKernel(std::string who) : who_(std::move(who)) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 2 || !in[0].present() || !in[1].present()) return invalid_argument(who_ + ": expects A and B");
    for (const TensorInfo& t : in)
      if (t.dtype != DType::kFloat32 || t.layout != Layout::kPlain)
        return unsupported(who_ + ": the CUDA kernel takes plain float32 tensors");
    SL_ASSIGN_OR_RETURN(MatMulPlan p, plan_matmul(in[0].shape, in[1].shape, who_));
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{DType::kFloat32, p.y});
    rr.workspace_bytes = kLtWorkspaceBytes;
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    SL_ASSIGN_OR_RETURN(MatMulPlan p, plan_matmul(ctx.inputs[0].shape(), ctx.inputs[1].shape(), who_));
    if (p.y.numel() == 0) return ok_status();
    return lt_matmul(p.g, dev_in(ctx.inputs[0]), dev_in(ctx.inputs[1]), dev_out(ctx.outputs[0]), 1.f, 0.f, Epilogue{},
                     ctx.workspace, kLtWorkspaceBytes, stream_of(ctx), who_);
  }

 private:
  std::string who_;
};

}  // namespace

Status register_matmul(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(reg.add(cuda_def("Gemm", 7, [](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<GemmKernel>(args.node, false));
  })));
  SL_RETURN_IF_ERROR(reg.add(cuda_def(
      "FusedGemm", 1,
      [](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
        const std::string act = args.node.attr_string("activation", "");
        if (!act.empty() && act != "Relu")
          return unsupported(args.node.describe() + ": the CUDA FusedGemm fuses Relu only, not '" + act + "'");
        return std::unique_ptr<Kernel>(std::make_unique<GemmKernel>(args.node, act == "Relu"));
      },
      "streamline")));
  return reg.add(cuda_def("MatMul", 1, [](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<MatMulKernel>(args.node.describe()));
  }));
}

}  // namespace streamline::ops::cuda
