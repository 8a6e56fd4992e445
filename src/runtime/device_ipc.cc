// CUDA IPC memory (device_ipc.h), opened by the CUDA backend; Unsupported without it.

#include "runtime/device_ipc.h"

#include "runtime/device.h"

namespace streamline::runtime {

Result<std::shared_ptr<DeviceIpcMemory>> DeviceIpcMemory::open(const std::string& raw_handle, int device,
                                                               size_t bytes) {
  auto backend = backend_for(ops::Device::kCuda);
  if (!backend.ok())
    return unsupported("CUDA shared memory needs the CUDA backend; this build has none (use system shared memory)");
  SL_ASSIGN_OR_RETURN(std::unique_ptr<exec::ImportedDeviceMemory> memory,
                      (*backend)->import_ipc_memory(raw_handle, device, bytes));
  return std::shared_ptr<DeviceIpcMemory>(new DeviceIpcMemory(std::move(memory)));
}

}  // namespace streamline::runtime
