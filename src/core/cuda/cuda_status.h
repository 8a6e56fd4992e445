#pragma once
// CUDA runtime, cuDNN and cuBLAS(Lt) error codes as streamline Status, naming the call, the source
// location and a context string (the node, the buffer), so a device failure reads like any other.
//
//   SL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream), "input 'x'");
//   SL_CUDNN_RETURN_IF_ERROR(cudnnSetStream(handle, stream), node.describe());
//   SL_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(...), "Gemm 'fc1'");
//
//   // The message of a failed cudaMalloc of 1 GiB:
//   // "cudaMalloc(&p, bytes) failed at exec/cuda/device.cc:57 [arena of 1073741824 bytes]:
//   //  cudaErrorMemoryAllocation: out of memory"
//
// Codes: out of memory -> ResourceExhausted; no device / no or old driver -> Unavailable; a bad
// argument -> InvalidArgument; not supported (cuDNN/cuBLAS) -> Unsupported; anything else ->
// Internal. The functions are thread-safe and need no device (they only read static tables), so
// they can be tested on a machine without a GPU. The macros accept the context as any expression
// convertible to std::string_view; it is evaluated only on failure.
//
// This header sits in core because both ops (kernels) and exec (devices, streams) report CUDA
// errors; it is compiled only with the CUDA backend: cuda_status() in sl_core_cuda (CUDA runtime
// only), cudnn_status() and cublas_status() in sl_core_cuda_libs (links cuDNN and cuBLASLt).

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <string>
#include <string_view>

#include "core/status.h"

namespace streamline::cuda {

// `call` is the source text of the call, `file` and `line` where it was made (as __FILE__ and
// __LINE__; the path is shortened to the part under src/). OK when `err` is success.
Status cuda_status(cudaError_t err, std::string_view call, const char* file, int line, std::string_view context = {});
Status cudnn_status(cudnnStatus_t err, std::string_view call, const char* file, int line,
                    std::string_view context = {});
Status cublas_status(cublasStatus_t err, std::string_view call, const char* file, int line,
                     std::string_view context = {});

// Why cuBLASLt could not be loaded ("" when it was, or has not been needed yet). streamline loads
// libcublasLt.so.13 on its first cuBLASLt call instead of linking it (cublaslt_loader.cc).
std::string cublaslt_load_error();

// "src/exec/cuda/device.cc" for any path that contains "/src/"; the path unchanged otherwise.
std::string_view short_source_path(const char* file);

namespace detail {
// "<call> failed at <file>:<line> [<context>]: <name>: <text>" with `code`.
Status make_status(StatusCode code, std::string_view call, const char* file, int line, std::string_view context,
                   std::string_view name, std::string_view text);
}  // namespace detail

}  // namespace streamline::cuda

#define SL_CUDA_STATUS_IMPL_(fn, expr, ...)                                                              \
  do {                                                                                                   \
    const auto sl_cuda_err_ = (expr);                                                                    \
    if (!::streamline::cuda::is_success(sl_cuda_err_))                                                   \
      return ::streamline::cuda::fn(sl_cuda_err_, #expr, __FILE__, __LINE__ __VA_OPT__(, ) __VA_ARGS__); \
  } while (0)

// Return the converted Status from the enclosing function when the call fails. An optional second
// argument is the context.
#define SL_CUDA_RETURN_IF_ERROR(expr, ...) SL_CUDA_STATUS_IMPL_(cuda_status, expr, __VA_ARGS__)
#define SL_CUDNN_RETURN_IF_ERROR(expr, ...) SL_CUDA_STATUS_IMPL_(cudnn_status, expr, __VA_ARGS__)
#define SL_CUBLAS_RETURN_IF_ERROR(expr, ...) SL_CUDA_STATUS_IMPL_(cublas_status, expr, __VA_ARGS__)

namespace streamline::cuda {
inline bool is_success(cudaError_t e) {
  return e == cudaSuccess;
}
inline bool is_success(cudnnStatus_t e) {
  return e == CUDNN_STATUS_SUCCESS;
}
inline bool is_success(cublasStatus_t e) {
  return e == CUBLAS_STATUS_SUCCESS;
}
}  // namespace streamline::cuda
