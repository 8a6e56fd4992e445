#pragma once
// One registration function per CPU kernel family; register_cpu_kernels() calls them all.

#include "ops/registry.h"

namespace streamline::ops::cpu {

Status register_conv(KernelRegistry& reg);         // Conv, ConvTranspose, streamline.FusedConv (oneDNN)
Status register_conv_direct(KernelRegistry& reg);  // Col2Im, DeformConv
Status register_matmul(KernelRegistry& reg);       // Gemm, MatMul, streamline.FusedGemm/FusedMatMul (oneDNN)
Status register_matmul_types(KernelRegistry& reg); // MatMul for float64, float16, bfloat16 and 32/64-bit ints
Status register_pool(KernelRegistry& reg);         // MaxPool, AveragePool, Global*Pool (oneDNN)
Status register_pool_direct(KernelRegistry& reg);  // LpPool, GlobalLpPool; other dtypes, MaxPool Indices
Status register_layout(KernelRegistry& reg);       // streamline.LayoutConvert (planner-inserted)
Status register_elementwise(KernelRegistry& reg);  // broadcasting binary ops, unary math and activations
Status register_softmax(KernelRegistry& reg);      // Softmax, LogSoftmax
Status register_reduce(KernelRegistry& reg);       // Reduce*, ArgMax/ArgMin
Status register_normalization(KernelRegistry& reg);// BatchNormalization, InstanceNormalization, LRN
Status register_normalization_more(KernelRegistry& reg);  // GroupNormalization, LpNormalization
Status register_cast(KernelRegistry& reg);         // Cast
Status register_bitwise(KernelRegistry& reg);      // BitwiseAnd/Or/Xor/Not, BitCast
Status register_shape_ops(KernelRegistry& reg);    // Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Identity, ...
Status register_tensor_ops(KernelRegistry& reg);   // Concat, Split, Transpose, Pad, Slice, Gather, Resize, ...
Status register_loss(KernelRegistry& reg);         // NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
Status register_transformer(KernelRegistry& reg);  // streamline.Gelu
Status register_attention(KernelRegistry& reg);    // streamline.Attention, ONNX Attention, RotaryEmbedding
Status register_onnx_attention(KernelRegistry& reg);  // ONNX Attention (23+), part of register_attention
Status register_rotary(KernelRegistry& reg);       // RotaryEmbedding (23+), part of register_attention
Status register_rnn(KernelRegistry& reg);          // RNN, GRU, LSTM
Status register_elementwise_types(KernelRegistry& reg);  // arithmetic, Max/Min, Clip: 8/16-bit, unsigned, f16, f64
Status register_reduce_types(KernelRegistry& reg); // Reduce* for float64, float16, bfloat16
Status register_unary_types(KernelRegistry& reg);  // unary math, IsNaN/IsInf, Gelu: float64, float16, bfloat16
Status register_quant(KernelRegistry& reg);        // QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear
Status register_qconv(KernelRegistry& reg);        // QLinearConv, ConvInteger, streamline.QConv (oneDNN int8)
Status register_qmatmul(KernelRegistry& reg);      // QLinearMatMul, MatMulInteger, streamline.QMatMul/MatMulIntegerToFloat
Status register_qelementwise(KernelRegistry& reg); // streamline.QAdd, streamline.QGlobalAveragePool, 8-bit MaxPool
Status register_einsum(KernelRegistry& reg);       // Einsum
Status register_sampling(KernelRegistry& reg);     // GridSample, RoiAlign
Status register_misc_ops(KernelRegistry& reg);     // CumSum, TopK, Det, Shrink, ReverseSequence, MaxUnpool
Status register_optimizer(KernelRegistry& reg);    // Adagrad, Momentum, Adam (ai.onnx.preview.training)
Status register_signal(KernelRegistry& reg);       // DFT, TfIdfVectorizer
Status register_value_shaped(KernelRegistry& reg); // NonZero, Unique, Compress, NMS, *Window (constant inputs)
Status register_control_flow(KernelRegistry& reg); // If, Loop, Scan, SequenceMap (run eagerly: ops/eager.h)
Status register_sequence(KernelRegistry& reg);     // Sequence*, SplitToSequence, ConcatFromSequence, Optional*
Status register_strings(KernelRegistry& reg);      // String*, RegexFullMatch; strings in Equal, Identity, Cast
Status register_string_moves(KernelRegistry& reg); // Reshape, Gather, Concat, Where, ... on strings (by index)
Status register_label_encoder(KernelRegistry& reg);// ai.onnx.ml LabelEncoder
Status register_fused_elementwise(KernelRegistry& reg);  // streamline.Elementwise (ew_kernel.cc)
Status register_ml_ops(KernelRegistry& reg);       // ai.onnx.ml Binarizer, ArrayFeatureExtractor, TreeEnsemble

}  // namespace streamline::ops::cpu
