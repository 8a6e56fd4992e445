#include "ops/reference/reference.h"

#include "ops/reference/ref_transformer.h"

namespace streamline::ops {

Status register_reference_kernels(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(reference::register_conv(reg));
  SL_RETURN_IF_ERROR(reference::register_matmul(reg));
  SL_RETURN_IF_ERROR(reference::register_pool(reg));
  SL_RETURN_IF_ERROR(reference::register_math(reg));
  SL_RETURN_IF_ERROR(reference::register_data(reg));
  SL_RETURN_IF_ERROR(reference::register_loss(reg));
  SL_RETURN_IF_ERROR(reference::register_rnn(reg));
  SL_RETURN_IF_ERROR(reference::register_quant(reg));
  SL_RETURN_IF_ERROR(reference::register_quant_fused(reg));
  SL_RETURN_IF_ERROR(reference::register_einsum(reg));
  SL_RETURN_IF_ERROR(reference::register_sampling(reg));
  SL_RETURN_IF_ERROR(reference::register_misc(reg));
  SL_RETURN_IF_ERROR(reference::register_optimizer(reg));
  SL_RETURN_IF_ERROR(reference::register_signal(reg));
  SL_RETURN_IF_ERROR(reference::register_value_shaped(reg));
  SL_RETURN_IF_ERROR(reference::register_elementwise_program(reg));
  SL_RETURN_IF_ERROR(reference::register_transformer(reg));
  SL_RETURN_IF_ERROR(reference::register_attention(reg));
  return ok_status();
}

}  // namespace streamline::ops
