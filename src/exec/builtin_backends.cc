// The built-in backends of a build without CUDA (with CUDA, exec/cuda/builtin_backends.cc
// replaces this file; see exec/backend.h).

#include "exec/backend.h"

namespace streamline::exec {

Status register_builtin_backends(BackendRegistry& registry) {
  SL_RETURN_IF_ERROR(registry.add(make_cpu_backend()));
  return registry.add(make_eager_backend());
}

}  // namespace streamline::exec
