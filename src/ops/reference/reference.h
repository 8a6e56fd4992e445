#pragma once
// Plain reference kernels: simple loops, no oneDNN, no SIMD, one thread. Each optimised kernel is
// tested against the reference for the same op on random shapes with a fixed seed.

#include "ops/registry.h"

namespace streamline::ops::reference {

Status register_conv(KernelRegistry& reg);     // Conv, ConvTranspose, streamline.FusedConv
Status register_matmul(KernelRegistry& reg);   // Gemm, MatMul, streamline.FusedGemm/FusedMatMul
Status register_pool(KernelRegistry& reg);     // MaxPool, AveragePool, Global*Pool
Status register_math(KernelRegistry& reg);     // elementwise, Softmax, reductions (plain loops)
Status register_data(KernelRegistry& reg);     // Concat, Transpose, Resize, Pad, Slice, Gather (plain loops)

}  // namespace streamline::ops::reference
