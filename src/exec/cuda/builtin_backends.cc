// The built-in backends of a build with CUDA: the CPU backend and the CUDA one (replaces
// exec/builtin_backends.cc; see exec/backend.h).

#include "exec/backend.h"
#include "exec/cuda/backend.h"

namespace streamline::exec {

Status register_builtin_backends(BackendRegistry& registry) {
  SL_RETURN_IF_ERROR(registry.add(make_cpu_backend()));
  SL_RETURN_IF_ERROR(registry.add(make_eager_backend()));
  return registry.add(cuda::make_cuda_backend());
}

}  // namespace streamline::exec
