#include "ops/reference/reference.h"

namespace streamline::ops {

Status register_reference_kernels(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(reference::register_conv(reg));
  SL_RETURN_IF_ERROR(reference::register_matmul(reg));
  SL_RETURN_IF_ERROR(reference::register_pool(reg));
  SL_RETURN_IF_ERROR(reference::register_math(reg));
  SL_RETURN_IF_ERROR(reference::register_data(reg));
  return ok_status();
}

}  // namespace streamline::ops
