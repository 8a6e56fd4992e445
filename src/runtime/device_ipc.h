#pragma once
// GPU memory another process shares through a CUDA IPC handle (cudaIpcGetMemHandle): opened once,
// then copied to and from host memory. What Triton's CUDA shared memory extension needs.
//
//   SL_ASSIGN_OR_RETURN(auto mem, DeviceIpcMemory::open(raw_handle, /*device=*/0, /*bytes=*/4096));
//   SL_RETURN_IF_ERROR(mem->read(/*offset=*/0, host_dst, 64));      // device -> host
//   SL_RETURN_IF_ERROR(mem->write(/*offset=*/64, host_src, 32));    // host -> device
//
// The CUDA backend opens the handle (exec::Backend::import_ipc_memory); without it open() is
// Unsupported. A handle cannot be opened in the process that made it (CUDA refuses). Thread-safe:
// copies are synchronous on the legacy default stream.

#include <cstddef>
#include <memory>
#include <string>

#include "core/status.h"
#include "exec/backend.h"

namespace streamline::runtime {

class DeviceIpcMemory {
 public:
  // `raw_handle`: the cudaIpcMemHandle_t bytes (64). InvalidArgument for another size;
  // Unavailable when CUDA cannot open it (no GPU, a handle of this process, a closed allocation);
  // Unsupported in a build without the CUDA backend.
  [[nodiscard]] static Result<std::shared_ptr<DeviceIpcMemory>> open(const std::string& raw_handle, int device,
                                                                     size_t bytes);

  // InvalidArgument when [offset, offset + n) is not inside the region.
  [[nodiscard]] Status read(size_t offset, void* dst, size_t n) const { return memory_->read(offset, dst, n); }
  [[nodiscard]] Status write(size_t offset, const void* src, size_t n) { return memory_->write(offset, src, n); }
  size_t size() const { return memory_->size(); }
  int device() const { return memory_->device(); }

 private:
  explicit DeviceIpcMemory(std::unique_ptr<exec::ImportedDeviceMemory> memory) : memory_(std::move(memory)) {}
  std::unique_ptr<exec::ImportedDeviceMemory> memory_;
};

}  // namespace streamline::runtime
