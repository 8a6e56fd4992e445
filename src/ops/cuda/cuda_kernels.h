#pragma once
// The CUDA kernels: registered for Device::kCuda in their own registry, never in the default CPU one.
//
//   KernelRegistry reg;
//   SL_RETURN_IF_ERROR(ops::cuda::register_cuda_kernels(reg));
//   SL_ASSIGN_OR_RETURN(const KernelDef* def, reg.find("Conv", "", 13, Device::kCuda, DType::kFloat32));
//   ... create / reshape as for CPU kernels, then:
//   RunContext rc{inputs, outputs, workspace, state};   // device pointers, see below
//   rc.device_stream = stream;                           // a cudaStream_t
//   SL_RETURN_IF_ERROR(kernel->run(rc));                 // enqueued; synchronise the stream to wait
//
// Ops (plain NCHW / row-major layouts only; float ops registered for float32 and float16, fp16
// computed in fp32: rows of Softmax/LayerNorm, reductions, GEMM and conv accumulation):
//   unary      Relu, Sigmoid, Tanh, Exp, Log, Sqrt, Neg, Abs, Erf, Reciprocal, Gelu (opset 20,
//              approximate="none"), streamline.Gelu (erf form); Clip (bounds from attributes before
//              opset 11, from the inputs, read on the device, after)
//   binary     Add, Sub, Mul, Div with numpy broadcasting (rank <= 8)
//   Transpose  any permutation (rank <= 8)
//   Softmax    opset 13+: last axis only; opset 1-12: any axis (rows flattened at the axis)
//   LayerNormalization (opset 17) and streamline.LayerNormalization: Scale/B of the normalized
//              size and of X's dtype; Mean/InvStdDev outputs not produced
//   Gemm, MatMul, streamline.FusedGemm, streamline.FusedMatMul: cuBLASLt. fp32: true fp32, or TF32
//              with KernelOptions::precision = kTf32; fp16: CUDA_R_16F with fp32 compute. A bias
//              that cuBLASLt adds exactly and Relu in cuBLASLt's epilogue; any other C and every
//              other activation (LeakyRelu, Clip, Sigmoid, HardSigmoid, Tanh, erf Gelu) in our
//              one-pass epilogue kernel (epilogue.cu)
//   Conv, streamline.FusedConv (X, W, B, Z; every activation but Gelu): cuDNN, 2-D, symmetric
//              pads, groups, dilations; TF32 or fp16 tensor ops on request; bias + residual Z +
//              activation in one epilogue pass (Y may share Z's buffer)
//   MaxPool, AveragePool (1-D and 2-D, pads, auto_pad, dilations, ceil_mode), GlobalAveragePool,
//              GlobalMaxPool: own kernels (pool.cu); MaxPool's Indices output is refused
//   ReduceSum, ReduceMean, ReduceMax (axes as attribute or constant input, keepdims)
//   Cast       between float32, float16, int32, int64 and bool
//   data movement, every dtype: Concat, Slice, Gather (out-of-range indices give zeros: the host
//              cannot check device indices without a synchronisation), Reshape, Flatten, Squeeze,
//              Unsqueeze, Identity, Dropout (inference) -- the view ops may alias their input
//   streamline.Attention: one fused kernel (attention.cu), flash style: per (batch*head, query
//              tile) block, key tiles in shared memory, online softmax in fp32, no score tensor;
//              head dims up to 128; fp16 on CUDA cores (no tensor-core path yet)
//
// Where device data lives (decision). Tensor carries no device tag: a kernel registered for
// Device::kCuda is handed Tensors whose raw() are device pointers (inputs, outputs) and a device
// workspace; the placement is a property of the plan (every value a CUDA node reads or writes is
// planned in a device arena), not of each Tensor. Shapes, dtypes and constant values given to
// create() and reshape() are host data. This keeps Tensor unchanged for the CPU path; a debug
// check with cudaPointerGetAttributes can be added at the executor boundary.
//
// run() never synchronises and never allocates device memory: scratch (cuBLASLt and cuDNN
// workspaces) comes from RunContext::workspace, sized by reshape(). Kernel objects are immutable
// and may run concurrently on different streams.
//
// Wiring: the runtime loads a model for "cuda[:N]" with a registry of these kernels plus the CPU
// ones (exec/cuda/backend.h); the planner folds the CPU-only shape arithmetic and refuses any
// other CPU node (plan/planner.h); exec/cuda/executor.h runs the plan on CUDA streams and events,
// uploads constants once per model and GPU, and captures plans into CUDA graphs.
// Still open: cuBLASLt/cuDNN descriptors and algorithm choices are made in every run() (host work
// only, and replayed graphs skip it); bf16; channels-last activations; the conv epilogue is one
// extra pass (the cuDNN graph API would fuse it into the convolution).
//
// Thread-safety: registration is single-threaded; see registry.h.

#include "ops/registry.h"

namespace streamline::ops::cuda {

// Adds every CUDA kernel family to `reg`. Needs no device (kernels touch the GPU only in run()).
Status register_cuda_kernels(KernelRegistry& reg);

}  // namespace streamline::ops::cuda
