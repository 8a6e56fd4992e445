// CUDA IPC memory (device_ipc.h); Unsupported without the backend.

#include "runtime/device_ipc.h"

#if SL_HAVE_CUDA
#include <cuda_runtime.h>

#include <cstring>

#include "core/cuda/cuda_status.h"
#endif

namespace streamline::runtime {
namespace {

Status check_range(size_t offset, size_t n, size_t bytes) {
  if (offset > bytes || n > bytes - offset)
    return invalid_argument("CUDA shared memory: offset " + std::to_string(offset) + " + " + std::to_string(n) +
                            " bytes is past the region's " + std::to_string(bytes));
  return ok_status();
}

}  // namespace

#if SL_HAVE_CUDA

Result<std::shared_ptr<DeviceIpcMemory>> DeviceIpcMemory::open(const std::string& raw_handle, int device,
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
  return std::shared_ptr<DeviceIpcMemory>(new DeviceIpcMemory(ptr, device, bytes));
}

DeviceIpcMemory::~DeviceIpcMemory() {
  cudaSetDevice(device_);
  cudaIpcCloseMemHandle(ptr_);
}

Status DeviceIpcMemory::read(size_t offset, void* dst, size_t n) const {
  SL_RETURN_IF_ERROR(check_range(offset, n, bytes_));
  SL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_), "CUDA shared memory");
  SL_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, static_cast<const char*>(ptr_) + offset, n, cudaMemcpyDeviceToHost),
                          "CUDA shared memory read");
  return ok_status();
}

Status DeviceIpcMemory::write(size_t offset, const void* src, size_t n) {
  SL_RETURN_IF_ERROR(check_range(offset, n, bytes_));
  SL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_), "CUDA shared memory");
  SL_CUDA_RETURN_IF_ERROR(cudaMemcpy(static_cast<char*>(ptr_) + offset, src, n, cudaMemcpyHostToDevice),
                          "CUDA shared memory write");
  return ok_status();
}

#else

Result<std::shared_ptr<DeviceIpcMemory>> DeviceIpcMemory::open(const std::string&, int, size_t) {
  return unsupported("CUDA shared memory needs the CUDA backend; this build has none (use system shared memory)");
}

DeviceIpcMemory::~DeviceIpcMemory() = default;

Status DeviceIpcMemory::read(size_t offset, void*, size_t n) const {
  return check_range(offset, n, bytes_);
}
Status DeviceIpcMemory::write(size_t offset, const void*, size_t n) {
  return check_range(offset, n, bytes_);
}

#endif

}  // namespace streamline::runtime
