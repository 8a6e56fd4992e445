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
// Ops (fp32, plain NCHW / row-major layouts only):
//   unary      Relu, Sigmoid, Tanh, Exp, Log, Sqrt, Neg, Abs, Erf, Reciprocal, Gelu (opset 20,
//              approximate="none"), streamline.Gelu (erf form)
//   binary     Add, Sub, Mul, Div with numpy broadcasting (rank <= 8)
//   Transpose  any permutation (rank <= 8)
//   Softmax    opset 13+: last axis only; opset 1-12: any axis (rows flattened at the axis)
//   LayerNormalization (opset 17) and streamline.LayerNormalization: Scale/B of the normalized
//              size; Mean/InvStdDev outputs not produced
//   Gemm, streamline.FusedGemm (activation Relu or none), MatMul: cuBLASLt, true fp32 compute
//              (no TF32), bias (C of shape [N] or [1,N], beta 1) in the epilogue, any other C
//              broadcast into the output first; MatMul batches that are equal, or broadcast on one
//              side only
//   Conv, streamline.FusedConv (activation Relu or none): cuDNN, 2-D, symmetric pads, groups,
//              dilations; bias and Relu as separate cuDNN calls on the output
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
// Not wired yet (the next step):
//   - the planner does not place nodes on Device::kCuda, the executor does not create CUDA streams,
//     events or device arenas, and there is no --device flag;
//   - initializers are not uploaded at create(): weights arrive as device inputs like activations,
//     so the executor must place constants on the device once per model;
//   - cuBLASLt/cuDNN descriptors and the algorithm choice are made in every run() (host work only,
//     no device allocation); caching them per shape in ReshapeResult::state needs a device at plan
//     time;
//   - fp16/bf16 and TF32, channels-last activations, fused Conv+bias+Relu in one cuDNN call (the
//     cuDNN graph API; Conv uses the legacy descriptor API, deprecated but supported in cuDNN 9).
//
// Thread-safety: registration is single-threaded; see registry.h.

#include "ops/registry.h"

namespace streamline::ops::cuda {

// Adds every CUDA kernel family to `reg`. Needs no device (kernels touch the GPU only in run()).
Status register_cuda_kernels(KernelRegistry& reg);

}  // namespace streamline::ops::cuda
