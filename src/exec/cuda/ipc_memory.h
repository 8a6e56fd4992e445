#pragma once
// CUDA IPC memory for the CUDA backend's Backend::import_ipc_memory (exec/backend.h): a
// cudaIpcMemHandle_t another process made, opened here and copied to and from host memory.
//
//   SL_ASSIGN_OR_RETURN(auto mem, exec::cuda::import_ipc_memory(raw_handle, /*device=*/0, 4096));
//   SL_RETURN_IF_ERROR(mem->read(/*offset=*/0, host_dst, 64));      // device -> host
//
// A handle cannot be opened in the process that made it (CUDA refuses). Copies are synchronous on
// the legacy default stream, so the object is thread-safe.

#include <cstddef>
#include <memory>
#include <string>

#include "exec/backend.h"

namespace streamline::exec::cuda {

// `raw_handle`: the cudaIpcMemHandle_t bytes (64). InvalidArgument for another size or a device
// that is not visible; Unavailable when CUDA cannot open it (no GPU, a handle of this process, a
// closed allocation).
[[nodiscard]] Result<std::unique_ptr<ImportedDeviceMemory>> import_ipc_memory(const std::string& raw_handle, int device,
                                                                              size_t bytes);

}  // namespace streamline::exec::cuda
