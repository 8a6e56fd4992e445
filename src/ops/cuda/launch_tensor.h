#pragma once
// Launchers of the pooling, reduction, conversion and data-movement kernels (pool.cu,
// tensor_ops.cu), in plain types so that the kernel classes (.cc, host compiler) and nvcc share
// nothing heavier than this header.
//
//   PoolDims d = ...;                               // filled by the MaxPool kernel class
//   cudaError_t e = launch_pool2d(PoolOp::kMax, ElemType::kF16, x, y, d, stream);  // cudaGetLastError()
//
// Every launcher enqueues on `stream` and returns the launch error (not the kernel's outcome, which
// the stream reports later); none allocates, synchronises or reads device data on the host, so all
// may be captured into a CUDA graph. An empty output launches nothing. Float kernels take float32
// or float16 (`__half` on the device) and accumulate in float32.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace streamline::ops::cuda {

// Largest rank of the index arithmetic below, after size-1 dims are dropped and dims that walk
// memory as one are merged.
inline constexpr int kMaxCopyRank = 8;

// Element types of the typed kernels; kBool is one byte, 0 or 1.
enum class ElemType : int32_t { kF32, kF16, kI32, kI64, kBool };

// ---- pool.cu -----------------------------------------------------------------------------------

enum class PoolOp : int32_t { kMax, kAvg };

// A 2-D pooling window over `planes` (N * C) dense [in_h, in_w] planes into [out_h, out_w] ones.
// Output (oh, ow) reads rows oh * s_h - pad_top + i * d_h (columns likewise); taps outside the
// input are skipped. AveragePool divides by the taps inside the input, or with count_include_pad by
// the taps in rows < limit_h and columns < limit_w (the input plus its end padding).
struct PoolDims {
  int64_t planes = 0;
  int64_t in_h = 1, in_w = 1, out_h = 1, out_w = 1;
  int64_t k_h = 1, k_w = 1, s_h = 1, s_w = 1, d_h = 1, d_w = 1;
  int64_t pad_top = 0, pad_left = 0;
  int64_t limit_h = 1, limit_w = 1;
  bool count_include_pad = false;
};

cudaError_t launch_pool2d(PoolOp op, ElemType t, const void* x, void* y, const PoolDims& d, cudaStream_t stream);

enum class ReduceOp : int32_t { kSum, kMean, kMax };

// y[o] = reduction over r of x[kept offset of o + reduced offset of r]; o and r are row-major over
// their dims, offsets are sums of index * stride (in elements). Global pools and Reduce* use it.
struct ReduceDims {
  int32_t kept_rank = 0;
  int64_t kept[kMaxCopyRank] = {};
  int64_t kept_stride[kMaxCopyRank] = {};
  int32_t red_rank = 0;
  int64_t red[kMaxCopyRank] = {};
  int64_t red_stride[kMaxCopyRank] = {};
  int64_t out_numel = 0;
  int64_t red_numel = 0;
  // The input's innermost dim is reduced: a warp per output reads contiguous runs. Otherwise a
  // thread per output, neighbouring threads reading neighbouring elements.
  bool inner_reduced = false;
};

// Float types only. An empty reduction gives 0 (Sum), NaN (Mean) or -inf (Max).
cudaError_t launch_reduce(ReduceOp op, ElemType t, const void* x, void* y, const ReduceDims& d, cudaStream_t stream);

// ---- tensor_ops.cu -----------------------------------------------------------------------------

// y[i] = convert(x[i]) between any two ElemTypes, with the CPU Cast's rules: float -> integer
// truncates toward zero, saturates and maps NaN to 0; integer -> narrower integer wraps; anything
// -> bool is x != 0; bool -> number is 0 or 1; integer -> float16 rounds through float32.
cudaError_t launch_cast(ElemType from, ElemType to, const void* x, void* y, int64_t n, cudaStream_t stream);

// y[i] = min(max(x[i], lo), hi) for a float type. A non-null lo_dev / hi_dev (one element of type
// `t` in device memory) replaces lo / hi when the kernel runs, so bounds computed on the device work.
cudaError_t launch_clip(ElemType t, const void* x, void* y, int64_t n, float lo, float hi, const void* lo_dev,
                        const void* hi_dev, cudaStream_t stream);

// A gather copy of `elem_bytes` (1, 2, 4 or 8) elements: y[i] = x[offset + sum_d idx_d(i) *
// in_stride[d]] over the output dims. Strides may be negative (Slice with negative steps).
struct StridedDims {
  int32_t rank = 0;
  int64_t out[kMaxCopyRank] = {};
  int64_t in_stride[kMaxCopyRank] = {};
  int64_t offset = 0;
};
cudaError_t launch_strided_gather(const void* x, void* y, int64_t n, int32_t elem_bytes, const StridedDims& d,
                                  cudaStream_t stream);

// `rows` rows of `row_bytes` bytes from x (row o at o * x_pitch) to y (row o at o * y_pitch): one
// input of a Concat. Moves 16, 8, 4, 2 or 1 bytes per thread, whatever the alignment allows.
cudaError_t launch_copy_rows(const void* x, int64_t x_pitch, void* y, int64_t y_pitch, int64_t row_bytes, int64_t rows,
                             cudaStream_t stream);

// Gather along an axis of `data` viewed as [outer, axis_dim, inner_bytes]: y viewed as [outer,
// num_indices, inner_bytes] takes row indices[j] (int32 or int64, negative counts from the end).
// An index outside [-axis_dim, axis_dim) yields zero bytes (the host cannot check device indices).
cudaError_t launch_gather(const void* data, const void* indices, bool indices_int64, void* y, int64_t outer,
                          int64_t axis_dim, int64_t num_indices, int64_t inner_bytes, cudaStream_t stream);

}  // namespace streamline::ops::cuda
