// CUDA Gemm, MatMul, streamline.FusedGemm and streamline.FusedMatMul through cuBLASLt, for float32
// and float16 tensors:
//   float32, Precision::kFp32  CUBLAS_COMPUTE_32F: true fp32, matches the CPU kernels to rounding;
//   float32, Precision::kTf32  CUBLAS_COMPUTE_32F_FAST_TF32: inputs rounded to TF32 on tensor cores;
//   float16                    CUDA_R_16F operands and output, CUBLAS_COMPUTE_32F accumulation.
// What follows the product:
//   - a bias that cuBLASLt adds exactly (a Gemm C of shape [N] / [1,N] with beta 1, FusedMatMul's
//     [N] bias) and Relu go into cuBLASLt's epilogue;
//   - everything else (any other C, scaled by beta; the other activations, among them "Gelu" in its
//     erf form, which cuBLASLt's GELU epilogue does not compute) runs in our own epilogue kernel
//     (epilogue.cu), one pass over Y after the product.
//
// Row-major to column-major: cuBLASLt is column-major, and a row-major [M,N] matrix is the
// column-major [N,M] one, so Y = A·B is computed as Yᵀ = Bᵀ·Aᵀ with B in cuBLASLt's first slot.

#include <algorithm>
#include <cstdint>
#include <memory>

#include "core/cuda/cuda_status.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/epilogue.h"
#include "ops/cuda/launch.h"
#include "ops/op_params.h"

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

// The element type and compute mode of one kernel.
struct MathMode {
  DType dtype = DType::kFloat32;
  bool tf32 = false;  // fp32 tensors only
};

// What cuBLASLt itself adds after the product.
struct LtEpilogue {
  const void* bias = nullptr;  // N elements of the output type, added to every row
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
uint32_t alignment_of(const void* p, int64_t stride_elems, size_t elem_bytes) {
  const uintptr_t v =
      reinterpret_cast<uintptr_t>(p) | static_cast<uintptr_t>(stride_elems * static_cast<int64_t>(elem_bytes));
  uint32_t a = 256;
  while (a > elem_bytes && v % a != 0) a >>= 1;
  return a;
}

Result<LtLayout> make_layout(cudaDataType_t type, uint64_t rows, uint64_t cols, int64_t ld, const GemmGeometry& g,
                             int64_t stride, const std::string& who) {
  cublasLtMatrixLayout_t raw = nullptr;
  SL_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&raw, type, rows, cols, ld), who);
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

template <typename T>
Status set_pref(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, T value,
                const std::string& who) {
  SL_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(p, attr, &value, sizeof(value)), who);
  return ok_status();
}

// Y = alpha·op(A)·op(B) (+ bias, then Relu), enqueued on `stream`. Returns false (nothing enqueued) when cuBLASLt has
// no algorithm for this problem with this epilogue.
Result<bool> lt_matmul(const GemmGeometry& g, const MathMode& mm, const void* a, const void* b, void* y, float alpha,
                       const LtEpilogue& ep, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                       const std::string& who) {
  if (g.batch > INT32_MAX) return unsupported(who + ": batch of " + std::to_string(g.batch) + " is too large");
  SL_ASSIGN_OR_RETURN(cublasLtHandle_t lt, cublaslt_handle());
  const bool half = mm.dtype == DType::kFloat16;
  const cudaDataType_t type = half ? CUDA_R_16F : CUDA_R_32F;
  const size_t elem = half ? 2 : 4;
  const cublasComputeType_t compute = !half && mm.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  cublasLtMatmulDesc_t op_raw = nullptr;
  // alpha and beta are fp32 for every mode (scale type CUDA_R_32F).
  SL_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&op_raw, compute, CUDA_R_32F), who);
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
    // The bias has the output's type (the default); one bias for every batch item (stride 0).
    const void* bias = ep.bias;
    SL_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(op_raw, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)), who);
  }
  // Column-major views: B row-major [K,N] is N x K (ld N); transposed [N,K] is K x N (ld K).
  SL_ASSIGN_OR_RETURN(LtLayout l1, g.trans_b ? make_layout(type, g.k, g.n, g.k, g, g.stride_b, who)
                                             : make_layout(type, g.n, g.k, g.n, g, g.stride_b, who));
  SL_ASSIGN_OR_RETURN(LtLayout l2, g.trans_a ? make_layout(type, g.m, g.k, g.m, g, g.stride_a, who)
                                             : make_layout(type, g.k, g.m, g.k, g, g.stride_a, who));
  SL_ASSIGN_OR_RETURN(LtLayout ly, make_layout(type, g.n, g.m, g.n, g, g.stride_y, who));

  cublasLtMatmulPreference_t pref_raw = nullptr;
  SL_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref_raw), who);
  Pref pref(pref_raw);
  const uint64_t ws = workspace != nullptr ? workspace_bytes : 0;
  SL_RETURN_IF_ERROR(set_pref(pref_raw, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ws, who));
  const uint32_t al1 = alignment_of(b, g.stride_b, elem), al2 = alignment_of(a, g.stride_a, elem),
                 aly = alignment_of(y, g.stride_y, elem);
  SL_RETURN_IF_ERROR(set_pref(pref_raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, al1, who));
  SL_RETURN_IF_ERROR(set_pref(pref_raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, al2, who));
  SL_RETURN_IF_ERROR(set_pref(pref_raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, aly, who));
  SL_RETURN_IF_ERROR(set_pref(pref_raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, aly, who));

  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  const cublasStatus_t hs =
      cublasLtMatmulAlgoGetHeuristic(lt, op_raw, l1.get(), l2.get(), ly.get(), ly.get(), pref_raw, 1, &heur, &found);
  if (hs == CUBLAS_STATUS_NOT_SUPPORTED || (hs == CUBLAS_STATUS_SUCCESS && found == 0)) return false;
  SL_CUBLAS_RETURN_IF_ERROR(hs, who);
  const float beta = 0.f;
  SL_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(lt, op_raw, &alpha, b, l1.get(), a, l2.get(), &beta, y, ly.get(), y,
                                           ly.get(), &heur.algo, workspace, ws, stream),
                            who);
  return true;
}

// The product followed by its epilogues: cuBLASLt's where given, then ours (skipped when it
// would change nothing). When cuBLASLt has no algorithm with its epilogue, the bias and Relu move
// into ours and the product is planned again without one.
Status matmul_with_epilogue(const GemmGeometry& g, const MathMode& mm, const void* a, const void* b, void* y,
                            float alpha, LtEpilogue lt_ep, EpilogueArgs own, void* workspace, cudaStream_t stream,
                            const std::string& who) {
  SL_ASSIGN_OR_RETURN(bool done, lt_matmul(g, mm, a, b, y, alpha, lt_ep, workspace, kLtWorkspaceBytes, stream, who));
  if (!done && (lt_ep.bias != nullptr || lt_ep.relu)) {
    // Our epilogue adds its bias before its activation, so it can take cuBLASLt's over only when
    // it has neither of its own (true for every caller: they give cuBLASLt a bias or Relu only then).
    if (own.bias == nullptr && own.residual == nullptr && (own.act.kind == ActKind::kNone || !lt_ep.relu)) {
      if (lt_ep.bias != nullptr) {
        own.bias = lt_ep.bias;
        own.bias_inner = 1;
        own.bias_count = g.n;
        own.bias_scale = 1.f;
      }
      if (lt_ep.relu) own.act.kind = ActKind::kRelu;
      SL_ASSIGN_OR_RETURN(done,
                          lt_matmul(g, mm, a, b, y, alpha, LtEpilogue{}, workspace, kLtWorkspaceBytes, stream, who));
    }
  }
  if (!done)
    return unsupported(who + ": cuBLASLt has no algorithm for M=" + std::to_string(g.m) + " N=" + std::to_string(g.n) +
                       " K=" + std::to_string(g.k) + " batch " + std::to_string(g.batch));
  if (epilogue_is_identity(own)) return ok_status();
  const int64_t n = g.m * g.n * g.batch;
  SL_CUDA_RETURN_IF_ERROR(launch_epilogue(elem_type_of(mm.dtype), y, n, own, stream), who);
  return ok_status();
}

// Unsupported unless every present input is a plain tensor of the def's dtype.
Status expect_inputs(std::span<const TensorInfo> in, DType dtype, const std::string& who) {
  for (const TensorInfo& t : in)
    if (t.present()) SL_RETURN_IF_ERROR(expect_dtype(t, dtype, who));
  return ok_status();
}

class GemmKernel final : public Kernel {
 public:
  GemmKernel(const graph::Node& n, Activation act, MathMode mm)
      : alpha_(n.attr_float("alpha", 1.f)),
        beta_(n.attr_float("beta", 1.f)),
        trans_a_(n.attr_int("transA", 0) != 0),
        trans_b_(n.attr_int("transB", 0) != 0),
        act_(act),
        mm_(mm),
        who_(n.describe()) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 2 || !in[0].present() || !in[1].present()) return invalid_argument(who_ + ": needs A and B");
    SL_RETURN_IF_ERROR(expect_inputs(in, mm_.dtype, who_));
    SL_ASSIGN_OR_RETURN(GemmGeometry g, geometry(in[0].shape, in[1].shape));
    if (in.size() > 2 && in[2].present()) {
      SL_RETURN_IF_ERROR(check_gemm_c(in[2].shape, GemmShapes{g.m, g.k, g.n}, who_));
    }
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{mm_.dtype, Shape{g.m, g.n}});
    rr.workspace_bytes = kLtWorkspaceBytes;
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    SL_ASSIGN_OR_RETURN(GemmGeometry g, geometry(ctx.inputs[0].shape(), ctx.inputs[1].shape()));
    const Tensor& y = ctx.outputs[0];
    if (y.numel() == 0) return ok_status();
    LtEpilogue lt;
    EpilogueArgs own;
    if (ctx.inputs.size() > 2 && ctx.inputs[2].defined() && beta_ != 0.f) {
      // C right-aligned to [cm, cn] (reshape checked that it broadcasts to [M, N]).
      const Tensor& c = ctx.inputs[2];
      const Shape& cs = c.shape();
      const int64_t cm = cs.rank() == 2 ? cs[0] : 1, cn = cs.rank() >= 1 ? cs[cs.rank() - 1] : 1;
      if (cm == 1 && cn == g.n && beta_ == 1.f) {
        lt.bias = c.raw();  // exact in cuBLASLt: D = alpha·A·B + bias
      } else if (cm == g.m && cn == g.n) {
        own.residual = c.raw();
        own.residual_scale = beta_;
      } else {
        // A row [N], a column [M,1] or a scalar, scaled by beta.
        own.bias = c.raw();
        own.bias_scale = beta_;
        own.bias_inner = cm == 1 ? 1 : g.n;
        own.bias_count = cm == 1 ? cn : cm;
      }
    }
    // Relu goes to cuBLASLt when our epilogue has nothing else to do; else it is ours.
    if (act_.kind == ActKind::kRelu && epilogue_is_identity(own))
      lt.relu = true;
    else
      own.act = act_;
    return matmul_with_epilogue(g, mm_, ctx.inputs[0].raw(), ctx.inputs[1].raw(), y.raw(), alpha_, lt, own,
                                ctx.workspace, stream_of(ctx), who_);
  }

 private:
  Result<GemmGeometry> geometry(const Shape& a, const Shape& b) const {
    // The shapes are the CPU kernel's (ops/op_params.h).
    SL_ASSIGN_OR_RETURN(GemmShapes s, gemm_shapes(a, b, trans_a_, trans_b_, who_));
    GemmGeometry g;
    g.trans_a = trans_a_;
    g.trans_b = trans_b_;
    g.m = s.m;
    g.k = s.k;
    g.n = s.n;
    if (g.k == 0) return unsupported(who_ + ": the CUDA kernel needs K > 0");
    return g;
  }

  float alpha_, beta_;
  bool trans_a_, trans_b_;
  Activation act_;
  MathMode mm_;
  std::string who_;
};

// MatMul's output shape and how it maps onto one cuBLASLt call.
struct MatMulPlan {
  Shape y;
  GemmGeometry g;
};

Result<MatMulPlan> plan_matmul(const Shape& a, const Shape& b, const std::string& who) {
  // The output shape is the CPU kernel's (ops/op_params.h); what follows maps it onto cuBLASLt.
  SL_ASSIGN_OR_RETURN(MatMulShapes s, matmul_shapes(a, b, who));
  MatMulPlan p;
  p.y = s.y;
  GemmGeometry& g = p.g;
  g.m = s.m;
  g.k = s.k;
  g.n = s.n;
  if (g.k == 0) return unsupported(who + ": the CUDA kernel needs K > 0");
  // Each operand's batch dims, left-padded with 1 to the broadcast rank.
  const size_t rank = s.batch.rank();
  Shape batch_a, batch_b;
  batch_a.resize(rank, 1);
  batch_b.resize(rank, 1);
  for (size_t i = 0; i < s.a_batch.rank(); ++i) batch_a[rank - s.a_batch.rank() + i] = s.a_batch[i];
  for (size_t i = 0; i < s.b_batch.rank(); ++i) batch_b[rank - s.b_batch.rank() + i] = s.b_batch[i];
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

// MatMul, and streamline.FusedMatMul: MatMul + optional bias [N] (input 2) + activation.
class MatMulKernel final : public Kernel {
 public:
  MatMulKernel(std::string who, bool fused, Activation act, MathMode mm)
      : who_(std::move(who)), fused_(fused), act_(act), mm_(mm) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    const size_t max_inputs = fused_ ? 3 : 2;
    if (in.size() < 2 || in.size() > max_inputs || !in[0].present() || !in[1].present())
      return invalid_argument(who_ + ": expects A and B" + (fused_ ? " and an optional bias" : ""));
    SL_RETURN_IF_ERROR(expect_inputs(in, mm_.dtype, who_));
    SL_ASSIGN_OR_RETURN(MatMulPlan p, plan_matmul(in[0].shape, in[1].shape, who_));
    if (in.size() > 2 && in[2].present() && (in[2].shape.rank() != 1 || in[2].shape[0] != p.g.n))
      return invalid_argument(who_ + ": bias " + in[2].shape.to_string() + " must be [" + std::to_string(p.g.n) + "]");
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{mm_.dtype, p.y});
    rr.workspace_bytes = kLtWorkspaceBytes;
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    SL_ASSIGN_OR_RETURN(MatMulPlan p, plan_matmul(ctx.inputs[0].shape(), ctx.inputs[1].shape(), who_));
    if (p.y.numel() == 0) return ok_status();
    LtEpilogue lt;
    EpilogueArgs own;
    if (ctx.inputs.size() > 2 && ctx.inputs[2].defined()) lt.bias = ctx.inputs[2].raw();
    if (act_.kind == ActKind::kRelu)
      lt.relu = true;
    else
      own.act = act_;
    return matmul_with_epilogue(p.g, mm_, ctx.inputs[0].raw(), ctx.inputs[1].raw(), ctx.outputs[0].raw(), 1.f, lt, own,
                                ctx.workspace, stream_of(ctx), who_);
  }

 private:
  std::string who_;
  bool fused_;
  Activation act_;
  MathMode mm_;
};

// The math mode of a def for `dtype`: fp32 defs take TF32 from the kernel options.
MathMode math_mode(DType dtype, const KernelOptions& options) {
  return MathMode{dtype, dtype == DType::kFloat32 && options.precision == Precision::kTf32};
}

KernelFactory gemm_factory(DType dtype, bool fused) {
  return [dtype, fused](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
    Activation act;
    if (fused) {
      SL_ASSIGN_OR_RETURN(act, parse_activation(args.node, /*allow_gelu=*/true));
    }
    return std::unique_ptr<Kernel>(std::make_unique<GemmKernel>(args.node, act, math_mode(dtype, args.options)));
  };
}

KernelFactory matmul_factory(DType dtype, bool fused) {
  return [dtype, fused](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
    Activation act;
    if (fused) {
      SL_ASSIGN_OR_RETURN(act, parse_activation(args.node, /*allow_gelu=*/true));
    }
    return std::unique_ptr<Kernel>(
        std::make_unique<MatMulKernel>(args.node.describe(), fused, act, math_mode(dtype, args.options)));
  };
}

}  // namespace

Status register_matmul(KernelRegistry& reg) {
  for (DType t : {DType::kFloat32, DType::kFloat16}) {
    SL_RETURN_IF_ERROR(reg.add(cuda_def("Gemm", 7, gemm_factory(t, false), "", INT_MAX, t)));
    SL_RETURN_IF_ERROR(reg.add(cuda_def("FusedGemm", 1, gemm_factory(t, true), "streamline", INT_MAX, t)));
    SL_RETURN_IF_ERROR(reg.add(cuda_def("MatMul", 1, matmul_factory(t, false), "", INT_MAX, t)));
    SL_RETURN_IF_ERROR(reg.add(cuda_def("FusedMatMul", 1, matmul_factory(t, true), "streamline", INT_MAX, t)));
  }
  return ok_status();
}

}  // namespace streamline::ops::cuda
