#include "ops/cpu/families.h"

namespace streamline::ops {

Status register_cpu_kernels(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(cpu::register_conv(reg));
  SL_RETURN_IF_ERROR(cpu::register_conv_direct(reg));
  SL_RETURN_IF_ERROR(cpu::register_matmul(reg));
  SL_RETURN_IF_ERROR(cpu::register_matmul_types(reg));
  SL_RETURN_IF_ERROR(cpu::register_pool(reg));
  SL_RETURN_IF_ERROR(cpu::register_pool_direct(reg));
  SL_RETURN_IF_ERROR(cpu::register_layout(reg));
  SL_RETURN_IF_ERROR(cpu::register_elementwise(reg));
  SL_RETURN_IF_ERROR(cpu::register_softmax(reg));
  SL_RETURN_IF_ERROR(cpu::register_reduce(reg));
  SL_RETURN_IF_ERROR(cpu::register_normalization(reg));
  SL_RETURN_IF_ERROR(cpu::register_normalization_more(reg));
  SL_RETURN_IF_ERROR(cpu::register_cast(reg));
  SL_RETURN_IF_ERROR(cpu::register_bitwise(reg));
  SL_RETURN_IF_ERROR(cpu::register_shape_ops(reg));
  SL_RETURN_IF_ERROR(cpu::register_tensor_ops(reg));
  SL_RETURN_IF_ERROR(cpu::register_loss(reg));
  SL_RETURN_IF_ERROR(cpu::register_transformer(reg));
  SL_RETURN_IF_ERROR(cpu::register_attention(reg));
  SL_RETURN_IF_ERROR(cpu::register_rnn(reg));
  SL_RETURN_IF_ERROR(cpu::register_elementwise_types(reg));
  SL_RETURN_IF_ERROR(cpu::register_reduce_types(reg));
  SL_RETURN_IF_ERROR(cpu::register_unary_types(reg));
  SL_RETURN_IF_ERROR(cpu::register_quant(reg));
  SL_RETURN_IF_ERROR(cpu::register_qconv(reg));
  SL_RETURN_IF_ERROR(cpu::register_qmatmul(reg));
  SL_RETURN_IF_ERROR(cpu::register_qelementwise(reg));
  SL_RETURN_IF_ERROR(cpu::register_einsum(reg));
  SL_RETURN_IF_ERROR(cpu::register_sampling(reg));
  SL_RETURN_IF_ERROR(cpu::register_misc_ops(reg));
  SL_RETURN_IF_ERROR(cpu::register_optimizer(reg));
  SL_RETURN_IF_ERROR(cpu::register_signal(reg));
  SL_RETURN_IF_ERROR(cpu::register_value_shaped(reg));
  SL_RETURN_IF_ERROR(cpu::register_control_flow(reg));
  SL_RETURN_IF_ERROR(cpu::register_sequence(reg));
  SL_RETURN_IF_ERROR(cpu::register_strings(reg));
  // After every family whose byte movers it wraps.
  SL_RETURN_IF_ERROR(cpu::register_string_moves(reg));
  SL_RETURN_IF_ERROR(cpu::register_label_encoder(reg));
  SL_RETURN_IF_ERROR(cpu::register_fused_elementwise(reg));
  SL_RETURN_IF_ERROR(cpu::register_ml_ops(reg));
  return ok_status();
}

}  // namespace streamline::ops
