// CUDA IPC memory (exec/cuda/ipc_memory.h).

#include "exec/cuda/ipc_memory.h"

#include <cuda_runtime.h>

#include <cstring>

#include "core/cuda/cuda_status.h"

namespace streamline::exec::cuda {
namespace {

class CudaIpcMemory final : public ImportedDeviceMemory {
 public:
  CudaIpcMemory(void* ptr, int device, size_t bytes) : ImportedDeviceMemory(device, bytes), ptr_(ptr) {}
  ~CudaIpcMemory() override {
    cudaSetDevice(device());
    cudaIpcCloseMemHandle(ptr_);
  }
  CudaIpcMemory(const CudaIpcMemory&) = delete;
  CudaIpcMemory& operator=(const CudaIpcMemory&) = delete;

 protected:
  Status copy_to_host(size_t offset, void* dst, size_t n) const override {
    SL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device()), "CUDA shared memory");
    SL_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, static_cast<const char*>(ptr_) + offset, n, cudaMemcpyDeviceToHost),
                            "CUDA shared memory read");
    return ok_status();
  }
  Status copy_from_host(size_t offset, const void* src, size_t n) override {
    SL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device()), "CUDA shared memory");
    SL_CUDA_RETURN_IF_ERROR(cudaMemcpy(static_cast<char*>(ptr_) + offset, src, n, cudaMemcpyHostToDevice),
                            "CUDA shared memory write");
    return ok_status();
  }

 private:
  void* ptr_;
};

}  // namespace

Result<std::unique_ptr<ImportedDeviceMemory>> import_ipc_memory(const std::string& raw_handle, int device,
                                                                size_t bytes) {
  cudaIpcMemHandle_t handle;
  if (raw_handle.size() != sizeof handle)
    return invalid_argument("CUDA shared memory: raw_handle has " + std::to_string(raw_handle.size()) +
                            " bytes; a cudaIpcMemHandle_t has " + std::to_string(sizeof handle));
  std::memcpy(&handle, raw_handle.data(), sizeof handle);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return unavailable("CUDA shared memory: no CUDA GPU is visible to the server");
  }
  if (device < 0 || device >= count)
    return invalid_argument("CUDA shared memory: device_id " + std::to_string(device) + " is not one of the " +
                            std::to_string(count) + " visible GPUs");
  SL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device), "CUDA shared memory");
  void* ptr = nullptr;
  const cudaError_t e = cudaIpcOpenMemHandle(&ptr, handle, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return unavailable(std::string("CUDA shared memory: cannot open the IPC handle: ") + cudaGetErrorString(e));
  }
  return std::unique_ptr<ImportedDeviceMemory>(new CudaIpcMemory(ptr, device, bytes));
}

}  // namespace streamline::exec::cuda
