#pragma once
// Shared by the CUDA kernel classes: the stream of a run, library handles, and registration.
//
//   cudaStream_t s = stream_of(ctx);
//   SL_ASSIGN_OR_RETURN(cudnnHandle_t h, cudnn_handle(s));    // this thread's, bound to s
//   SL_RETURN_IF_ERROR(reg.add(cuda_def("Relu", 6, factory)));

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <string>

#include "ops/registry.h"

namespace streamline::ops::cuda {

inline cudaStream_t stream_of(const RunContext& ctx) {
  return static_cast<cudaStream_t>(ctx.device_stream);
}

// The calling thread's cuDNN handle (made on first use, on the current device), set to `stream`.
// A cuDNN handle must not be used by two threads at once, hence one per thread.
Result<cudnnHandle_t> cudnn_handle(cudaStream_t stream);
// The process's cuBLASLt handle (made on first use); cuBLASLt allows sharing it across threads.
Result<cublasLtHandle_t> cublaslt_handle();

// A KernelDef for Device::kCuda, provider "cuda", for `dtype` (kUndefined: any dtype).
KernelDef cuda_def(const std::string& op, int since, KernelFactory create, const std::string& domain = "",
                   int end = INT_MAX, DType dtype = DType::kFloat32);

// Elements of a float tensor as a device pointer (the kernel's contract; see cuda_kernels.h).
inline const float* dev_in(const Tensor& t) {
  return static_cast<const float*>(t.raw());
}
inline float* dev_out(const Tensor& t) {
  return static_cast<float*>(t.raw());
}

// Family registrations (one per .cc file), listed by register_cuda_kernels().
Status register_elementwise(KernelRegistry& reg);  // unary, Add/Sub/Mul/Div, Transpose
Status register_norm(KernelRegistry& reg);         // Softmax, LayerNormalization
Status register_matmul(KernelRegistry& reg);       // Gemm, MatMul, streamline.FusedGemm
Status register_conv(KernelRegistry& reg);         // Conv, streamline.FusedConv
Status register_pool(KernelRegistry& reg);         // MaxPool, AveragePool, Global*Pool
Status register_tensor_ops(KernelRegistry& reg);   // Concat, Slice, Gather, views, Cast, Clip, Reduce*
Status register_attention(KernelRegistry& reg);    // streamline.Attention (fp32, fp16)

}  // namespace streamline::ops::cuda
