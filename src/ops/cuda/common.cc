// Library handles, the CUDA KernelDef helper and the list of CUDA kernel families.

#include <mutex>

#include "core/cuda/cuda_status.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/cuda_kernels.h"

namespace streamline::ops::cuda {
namespace {

// One cuDNN handle per thread, destroyed when the thread exits.
struct ThreadCudnn {
  cudnnHandle_t handle = nullptr;
  ~ThreadCudnn() {
    if (handle != nullptr) (void)cudnnDestroy(handle);
  }
};

}  // namespace

Result<cudnnHandle_t> cudnn_handle(cudaStream_t stream) {
  thread_local ThreadCudnn t;
  if (t.handle == nullptr) {
    SL_CUDNN_RETURN_IF_ERROR(cudnnCreate(&t.handle), "creating this thread's cuDNN handle");
  }
  SL_CUDNN_RETURN_IF_ERROR(cudnnSetStream(t.handle, stream));
  return t.handle;
}

Result<cublasLtHandle_t> cublaslt_handle() {
  // Made once; a failure (no device) is remembered and reported to every caller.
  static std::once_flag once;
  static cublasLtHandle_t handle = nullptr;
  static Status* failure = nullptr;
  std::call_once(once, [] {
    Status s = [&]() -> Status {
      const cublasStatus_t created = cublasLtCreate(&handle);
      if (created != CUBLAS_STATUS_SUCCESS && !::streamline::cuda::cublaslt_load_error().empty())
        return unavailable(::streamline::cuda::cublaslt_load_error());
      SL_CUBLAS_RETURN_IF_ERROR(created, "creating the cuBLASLt handle");
      return ok_status();
    }();
    if (!s.ok()) failure = new Status(std::move(s));
  });
  if (failure != nullptr) return *failure;
  return handle;
}

KernelDef cuda_def(const std::string& op, int since, KernelFactory create, const std::string& domain, int end,
                   DType dtype) {
  KernelDef d;
  d.op = op;
  d.domain = domain;
  d.since_version = since;
  d.end_version = end;
  d.device = Device::kCuda;
  d.dtype = dtype;
  d.provider = "cuda";
  d.create = std::move(create);
  return d;
}

Status register_cuda_kernels(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(register_elementwise(reg));
  SL_RETURN_IF_ERROR(register_norm(reg));
  SL_RETURN_IF_ERROR(register_matmul(reg));
  SL_RETURN_IF_ERROR(register_pool(reg));
  SL_RETURN_IF_ERROR(register_tensor_ops(reg));
  SL_RETURN_IF_ERROR(register_attention(reg));
  return register_conv(reg);
}

}  // namespace streamline::ops::cuda
