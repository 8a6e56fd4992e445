#pragma once
// Triton's shared memory extension: regions a client registers by name, from which the server
// reads inputs and into which it writes outputs (the request names a region, an offset and a
// byte size instead of carrying the data).
//
//   SharedMemoryRegistry shm;
//   SL_RETURN_IF_ERROR(shm.register_system("in0", "/my_key", /*offset=*/0, /*byte_size=*/64));
//   SL_ASSIGN_OR_RETURN(ShmWindow w, shm.window("in0", 0, 64));   // w.data: 64 bytes, mapped
//   SL_RETURN_IF_ERROR(shm.unregister_system("in0"));               // "" = every region
//
// System regions are POSIX shared memory objects (shm_open), mapped read-write once at register.
// A window keeps its region mapped while it is held, so unregistering during a request is safe.
// CUDA regions are a client's GPU allocation shared by its cudaIpcMemHandle_t (the CUDA backend
// opens it, runtime/device_ipc.h); inputs are copied from it and outputs into it. Without the
// backend, or without a GPU, registering one is refused with the reason. System and CUDA region
// names are looked up in that order.
// Thread-safe.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "streamline/serving.h"

namespace streamline::serve {

struct SystemRegionInfo {
  std::string name, key;
  uint64_t offset = 0, byte_size = 0;
};

struct CudaRegionInfo {
  std::string name;
  int64_t device_id = 0;
  uint64_t byte_size = 0;
};

// Bytes of a region, mapped while `hold` lives.
struct ShmWindow {
  std::shared_ptr<void> hold;
  char* data = nullptr;
  size_t size = 0;
};

// A request's reference to a region (the parameters shared_memory_region, shared_memory_offset,
// shared_memory_byte_size).
struct ShmRef {
  std::string region;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

// An input whose data is in shared memory.
struct ShmInput {
  std::string name;
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  ShmRef ref;
};

class SharedMemoryRegistry {
 public:
  SharedMemoryRegistry() = default;
  SharedMemoryRegistry(const SharedMemoryRegistry&) = delete;
  SharedMemoryRegistry& operator=(const SharedMemoryRegistry&) = delete;

  // Opens the object `key` and maps [offset, offset + byte_size) of it. InvalidArgument when the
  // name is taken or the range does not fit the object; NotFound when `key` does not exist.
  [[nodiscard]] Status register_system(const std::string& name, const std::string& key, uint64_t offset,
                                       uint64_t byte_size);
  // Forgets `name` ("" = every region); unknown names are not an error (as Triton).
  [[nodiscard]] Status unregister_system(const std::string& name);
  // Every region ("") or the one named (NotFound when unknown).
  [[nodiscard]] Result<std::vector<SystemRegionInfo>> system_status(const std::string& name) const;

  // Opens the client's allocation: `raw_handle` is its cudaIpcMemHandle_t (64 bytes) on GPU
  // `device_id`, `byte_size` bytes long. Unsupported without the CUDA backend, Unavailable when the
  // handle cannot be opened, InvalidArgument when the name is taken.
  [[nodiscard]] Status register_cuda(const std::string& name, const std::string& raw_handle, int64_t device_id,
                                     uint64_t byte_size);
  [[nodiscard]] Status unregister_cuda(const std::string& name);
  [[nodiscard]] Result<std::vector<CudaRegionInfo>> cuda_status(const std::string& name) const;

  // [offset, offset + byte_size) of the system region `name`, which must lie inside it.
  [[nodiscard]] Result<ShmWindow> window(const ShmRef& ref) const;
  // Copies [ref.offset, + n) of a region (system or CUDA) to `dst`, or `src` into it.
  [[nodiscard]] Status read_region(const ShmRef& ref, void* dst, size_t n) const;
  [[nodiscard]] Status write_region(const ShmRef& ref, const void* src, size_t n) const;

  // Inputs from shared memory into `request` (copied out, so the tensors are aligned and the
  // client may reuse its region once the response is back). The byte size must be exactly the
  // tensor's.
  [[nodiscard]] Status read_inputs(const std::vector<ShmInput>& inputs, InferRequest* request) const;
  // Copies `t` into the region `ref` names; InvalidArgument when it does not fit.
  [[nodiscard]] Status write_output(const std::string& name, const Tensor& t, const ShmRef& ref) const;

 private:
  struct Mapping;
  struct CudaRegion;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Mapping>> system_;
  std::map<std::string, std::shared_ptr<CudaRegion>> cuda_;
};

}  // namespace streamline::serve
