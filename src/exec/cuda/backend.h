#pragma once
// The CUDA backend (exec/backend.h): plans made from the CUDA kernels and the CPU ones, run by
// CudaExecutionContexts; a model's weights live once per GPU (DeviceConstants), uploaded when a
// context there first needs them. Registered by register_builtin_backends in CUDA builds.
//
//   SL_RETURN_IF_ERROR(registry.add(exec::cuda::make_cuda_backend()));

#include <memory>

#include "exec/backend.h"

namespace streamline::exec::cuda {

std::unique_ptr<Backend> make_cuda_backend();

}  // namespace streamline::exec::cuda
