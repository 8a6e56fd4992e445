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
Status register_loss(KernelRegistry& reg);     // NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
Status register_rnn(KernelRegistry& reg);      // RNN, GRU, LSTM
Status register_quant(KernelRegistry& reg);    // Quantize/Dequantize, MatMulInteger, QLinear*, ConvInteger
Status register_quant_fused(KernelRegistry& reg);  // streamline.QConv, QMatMul, MatMulIntegerToFloat, QAdd, QMul, QLookup, QGlobalAveragePool
Status register_einsum(KernelRegistry& reg);   // Einsum
Status register_sampling(KernelRegistry& reg); // GridSample, RoiAlign
Status register_misc(KernelRegistry& reg);     // CumSum, TopK, Det, Shrink, ReverseSequence, MaxUnpool
Status register_optimizer(KernelRegistry& reg);  // Adagrad, Momentum, Adam (ai.onnx.preview.training)
Status register_signal(KernelRegistry& reg);   // DFT, TfIdfVectorizer
Status register_value_shaped(KernelRegistry& reg);  // NonZero, Unique, Compress, NonMaxSuppression, *Window
Status register_elementwise_program(KernelRegistry& reg);  // streamline.Elementwise (ref_ew.cc)

}  // namespace streamline::ops::reference
