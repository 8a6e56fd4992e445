// Device code of the fused ops' epilogue: after cuDNN's convolution or cuBLASLt's matrix product
// has written y, one pass adds the bias and the residual and applies the activation, in fp32.
// The bias index is (i / bias_inner) % bias_count; when bias_inner is 1 (a Gemm row bias) the
// division is skipped.

#include <cuda_runtime.h>

#include "ops/cuda/device_util.cuh"
#include "ops/cuda/launch.h"

namespace streamline::ops::cuda {
namespace {

constexpr int kThreads = 256;

template <ActKind K>
__device__ __forceinline__ float activate(float x, float alpha, float beta) {
  if constexpr (K == ActKind::kRelu) return x > 0.f ? x : 0.f;
  if constexpr (K == ActKind::kLeakyRelu) return x >= 0.f ? x : alpha * x;
  if constexpr (K == ActKind::kClip) return fminf(fmaxf(x, alpha), beta);
  if constexpr (K == ActKind::kSigmoid) return 1.f / (1.f + expf(-x));
  if constexpr (K == ActKind::kHardSigmoid) return fmaxf(0.f, fminf(1.f, alpha * x + beta));
  if constexpr (K == ActKind::kTanh) return tanhf(x);
  // The erf form (ONNX Gelu, approximate="none"), not cuBLASLt's tanh approximation.
  if constexpr (K == ActKind::kGelu) return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
  return x;
}

// y may alias residual: each element is read and then written by one thread.
template <ActKind K, typename T>
__global__ void epilogue_kernel(T* y, int64_t n, EpilogueArgs e) {
  const T* bias = static_cast<const T*>(e.bias);
  const T* residual = static_cast<const T*>(e.residual);
  for (int64_t i = first_index(); i < n; i += grid_step()) {
    float v = load(y, i);
    if (bias != nullptr) {
      const int64_t c = (e.bias_inner == 1 ? i : i / e.bias_inner) % e.bias_count;
      v += e.bias_scale * load(bias, c);
    }
    if (residual != nullptr) v += e.residual_scale * load(residual, i);
    store(y, i, activate<K>(v, e.act.alpha, e.act.beta));
  }
}

using EpilogueFn = void (*)(void*, int64_t, const EpilogueArgs&, cudaStream_t);

template <ActKind K, typename T>
void epilogue_launch(void* y, int64_t n, const EpilogueArgs& e, cudaStream_t s) {
  epilogue_kernel<K, T><<<grid_for(n, kThreads), kThreads, 0, s>>>(static_cast<T*>(y), n, e);
}

// Indexed by ActKind (same order as the enum).
template <typename T>
constexpr EpilogueFn kEpilogue[] = {epilogue_launch<ActKind::kNone, T>,      epilogue_launch<ActKind::kRelu, T>,
                                    epilogue_launch<ActKind::kLeakyRelu, T>, epilogue_launch<ActKind::kClip, T>,
                                    epilogue_launch<ActKind::kSigmoid, T>,   epilogue_launch<ActKind::kHardSigmoid, T>,
                                    epilogue_launch<ActKind::kTanh, T>,      epilogue_launch<ActKind::kGelu, T>};
constexpr int kActKinds = static_cast<int>(ActKind::kGelu) + 1;
static_assert(sizeof(kEpilogue<float>) / sizeof(EpilogueFn) == kActKinds, "one launcher per ActKind");

}  // namespace

cudaError_t launch_epilogue(ElemType t, void* y, int64_t n, const EpilogueArgs& e, cudaStream_t stream) {
  const int k = static_cast<int>(e.act.kind);
  if (k < 0 || k >= kActKinds || !is_float(t) || (e.bias != nullptr && (e.bias_inner < 1 || e.bias_count < 1)))
    return cudaErrorInvalidValue;
  if (n <= 0) return cudaSuccess;
  (t == ElemType::kF16 ? kEpilogue<__half> : kEpilogue<float>)[k](y, n, e, stream);
  return cudaGetLastError();
}

}  // namespace streamline::ops::cuda
