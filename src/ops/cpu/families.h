#pragma once
// One registration function per CPU kernel family; register_cpu_kernels() calls them all.

#include "ops/registry.h"

namespace streamline::ops::cpu {

Status register_conv(KernelRegistry& reg);         // Conv, ConvTranspose, streamline.FusedConv (oneDNN)
Status register_matmul(KernelRegistry& reg);       // Gemm, MatMul, streamline.FusedGemm/FusedMatMul (oneDNN)
Status register_pool(KernelRegistry& reg);         // MaxPool, AveragePool, Global*Pool (oneDNN)
Status register_layout(KernelRegistry& reg);       // streamline.LayoutConvert (planner-inserted)
Status register_elementwise(KernelRegistry& reg);  // broadcasting binary ops, unary math and activations
Status register_softmax(KernelRegistry& reg);      // Softmax, LogSoftmax
Status register_reduce(KernelRegistry& reg);       // Reduce*, ArgMax/ArgMin
Status register_normalization(KernelRegistry& reg);// BatchNormalization, InstanceNormalization, LRN
Status register_cast(KernelRegistry& reg);         // Cast
Status register_shape_ops(KernelRegistry& reg);    // Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Identity, ...
Status register_tensor_ops(KernelRegistry& reg);   // Concat, Split, Transpose, Pad, Slice, Gather, Resize, ...

}  // namespace streamline::ops::cpu
